// Package cluster assembles a simulated cluster from a validated
// config.Config: the event loop, the fabric (topology, port settings,
// forwarding mode) and the virtual hosts. It is the one place that
// translates the user's YAML vocabulary into the fabric's and endpoint's
// types. It knows no transport but through the kinds registered with
// RegisterTransport (transport.go), and nothing of experiments.
package cluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/pathquality"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// FabricOptions derives the fabric's options from a validated config: one
// PortConfig per port role (fabric-facing, host-facing, NIC), ECN off at the
// last hop unless ecn.lastHop, PFC on the configured priorities.
func FabricOptions(c config.Config) (fabric.Options, error) {
	f := c.Fabric
	mode, ok := fabric.ParseForwardingMode(f.Forwarding)
	if !ok {
		return fabric.Options{}, fmt.Errorf("fabric.forwarding: unknown mode %q", f.Forwarding)
	}
	maxFrame := fabric.EthHeaderLen + fabric.IPv6HeaderLen + f.MTU // outer uSID header + the IPv6 packet
	q := f.Queue
	base := fabric.PortConfig{
		BufferBytes: q.BufferBytes,
		IFGBytes:    f.IFGBytes,
		// A rate-scaled preset is resolved per port once the topology is
		// built (BuildTopology); these are its values at the fabric rate.
		ECN:     ecnAt(c.EffectiveECN(), f.FabricLinkBps(), 0, 0),
		Trim:    fabric.TrimConfig{Enabled: q.Trim.Enabled, Size: q.Trim.SizeBytes, QueueBytes: max(64<<10, 16*q.Trim.SizeBytes)},
		Classes: fabric.DefaultClassMap(),
	}
	fab, host, nic := base, base, base
	host.ECN.Enabled = q.ECN.Enabled && q.ECN.LastHop
	nic.ECN.Enabled, nic.Trim.Enabled = false, false
	o := fabric.Options{Mode: mode, ECMPSeed: f.ECMPSeed, FabricPort: &fab, HostFacingPort: &host, NICPort: &nic, MaxFrame: maxFrame}
	if c.TorMulticastEnabled() {
		// Every T0 a programmable ToR (OrderRE: fabric/tor_multicast.go).
		tm := f.TorMulticast.Fabric()
		o.TorMulticast = &tm
	}
	if q.PFC.Enabled {
		p := &fabric.PFCConfig{Enabled: true, Xoff: q.PFC.XoffBytes, Xon: q.PFC.XonBytes,
			WatchdogOn: q.PFC.Watchdog.Enabled, Detection: q.PFC.Watchdog.DetectionTime(), Restoration: q.PFC.Watchdog.RestorationTime()}
		if q.PFC.Mode == config.PFCDynamic {
			d := fabric.DynamicPFC(f.HostLinkBps())
			p.Dynamic, p.Reserve, p.ResumeOffset, p.NICRate = true, d.Reserve, d.ResumeOffset, d.NICRate
			p.SharedBuffer = q.PFC.SharedBufferBytes
		}
		for _, pr := range q.PFC.Priorities {
			p.Lossless |= 1 << pr
		}
		rate := max(f.HostLinkBps(), f.FabricLinkBps())
		// A link's delay here is its propagation delay plus the sending
		// switch's forwarding latency: the PAUSE a switch sends crosses its
		// pipeline, and frames the upstream switch sent before it heard are
		// in its pipeline as well as on the wire (fabric.Link.Pipeline).
		delay := max(f.HostLinkPropDelay(), f.FabricLinkPropDelay()) + f.SwitchPipeline()
		// Headroom: what arrives after XOFF leaves — 3 × rate × delay (or
		// the configured bytes) plus a maximum frame at each end.
		p.Headroom = q.PFC.Headroom(rate, delay) + 2*maxFrame
		// Validated: an unknown action cannot reach here (fabric.WatchdogDrop if so).
		p.WatchdogAct, _ = fabric.ParseWatchdogAction(q.PFC.Watchdog.Action)
		o = o.WithPFC(p)
	}
	return o, nil
}

