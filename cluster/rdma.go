package cluster

import (
	"fmt"
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
	// InitialPSN is the first PSN this end sends (ConnectEnd, Attrs): 0
	// in simulated runs; a lab host draws it at random, as RDMA NICs do,
	// so that a peer's stale retransmissions toward a QP number reused
	// after a restart fall outside the new QP's window.
	InitialPSN uint32
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
	if c.Topo.Kind == fabric.KindClos {
		return c.Topo.Clos.T1
	}
	h := c.Topo.FatTree.K / 2
	return h * h
}

// pmtu is the MRC payload per full packet (transport.mrc.pmtu, 4096 when
// unset). It sizes the reference data packet of BaseRTT and PathQueueing
// whichever transport runs: RoCE's timeouts and BDPs derive from it too,
// so it stays MRC's setting rather than the selected kind's.
func (c *Cluster) pmtu() int { return pmtuOf(c.Config) }

func pmtuOf(c config.Config) int {
	if p := c.Transport.MRC.PMTU; p > 0 {
		return p
	}
	return 4096
}

func (c *Cluster) hostRate() uint64 {
	if c.Topo.Kind == fabric.KindClos {
		return c.Topo.Clos.HostRate
	}
	return c.Topo.FatTree.Rate
}

func (c *Cluster) fabricRate() uint64 {
	if c.Topo.Kind == fabric.KindClos {
		return c.Topo.Clos.FabricRate
	}
	return c.Topo.FatTree.Rate
}

// qpSeed gives every QP its own stream, derived from the run seed.
func (c *Cluster) qpSeed(host int, qpn uint32) uint64 {
	return sim.StreamSeed(c.Config.Seed, fmt.Sprintf("qp/%d/%d", host, qpn))
}

// NewTransport creates the configured transport for a new QP on host h;
// plane is the plane a single-plane transport (RoCE) puts the QP on, which
// both ends of a connection share (multipath transports such as MRC spray
// over every plane and ignore it).
func (c *Cluster) NewTransport(h, plane int) (verbs.Transport, error) {
	e := c.Hosts[h].RDMA()
	qpn := e.AllocQPN()
	k, err := c.transportKind()
	if err != nil {
		return nil, err
	}
	return k.New(c, e, h, plane, qpn)
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
		if c.SinglePlane() {
			plane = c.planes.next(a, len(c.Hosts), c.Topo.Planes)
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
		ps = append(ps, Pair{A: QPEnd{Host: a, Engine: ea, T: ta, CQ: ca}, B: QPEnd{Host: b, Engine: eb, T: tb, CQ: cb}})
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

// evProber is one host's side of MRC's EV Probe endpoint operation (on
// QP 2, EndpointQPN): a request is answered with a response on the
// reflected EV carrying the same request id, and ProbeEV's requests wait
// for theirs. (The other endpoint operation, Port Status Update, is the
// engine's: verbs.PortStatusSpeaker.)
type evProber struct {
	e      *endpoint.Engine
	loop   *sim.Loop
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

// evProberOf returns host h's EV Probe state, installing its handler on
// the engine on first use. Call it while building (ProbeEV before the run)
// or on a classic cluster's loop: it is not safe across partitions.
func (c *Cluster) evProberOf(h int) *evProber {
	if c.probers == nil {
		c.probers = make([]*evProber, len(c.Hosts))
	}
	if m := c.probers[h]; m != nil {
		return m
	}
	e := c.Hosts[h].RDMA()
	m := &evProber{e: e, loop: c.Hosts[h].Loop(), buf: make([]byte, mrc.EndpointLen), probes: map[uint16]*evProbe{}}
	c.probers[h] = m
	e.Endpoint = m.receive
	return m
}

func (m *evProber) receive(rx *verbs.Rx) {
	_, resp, h, err := mrc.DecodeEndpoint(rx.Data)
	if err != nil {
		return
	}
	switch {
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
	m := c.evProberOf(from)
	c.evProberOf(to)
	id := m.e.NextEndpointReqID()                  // shared with the engine's Port Status Updates
	for tries := 0; m.probes[id] != nil; tries++ { // find a free request id
		if tries == 1<<16 {
			return fmt.Errorf("cluster: ProbeEV from host %d: all 65 536 request ids have a probe outstanding", from)
		}
		id = m.e.NextEndpointReqID()
	}
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
	if c.Topo.Kind != fabric.KindClos || c.Topo.Mode != fabric.ForwardUSID {
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
