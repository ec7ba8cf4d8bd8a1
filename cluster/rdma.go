package cluster

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// QPEnd is one end of a connected queue pair.
type QPEnd struct {
	Host   int
	Engine *endpoint.Engine
	T      verbs.Transport
	CQ     *endpoint.CQ
}

// Pair is a connected queue pair: A is the requester side of the
// transfers this package starts, B the responder (both can do both).
type Pair struct{ A, B QPEnd }

// frameOverhead is what a full RDMA frame adds to its UDP payload on the
// wire: Ethernet, IPv6 (twice in uSID mode), UDP, FCS, preamble and gap.
func (c *Cluster) frameOverhead() int {
	n := fabric.EthHeaderLen + fabric.IPv6HeaderLen + fabric.UDPHeaderLen + fabric.FCSLen + c.Config.Fabric.IFGBytes
	if c.Topo.Mode == fabric.ForwardUSID {
		n += fabric.IPv6HeaderLen
	}
	return n
}

// BaseRTT is the zero-load round trip of a full data packet and its
// acknowledgement between the two farthest hosts: the floor congestion
// control measures queueing delay against.
func (c *Cluster) BaseRTT() time.Duration { return c.PairRTT(0, c.Topo.Hosts-1) }

// PairRTT is the zero-load round trip of a full data packet from host a to
// host b and an acknowledgement back.
func (c *Cluster) PairRTT(a, b int) time.Duration {
	data := c.pmtu() + 100 + c.frameOverhead() - fabric.FCSLen - c.Config.Fabric.IFGBytes
	ack := 128
	return c.Topo.ZeroLoadLatency(a, b, data, c.Config.Fabric.IFGBytes) + c.Topo.ZeroLoadLatency(b, a, ack, c.Config.Fabric.IFGBytes)
}

// MaxDerivedRTO caps DefaultRTO: deep buffers (fabric.queue.bufferBytes
// up to 256 MiB) would otherwise make the path bound tens of milliseconds,
// and every recovery that waits for a timeout — and the retry limit, 70
// RTOs with the default schedule — would stall for that long. 2 ms is
// several times the bound of any shallow-buffer fabric (cluster C: 0.26
// ms); an explicit transport.mrc.rto is not capped.
const MaxDerivedRTO = 2 * time.Millisecond

// DefaultRTO is the retransmission timeout a transport gets unless the
// config sets one: the base RTT plus the worst queueing a packet can meet
// without being lost (PathQueueing), capped at MaxDerivedRTO. A timeout
// shorter than that fires on packets that are only waiting — in an incast
// (MRC leaves ECN off at the last hop) or wherever several queues of one
// path are full at once (fattree-perm k=24: 77 timeouts, nothing lost,
// with one buffer's drain × 1.5) — and every spurious timeout costs a
// retransmission and marks a healthy EV bad. Failed paths are found sooner
// by the transports' loss rules (MRC's SACK-based fast loss and tail-loss
// probe).
func (c *Cluster) DefaultRTO() time.Duration {
	return min(c.BaseRTT()+c.PathQueueing(), MaxDerivedRTO)
}

// PathQueueing bounds the time a data packet and its acknowledgement can
// spend queued between the two farthest hosts: a full buffer's drain at
// every switch egress queue the data crosses (each fabric link's at the
// fabric rate, the last hop's at the host rate), one frame ahead of it at
// its own NIC (the engine queues at most one frame behind the one on the
// wire), and on the way back one full frame per hop that the
// acknowledgement, strict priority but not preemptive, may find on the
// wire.
func (c *Cluster) PathQueueing() time.Duration {
	hl, fl := c.Topo.Hops(0, c.Topo.Hosts-1)
	hr, fr := c.hostRate(), c.fabricRate()
	buf := float64(c.Config.Fabric.Queue.BufferBytes) * 8
	frame := float64(c.pmtu()+100+c.frameOverhead()) * 8
	ns := float64(fl)*buf/float64(fr) + float64(hl-1)*buf/float64(hr)   // switch queues
	ns += frame / float64(hr)                                           // the NIC's own queue
	ns += float64(fl)*frame/float64(fr) + float64(hl)*frame/float64(hr) // the way back
	return time.Duration(ns * 1e9)
}

// pathsPerPlane is how many explicit paths an EV may name in one plane
// (uSID forwarding), or 0 in ECMP/static modes, where EVs are entropy.
func (c *Cluster) pathsPerPlane() int {
	if c.Topo.Mode != fabric.ForwardUSID {
		return 0
	}
	if c.Topo.Kind == "clos" {
		return c.Topo.Clos.T1
	}
	h := c.Topo.FatTree.K / 2
	return h * h
}