// ecnAt is the fabric's marking for a port of rate under e (see
// config.ECNConfig.Thresholds for baseRTT and packetBytes).
func ecnAt(e config.ECNConfig, rate uint64, baseRTT time.Duration, packetBytes int) fabric.ECNConfig {
	t := e.Thresholds(rate, baseRTT, packetBytes)
	return fabric.ECNConfig{Enabled: e.Enabled, Kmin: t.KminBytes, Kmax: t.KmaxBytes, Pmax: t.Pmax}
}

// BuildTopology builds the fabric the config describes on loop.
func BuildTopology(loop *sim.Loop, c config.Config) (*fabric.Topology, error) {
	o, err := FabricOptions(c)
	if err != nil {
		return nil, err
	}
	f := c.Fabric
	var topo *fabric.Topology
	switch f.Topology {
	case config.TopologyFatTree:
		// Validation guarantees one link speed and delay throughout.
		topo, err = fabric.BuildFatTree(loop, fabric.FatTreeSpec{K: f.K, Rate: f.HostLinkBps(), Delay: f.HostLinkPropDelay(),
			SwitchLatency: f.SwitchPipeline()}, o)
	default:
		topo, err = fabric.BuildClos(loop, fabric.ClosSpec{Planes: f.Planes, HostsPerT0: f.HostsPerT0, T0: f.T0PerPlane, T1: f.T1PerPlane,
			HostRate: f.HostLinkBps(), FabricRate: f.FabricLinkBps(), HostDelay: f.HostLinkPropDelay(), FabricDelay: f.FabricLinkPropDelay(),
			SwitchLatency: f.SwitchPipeline()}, o)
	}
	if err != nil {
		return nil, err
	}
	if p := f.Queue.PFC; p.Enabled && p.Mode == config.PFCDynamic {
		// HPCC's threshold is a shift of what the shared buffer keeps after
		// every port's headroom and reserve: with none left every lossless
		// ingress would pause at its first byte past the reserve.
		for _, s := range topo.Switches {
			if a := s.PFC(); a != nil && a.SharedFree() < 2*(f.MTU+fabric.EthHeaderLen+fabric.IPv6HeaderLen) {
				return nil, fmt.Errorf("fabric.queue.pfc.sharedBufferBytes: switch %s keeps %d B after its ports' headroom and reserve, want at least two frames (%d B): raise it (0 = the sum of the port buffers) or lower the headroom",
					s.Name, a.SharedFree(), 2*(f.MTU+fabric.EthHeaderLen+fabric.IPv6HeaderLen))
			}
		}
	}
	if e := c.EffectiveECN(); e.Enabled && config.ECNRateScaled(e.Preset) {
		if err := scaleECN(topo, c); err != nil {
			return nil, err
		}
	}
	return topo, nil
}

// scaleECN resolves a rate-scaled ECN preset at every marking port of
// topo, by its own link rate. htsim's thresholds are fractions of the
// port's bandwidth-delay product over the fabric's base RTT (BaseRTT), in
// whole full-MTU frames as the queue counts them; a Kmax beyond the port
// buffer is refused (config.Validate checks the other presets).
func scaleECN(topo *fabric.Topology, c config.Config) error {
	e, buf := c.EffectiveECN(), c.Fabric.Queue.BufferBytes
	cl := &Cluster{Config: c, Topo: topo}
	rtt := cl.BaseRTT()
	// htsim counts its thresholds in its data packets: the transport's
	// full data packet when it is shorter than fabric.mtu (MRC's), else a
	// full-MTU frame.
	pkt := c.Fabric.MTU
	if k, ok := transports[c.Transport.Kind]; ok && k.DataPacketBytes != nil {
		pkt = min(pkt, k.DataPacketBytes(c))
	}
	frame := fabric.EthHeaderLen + pkt + fabric.FCSLen
	if topo.Mode == fabric.ForwardUSID {
		frame += fabric.IPv6HeaderLen
	}
	var err error
	topo.SetECNByRate(func(rate uint64) fabric.ECNConfig {
		ecn := ecnAt(e, rate, rtt, frame)
		if ecn.Kmax > buf && err == nil {
			err = fmt.Errorf("fabric.queue.bufferBytes: must be ≥ %d, the Kmax of fabric.queue.ecn.preset %q at %s (base RTT %v), got %d",
				ecn.Kmax, e.Preset, units.FormatSpeed(rate), rtt, buf)
		}
		return ecn
	})
	return err
}