// MRCConfig is the MRC configuration the cluster's config and topology
// give.
func (c *Cluster) MRCConfig() (mrc.Config, error) {
	t := c.Config.Transport.MRC
	m := mrc.DefaultConfig()
	m.Planes = c.Topo.Planes
	m.PathsPerPlane = c.pathsPerPlane()
	m.EVsPerQP = t.EVsPerQP
	m.MPR = t.MPRUnits
	m.MaxWImm = t.MaxWImm
	m.PMTU = c.pmtu()
	rto, err := durationOr("transport.mrc.rto", t.RTO, c.DefaultRTO())
	if err != nil {
		return m, err
	}
	m.RTO = int64(rto)
	m.DisableCC = !t.NSCC
	m.TLPFactor = t.TLPFactor
	m.RetryScope = mrc.RetryScope(t.RetryScope)
	m.LossDetection = mrc.LossDetection(t.LossDetection)
	m.Responder = mrc.ResponderConfig{BitmapPSNs: t.Responder.BitmapPSNs, PacketBuffers: t.Responder.PacketBuffers,
		ImmSlots: t.Responder.ImmSlots, AlwaysSkipCEStreak: t.Responder.AlwaysSkipCEStreak}
	m.LinkBps = int64(c.Topo.Planes) * int64(c.hostRate())
	m.BaseRTT = int64(c.BaseRTT())
	m.Trimming = c.Config.Fabric.Queue.Trim.Enabled
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("transport.mrc: %v", err)
	}
	return m, nil
}

// pmtu is the MRC payload per full packet (transport.mrc.pmtu, 4096 when
// unset).
func (c *Cluster) pmtu() int {
	if p := c.Config.Transport.MRC.PMTU; p > 0 {
		return p
	}
	return 4096
}

func (c *Cluster) hostRate() uint64 {
	if c.Topo.Kind == "clos" {
		return c.Topo.Clos.HostRate
	}
	return c.Topo.FatTree.Rate
}

func (c *Cluster) fabricRate() uint64 {
	if c.Topo.Kind == "clos" {
		return c.Topo.Clos.FabricRate
	}
	return c.Topo.FatTree.Rate
}

// durationOr parses a duration field of the config, or returns def when it
// is empty (validation already rejected bad values; the error is a guard).
func durationOr(path, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	return d, nil
}

// qpSeed gives every QP its own stream, derived from the run seed.
func (c *Cluster) qpSeed(host int, qpn uint32) uint64 {
	return sim.StreamSeed(c.Config.Seed, fmt.Sprintf("qp/%d/%d", host, qpn))
}

// NewTransport creates the configured transport for a new QP on host h;
// plane is the plane a single-plane transport (RoCE) puts the QP on, which
// both ends of a connection share (MRC sprays over every plane and ignores
// it).
func (c *Cluster) NewTransport(h, plane int) (verbs.Transport, error) {
	e := c.Hosts[h].RDMA()
	qpn := e.AllocQPN()
	switch c.Config.Transport.Kind {
	case config.TransportMRC:
		m, err := c.MRCConfig()
		if err != nil {
			return nil, err
		}
		return mrc.New(m, e.Memory(), qpn, c.qpSeed(h, qpn)), nil
	case config.TransportRoCE:
		return c.newRoCE(e, h, plane, qpn)
	}
	return nil, fmt.Errorf("transport.kind: unknown %q", c.Config.Transport.Kind)
}

// Connect creates transport.qpsPerConnection QP pairs between hosts a and
// b, each side with its own completion queue.
func (c *Cluster) Connect(a, b int) ([]Pair, error) {
	if a == b || a < 0 || b < 0 || a >= len(c.Hosts) || b >= len(c.Hosts) {
		return nil, fmt.Errorf("cluster: cannot connect hosts %d and %d", a, b)
	}
	var ps []Pair
	for i := 0; i < c.Config.Transport.QPsPerConnection; i++ {
		ea, eb := c.Hosts[a].RDMA(), c.Hosts[b].RDMA()
		plane := 0 // both ends share it
		if c.Config.Transport.Kind == config.TransportRoCE {
			plane = c.roce.next(a, len(c.Hosts), c.Topo.Planes)
		}
		ta, err := c.NewTransport(a, plane)
		if err != nil {
			return nil, err
		}
		ca := &endpoint.CQ{}
		ea.AddQP(ta, ca)
		tb, err := c.NewTransport(b, plane)
		if err != nil {
			return nil, err
		}
		cb := &endpoint.CQ{}
		eb.AddQP(tb, cb)
		if err := endpoint.Connect(ea, ta, verbs.QPAttrs{}, eb, tb, verbs.QPAttrs{}); err != nil {
			return nil, err
		}
		if c.Config.Transport.Kind == config.TransportMRC {
			c.mrcEndpointOf(a)
			c.mrcEndpointOf(b)
		}
		ps = append(ps, Pair{A: QPEnd{a, ea, ta, ca}, B: QPEnd{b, eb, tb, cb}})
	}
	return ps, nil
}

// Region registers n bytes on host h: real bytes (filled by fill, if not
// nil) or, with transport.payload=elided, a virtual region.
func (c *Cluster) Region(h int, n uint64, fill func([]byte)) *verbs.MR {
	mem := c.Hosts[h].RDMA().Memory()
	if c.Config.Transport.Payload == config.PayloadElided {
		return mem.RegisterVirtual(n)
	}
	buf := make([]byte, n)
	if fill != nil {
		fill(buf)
	}
	return mem.Register(buf)
}

// mrcEndpoint is one host's MRC endpoint operations (endpoint requests and
// responses on QP 2): Port Status Update — when a NIC port's link changes,
// the engine tells every host its MRC QPs talk to (a request with the
// up-mask), and an update from a peer is applied to every MRC QP connected
// to that peer, so both directions stop using a plane whose port died on
// either side — and EV Probe: a request is answered with a response on the
// reflected EV carrying the same request id, and ProbeEV's requests wait
// for theirs.
type mrcEndpoint struct {
	e      *endpoint.Engine
	loop   *sim.Loop
	reqID  uint16
	buf    []byte
	probes map[uint16]*evProbe // outstanding EV probes by request id
}

// evProbe is one outstanding EV probe.
type evProbe struct {
	to    int
	sent  sim.Time
	timer sim.Timer
	done  func(rtt time.Duration, ok bool)
}

// mrcEndpointOf returns host h's endpoint-operation state, installing its
// handlers on the engine on first use. Call it while building (Connect,
// ProbeEV before the run) or on a classic cluster's loop: it is not safe
// across partitions.
func (c *Cluster) mrcEndpointOf(h int) *mrcEndpoint {
	if c.mrcEP == nil {
		c.mrcEP = make([]*mrcEndpoint, len(c.Hosts))
	}
	if m := c.mrcEP[h]; m != nil {
		return m
	}
	e := c.Hosts[h].RDMA()
	m := &mrcEndpoint{e: e, loop: c.Hosts[h].Loop(), buf: make([]byte, mrc.EndpointLen), probes: map[uint16]*evProbe{}}
	c.mrcEP[h] = m
	e.Endpoint = m.receive
	e.OnLinkStatus = m.linkStatus
	return m
}

func (m *mrcEndpoint) receive(rx *verbs.Rx) {
	_, resp, h, err := mrc.DecodeEndpoint(rx.Data)
	if err != nil {
		return
	}
	switch {
	case h.Op == mrc.EndpointPortStatus && !resp:
		for _, t := range m.e.QPs() {
			if q, ok := t.(*mrc.QP); ok && q.Remote().Host == rx.SrcHost {
				q.ApplyPortStatus(h.PortStatusMask)
			}
		}
	case h.Op == mrc.EndpointEVProbe && !resp:
		// Answer on the reflected EV, so the response comes back over
		// the path the request took.
		n, err := mrc.EncodeEndpoint(m.buf, mrc.BTH{PKey: mrc.DefaultPKey}, true,
			mrc.EndpointHeader{Op: mrc.EndpointEVProbe, ReqID: h.ReqID})
		if err == nil {
			m.e.SendControl(rx.SrcHost, rx.EV, m.buf[:n])
		}
	case h.Op == mrc.EndpointEVProbe && resp:
		p := m.probes[h.ReqID]
		if p == nil || p.to != rx.SrcHost {
			return // late (timed out) or not ours
		}
		delete(m.probes, h.ReqID)
		p.timer.Stop()
		p.done(time.Duration(m.loop.Now()-p.sent), true)
	}
}