// ECN is the marking every switch port uses, by role and link rate (the
// resolved fabric.queue.ecn.preset).
func (c *Cluster) ECN() []fabric.PortECN { return c.Topo.ECNByRate() }

// ECNSummary describes the resolved marking for reports, e.g.
// `ECN preset dcqcn-sigcomm15: fabric ports at 400G Kmin 5000 B, Kmax
// 200000 B, Pmax 0.01; host-facing ports at 400G off`.
func (c *Cluster) ECNSummary() string {
	e := c.Config.EffectiveECN()
	if !e.Enabled {
		return "ECN off"
	}
	parts := []string{}
	for _, p := range c.ECN() {
		role := "fabric ports"
		if p.HostFacing {
			role = "host-facing ports"
		}
		m := "off"
		if p.ECN.Enabled {
			m = fmt.Sprintf("Kmin %d B, Kmax %d B, Pmax %g", p.ECN.Kmin, p.ECN.Kmax, p.ECN.Pmax)
		}
		parts = append(parts, fmt.Sprintf("%s at %s %s", role, units.FormatSpeed(p.RateBps), m))
	}
	name := e.Preset
	if c.Config.Fabric.Queue.ECN.Preset == config.ECNAuto {
		name = fmt.Sprintf("auto → %s (%s's reference)", e.Preset, c.Config.Transport.Kind)
	}
	return fmt.Sprintf("ECN preset %s: %s", name, strings.Join(parts, "; "))
}

// Cluster is a built simulation: loop, fabric and hosts.
type Cluster struct {
	Config config.Config
	Loop   *sim.Loop
	Topo   *fabric.Topology
	Hosts  []*endpoint.Host

	par    *partitioned // set by NewPartitioned (partition.go)
	planes qpPlanes     // single-plane QPs per host, for the plane spread (transport.go)

	probers []*evProber // per host: EV Probe endpoint operations (rdma.go)

	// PathQuality is every switch's path-quality control plane
	// (fabric.pathQuality on; nil when off): pathquality.go.
	PathQuality *pathquality.ControlPlane
}

// New builds the cluster a validated config describes. wall may be nil for
// simulated pacing; real-time pacing (run.pacing=realtime) needs it.
func New(c config.Config, wall sim.WallClock) (*Cluster, error) {
	cl, err := build(c, wall)
	if err != nil {
		return nil, err
	}
	return cl.start()
}

// build is New but for what runs on the cluster's Scheduler (start), which
// newClassic sets afterwards.
func build(c config.Config, wall sim.WallClock) (*Cluster, error) {
	opts := sim.Options{Seed: c.Seed, Wall: wall}
	if c.Run.Pacing == config.PacingRealtime {
		if wall == nil {
			return nil, fmt.Errorf("run.pacing: realtime needs a wall clock")
		}
		opts.RealTime, opts.Slowdown = true, c.Run.RealtimeSlowdown
	}
	loop := sim.NewLoop(opts)
	topo, err := BuildTopology(loop, c)
	if err != nil {
		return nil, err
	}
	tx, rx := c.Host.NICLatencies()
	hosts, err := endpoint.NewHosts(loop, topo, endpoint.HostOptions{MTU: uint32(c.Fabric.MTU), TCP: c.Host.TCP, NoNetstack: !c.Host.Netstack,
		NICTxLatency: tx, NICRxLatency: rx})
	if err != nil {
		return nil, err
	}
	return &Cluster{Config: c, Loop: loop, Topo: topo, Hosts: hosts}, nil
}

// start starts what runs on the cluster's Scheduler once it is final:
// routing reconvergence and the path-quality control plane. It closes the
// cluster when it fails.
func (c *Cluster) start() (*Cluster, error) {
	c.setRouting()
	if err := c.startPathQuality(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// setRouting turns on ECMP routing reconvergence (fabric.ecmpReconvergence)
// on the cluster's Scheduler.
func (c *Cluster) setRouting() {
	if d, ok := c.Config.Fabric.Reconvergence(); ok {
		c.Topo.SetReconvergence(d, c.Scheduler())
	}
}

// Close releases the hosts' netstacks.
func (c *Cluster) Close() {
	for _, h := range c.Hosts {
		h.Close()
	}
}