func (m *mrcEndpoint) linkStatus(up uint32) {
	if up == 0 {
		return // no port left to tell anyone with
	}
	plane := bits.TrailingZeros32(up)
	seen := map[int]bool{}
	for _, t := range m.e.QPs() {
		q, ok := t.(*mrc.QP)
		if !ok || seen[q.Remote().Host] {
			continue
		}
		seen[q.Remote().Host] = true
		m.reqID++
		n, err := mrc.EncodePortStatus(m.buf, m.reqID, up)
		if err != nil {
			continue
		}
		m.e.SendControl(q.Remote().Host, mrc.MakeEV(plane, 0, m.reqID), m.buf[:n])
	}
}

// ProbeEV sends an MRC EV Probe endpoint request from host from to host to
// on entropy value ev (its plane and, under uSID forwarding, its path
// choice select the path) and calls done on from's loop with the round
// trip once the response comes back on the reflected EV, or with ok false
// when none came within timeout of virtual time. Both hosts answer and
// wait for EV probes from then on. Call it before the run or from a
// classic cluster's loop (not across partitions).
func (c *Cluster) ProbeEV(from, to int, ev uint32, timeout time.Duration, done func(rtt time.Duration, ok bool)) error {
	switch {
	case from < 0 || from >= len(c.Hosts) || to < 0 || to >= len(c.Hosts) || from == to:
		return fmt.Errorf("cluster: ProbeEV from host %d to %d: hosts must differ and be 0..%d", from, to, len(c.Hosts)-1)
	case timeout <= 0:
		return fmt.Errorf("cluster: ProbeEV timeout %v: must be > 0", timeout)
	case done == nil:
		return fmt.Errorf("cluster: ProbeEV needs a done callback")
	}
	m := c.mrcEndpointOf(from)
	c.mrcEndpointOf(to)
	m.reqID++
	for tries := 0; m.probes[m.reqID] != nil; tries++ { // find a free request id
		if tries == 1<<16 {
			return fmt.Errorf("cluster: ProbeEV from host %d: all 65 536 request ids have a probe outstanding", from)
		}
		m.reqID++
	}
	id := m.reqID
	n, err := mrc.EncodeEndpoint(m.buf, mrc.BTH{PKey: mrc.DefaultPKey}, false,
		mrc.EndpointHeader{Op: mrc.EndpointEVProbe, ReqID: id})
	if err != nil {
		return err
	}
	p := &evProbe{to: to, sent: m.loop.Now(), done: done}
	p.timer = m.loop.AfterFunc(timeout, func() {
		if m.probes[id] == p {
			delete(m.probes, id)
			done(0, false)
		}
	})
	m.probes[id] = p
	m.e.SendControl(to, ev, m.buf[:n])
	return nil
}

// DenyLink pushes a denylist entry for the Clos fabric cable between T0
// t0 and T1 t1 of plane (uSID forwarding): every QP whose traffic could
// cross it — hosts under that T0 talking to hosts elsewhere (the uplink),
// and hosts elsewhere talking to hosts under it (the downlink) — stops
// using the path choice t1 in that plane. It returns the EVs denied.
func (c *Cluster) DenyLink(plane, t0, t1 int) (int, error) { return c.linkCmd(plane, t0, t1, true) }

// AllowLink lifts DenyLink.
func (c *Cluster) AllowLink(plane, t0, t1 int) (int, error) { return c.linkCmd(plane, t0, t1, false) }

func (c *Cluster) linkCmd(plane, t0, t1 int, deny bool) (int, error) {
	if c.Topo.Kind != "clos" || c.Topo.Mode != fabric.ForwardUSID {
		return 0, fmt.Errorf("cluster: link denylists need a Clos with uSID forwarding (EVs name paths)")
	}
	if plane < 0 || plane >= c.Topo.Planes || t0 < 0 || t0 >= c.Topo.Clos.T0 || t1 < 0 || t1 >= c.Topo.Clos.T1 {
		return 0, fmt.Errorf("cluster: no cable plane %d T0 %d – T1 %d", plane, t0, t1)
	}
	n := 0
	for h, host := range c.Hosts {
		e := host.RDMA() // also records the entry for QPs connected later
		sub, _ := c.Topo.HostSubnet(h)
		for peer := range c.Hosts {
			ps, _ := c.Topo.HostSubnet(peer)
			if peer == h || (sub != t0) == (ps != t0) {
				continue // same T0 (never crosses T1), or neither end under t0
			}
			if deny {
				n += e.DenyPath(peer, plane, t1)
			} else {
				n += e.AllowPath(peer, plane, t1)
			}
		}
	}
	return n, nil
}
