package endpoint

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/internal/ring"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// Engine is a host's RDMA engine: the registered memory, the queue pairs
// (each a verbs.Transport state machine: MRC or RoCE) and their completion
// queues. It moves packets between the transports and the NIC: it asks the
// transports for packets while a plane's port has room, builds the frames,
// routes received RoCEv2 frames to their QP by BTH destination QP, keeps one
// loop timer per QP at the transport's Deadline, and delivers completions.
// It never interprets transport headers beyond the BTH destination QP.
type Engine struct {
	nic  *NIC
	loop *sim.Loop
	mem  verbs.Memory

	qps      []*qpSlot // by qpn - FirstQPN
	active   []*qpSlot // may have something to send
	blocked  []*qpSlot // said no while some plane was full: retried on TxReady
	touched  []*qpSlot // need their timer re-armed after this pump
	pumping  bool
	scratch  []byte
	comps    []verbs.Completion
	rx       verbs.Rx // reused: handing a local to an interface would allocate
	fullMask uint32
	upMask   uint32 // planes whose NIC link was up at the last look
	// free caches which planes have room (freeMask): a plane changes only
	// when the engine sends on it or its port tells (TxReady: a frame left,
	// or the link went down or up), so a pump need not look at every port
	// (eight cold cache lines per pump at a 131 072-NIC scale).
	free      uint32
	freeValid bool

	// Endpoint, if set, receives the packets addressed to the reserved QP
	// verbs.EndpointQPN that are not a port status update for this engine's
	// QPs (MRC's other endpoint operations: EV Probes).
	Endpoint func(rx *verbs.Rx)
	// OnLinkStatus, if set, hears which NIC ports' links are up after a
	// change (after the transports were told and the peers sent updates).
	OnLinkStatus func(upMask uint32)
	// speakers counts the QPs that speak the port status exchange
	// (verbs.PortStatusSpeaker): with any, verbs.EndpointQPN is open.
	speakers int
	// endpointReq numbers endpoint requests (NextEndpointReqID).
	endpointReq uint16

	// denied is the engine's path denylist: what DenyPath was told, so
	// that QPs connected later are denied the same paths.
	denied map[deniedPath]bool

	// FreeBytes is how many bytes may wait in a plane's NIC egress queue
	// before the plane stops counting as free for data (default: one
	// maximum frame, so one frame waits behind the one on the wire).
	FreeBytes int
	// TxLatency is the NIC's transmit latency: a posted work request
	// reaches its transport this much after Post (doorbell, WQE fetch,
	// DMA), so its first packet leaves that much later.
	// RxLatency is the receive latency: a completion the transport
	// produces (a WriteImm's RecvImm, a request's completion after its
	// ACK) reaches the CQ this much later. Neither delays a packet the
	// transport sends or takes (ACKs, NACKs, retransmissions, the
	// transport's reaction to an ACK): NIC hardware does those, and
	// delaying them would inflate the RTT the transport measures. Set
	// them before the first Post (HostOptions.NICTxLatency/NICRxLatency).
	TxLatency, RxLatency time.Duration
	Counters             EngineCounters

	posts ring.Ring[pendingPost]       // posted, not yet handed to the transport (TxLatency)
	cqes  ring.Ring[pendingCompletion] // produced, not yet on their CQ (RxLatency)
}

// Engine event arguments besides a QP's timer (whose argument is its QPN,
// ≥ FirstQPN).
const (
	evPost       = 0 // the oldest pending post reaches its transport
	evCompletion = 1 // the oldest pending completion reaches its CQ
)

type pendingPost struct {
	s  *qpSlot
	wr verbs.WorkRequest
}

type pendingCompletion struct {
	cq *CQ
	c  verbs.Completion
}

// EngineCounters count the engine's traffic.
type EngineCounters struct {
	TxPackets, TxBytes     uint64 // frames built from transport packets
	RxPackets              uint64 // frames handed to a transport
	RxNoQP, RxMalformed    uint64 // dropped: unknown QP, too short
	RxRetired              uint64 // dropped: addressed to a retired QP (Retire)
	TxErrors               uint64 // AllocRDMA refused a transport's packet
	Completions, TimerRuns uint64
	// StaleDeadlines counts deadlines a transport reported at or before the
	// instant its timer last ran (a transport bug: re-arming would spin the
	// loop at one virtual time). The engine does not re-arm them; the QP
	// runs again on its next input.
	StaleDeadlines uint64
}

// FirstQPN is the first QP number AllocQPN hands out (0–0xff are reserved:
// MRC uses QP 0x2 for endpoint operations).
const FirstQPN = 0x100

type qpSlot struct {
	t         verbs.Transport
	cq        *CQ
	timer     sim.Timer
	inActive  bool
	inTouch   bool
	inBlocked bool
	lastTick  sim.Time // when the timer last ran
	ticked    bool
}

// CQ is a completion queue. With Handler set, completions are handed to it
// on the loop as they happen; otherwise they wait for Poll.
type CQ struct {
	Handler func(verbs.Completion)
	q       []verbs.Completion
}

// Poll appends waiting completions to dst and empties the queue.
func (c *CQ) Poll(dst []verbs.Completion) []verbs.Completion {
	dst = append(dst, c.q...)
	c.q = c.q[:0]
	return dst
}

// Len returns how many completions wait.
func (c *CQ) Len() int { return len(c.q) }

func (c *CQ) push(x verbs.Completion) {
	if c.Handler != nil {
		c.Handler(x)
		return
	}
	c.q = append(c.q, x)
}

// RDMA returns the host's RDMA engine, creating and attaching it on first
// use (hosts that never use RDMA pay nothing for it).
func (h *Host) RDMA() *Engine {
	if e, ok := h.NIC.RDMA.(*Engine); ok {
		return e
	}
	n := h.NIC
	e := &Engine{nic: n, loop: h.loop, scratch: make([]byte, verbs.MaxTxBytes),
		fullMask: 1<<len(n.ports) - 1, upMask: 1<<len(n.ports) - 1, FreeBytes: n.topo.Pool.LargeCap,
		TxLatency: n.sh.opts.NICTxLatency, RxLatency: n.sh.opts.NICRxLatency}
	n.RDMA = e
	return e
}

// Memory returns the host's registered memory.
func (e *Engine) Memory() *verbs.Memory { return &e.mem }

// Host returns the host id.
func (e *Engine) Host() int { return e.nic.host }

// Planes returns the number of NIC ports.
func (e *Engine) Planes() int { return len(e.nic.ports) }

// AllocQPN returns the QP number the next AddQP must use.
func (e *Engine) AllocQPN() uint32 { return uint32(FirstQPN + len(e.qps)) }

// AddQP registers a transport created with qpn AllocQPN(); its completions
// go to cq (both requester and responder completions).
func (e *Engine) AddQP(t verbs.Transport, cq *CQ) {
	if t.QPN() != e.AllocQPN() {
		panic("endpoint: AddQP with a QPN not from AllocQPN")
	}
	e.qps = append(e.qps, &qpSlot{t: t, cq: cq})
	if _, ok := t.(verbs.PortStatusSpeaker); ok {
		e.speakers++
	}
}

// NextEndpointReqID numbers the host's next endpoint request (its Port
// Status Updates and any other endpoint operation sent through
// SendControl, e.g. an EV Probe): one sequence per host, wrapping at 2^16.
func (e *Engine) NextEndpointReqID() uint16 {
	e.endpointReq++
	return e.endpointReq
}

// QP returns the transport of qpn, or nil.
func (e *Engine) QP(qpn uint32) verbs.Transport {
	if s := e.slot(qpn); s != nil {
		return s.t
	}
	return nil
}

// QPs returns every transport of the host in QPN order.
func (e *Engine) QPs() []verbs.Transport {
	ts := make([]verbs.Transport, len(e.qps))
	for i, s := range e.qps {
		ts[i] = s.t
	}
	return ts
}

func (e *Engine) slot(qpn uint32) *qpSlot {
	i := int(qpn) - FirstQPN
	if i < 0 || i >= len(e.qps) {
		return nil
	}
	return e.qps[i]
}

// Connect connects transport a on engine ea with transport b on engine eb:
// each side's attributes (Host and QPN are filled in here) go to the other.
func Connect(ea *Engine, a verbs.Transport, attrA verbs.QPAttrs, eb *Engine, b verbs.Transport, attrB verbs.QPAttrs) error {
	attrA.Host, attrA.QPN = ea.Host(), a.QPN()
	attrB.Host, attrB.QPN = eb.Host(), b.QPN()
	if err := a.Connect(attrA, attrB); err != nil {
		return err
	}
	if err := b.Connect(attrB, attrA); err != nil {
		return err
	}
	ea.applyDenied(a)
	eb.applyDenied(b)
	return nil
}

// Post posts a work request on qpn and lets the QP send. With TxLatency
// the request reaches the transport that much later: Post checks now what
// the transports check (the QP's state, the opcode, the length, the local
// memory range) and returns their errors; a QP that fails in between
// completes the request with StatusFlushed, as a NIC flushes its send
// queue.
func (e *Engine) Post(qpn uint32, wr verbs.WorkRequest) error {
	s := e.slot(qpn)
	if s == nil {
		return verbs.ErrNotReady
	}
	if e.TxLatency > 0 {
		if err := e.checkPost(s, wr); err != nil {
			return err
		}
		e.posts.Push(pendingPost{s, wr})
		e.loop.Post(e.loop.Now()+sim.Time(e.TxLatency), e, evPost)
		return nil
	}
	if err := s.t.Post(int64(e.loop.Now()), wr); err != nil {
		return err
	}
	e.collect(s)
	e.activate(s)
	e.pump()
	return nil
}

// checkPost is what both transports' Post check (verbs.CheckPost).
func (e *Engine) checkPost(s *qpSlot, wr verbs.WorkRequest) error {
	_, err := verbs.CheckPost(s.t.State(), wr, &e.mem)
	return err
}

// postDue hands the oldest pending post to its transport (TxLatency).
func (e *Engine) postDue() {
	p := e.posts.Pop()
	s := p.s
	if err := s.t.Post(int64(e.loop.Now()), p.wr); err != nil {
		// Checked at Post: the QP failed since.
		e.deliver(s.cq, verbs.Completion{WRID: p.wr.ID, QPN: s.t.QPN(), Op: p.wr.Op, Status: verbs.StatusFlushed, Bytes: p.wr.Length})
		return
	}
	e.collect(s)
	e.activate(s)
	e.pump()
}

func (e *Engine) activate(s *qpSlot) {
	if !s.inActive {
		s.inActive = true
		e.active = append(e.active, s)
	}
}

func (e *Engine) touch(s *qpSlot) {
	if !s.inTouch {
		s.inTouch = true
		e.touched = append(e.touched, s)
	}
}

// PlaneStatusReceiver is implemented by transports that want to hear when
// a NIC port's link goes down or comes back (MRC stops using the plane).
type PlaneStatusReceiver interface {
	SetPlaneStatus(plane int, up bool)
}

// freeMask returns the planes whose NIC port is up and has room for data.
// A change in which links are up is passed to the transports.
func (e *Engine) freeMask() uint32 {
	var m, up uint32
	for i := range e.nic.ports {
		u, f := e.planeFree(i)
		if u {
			up |= 1 << i
		}
		if f {
			m |= 1 << i
		}
	}
	if up != e.upMask {
		e.planeStatus(up)
	}
	return m
}

// planeFree reports whether plane i's NIC port is up, and whether it has
// room for data.
func (e *Engine) planeFree(i int) (up, free bool) {
	p := e.nic.ports[i]
	if p.Tx == nil || !p.Tx.Up() {
		return false, false
	}
	return true, p.QueuedBytes() < e.FreeBytes
}

// refreshFree updates free after a frame went out on plane i: only that
// port changed, unless its link changed state (then every plane is looked
// at again, as freeMask does).
func (e *Engine) refreshFree(free uint32, i int) uint32 {
	if i < 0 {
		return e.freeMask()
	}
	up, f := e.planeFree(i)
	if up != (e.upMask&(1<<i) != 0) {
		return e.freeMask()
	}
	if f {
		return free | 1<<i
	}
	return free &^ (1 << i)
}

func (e *Engine) planeStatus(up uint32) {
	changed := up ^ e.upMask
	e.upMask = up
	for _, s := range e.qps {
		r, ok := s.t.(PlaneStatusReceiver)
		if !ok {
			continue
		}
		for p := 0; p < len(e.nic.ports); p++ {
			if changed&(1<<p) != 0 {
				r.SetPlaneStatus(p, up&(1<<p) != 0)
			}
		}
		e.activate(s)
	}
	e.tellPeers(up)
	if e.OnLinkStatus != nil {
		e.OnLinkStatus(up)
	}
}

// tellPeers sends a port status update saying which of the NIC's ports
// are up to every peer host a port-status-speaking QP talks to (each once,
// in QP order), so that the peer's QPs stop sending on a plane whose port
// died here. With no port left up there is nothing to tell anyone with.
func (e *Engine) tellPeers(up uint32) {
	if up == 0 || e.speakers == 0 {
		return
	}
	seen := map[int]bool{}
	for _, s := range e.qps {
		sp, ok := s.t.(verbs.PortStatusSpeaker)
		if !ok || seen[sp.Remote().Host] {
			continue
		}
		peer := sp.Remote().Host
		seen[peer] = true
		// The update is written where transmit reads a packet from: the
		// transport packet in it, if any, was already sent.
		n, ev, err := sp.EncodePortStatus(e.scratch, e.NextEndpointReqID(), up)
		if err != nil {
			continue
		}
		e.transmit(&verbs.Tx{Len: n, WireLen: n, DstHost: peer, EV: ev, DSCP: verbs.DSCPControl})
	}
}

// endpointReceive handles a packet to verbs.EndpointQPN: a port status update
// goes to every speaking QP connected to its sender, anything else to
// Endpoint.
func (e *Engine) endpointReceive(rx *verbs.Rx) {
	var up uint32
	decoded, update := false, false
	for _, s := range e.qps {
		sp, ok := s.t.(verbs.PortStatusSpeaker)
		if !ok || sp.Remote().Host != rx.SrcHost {
			continue
		}
		if !decoded {
			up, update = sp.PortStatus(rx.Data)
			decoded = true
		}
		if !update {
			break
		}
		sp.ApplyPortStatus(up)
	}
	if !update && e.Endpoint != nil {
		e.Endpoint(rx)
	}
}

// SendControl sends a transport control packet (BTH onwards, as a
// transport's Send would write it) to host dst with entropy ev, outside any
// QP: endpoint operations such as a Port Status Update.
func (e *Engine) SendControl(dst int, ev uint32, pkt []byte) {
	copy(e.scratch, pkt)
	e.transmit(&verbs.Tx{Len: len(pkt), WireLen: len(pkt), DstHost: dst, EV: ev, DSCP: verbs.DSCPControl})
}

// pump asks active QPs, round-robin one packet each, for packets until none
// has anything, then re-arms the timers of the QPs it touched.
func (e *Engine) pump() {
	if e.pumping {
		return // the outer pump will see newly active QPs
	}
	e.pumping = true
	now := int64(e.loop.Now())
	if !e.freeValid {
		e.free, e.freeValid = e.freeMask(), true
	}
	for len(e.active) > 0 {
		free := e.free
		n := 0
		for i := 0; i < len(e.active); i++ {
			s := e.active[i]
			tx, ok := s.t.Send(now, free, e.scratch)
			e.touch(s)
			if !ok {
				s.inActive = false
				if free != e.fullMask && !s.inBlocked {
					s.inBlocked = true
					e.blocked = append(e.blocked, s)
				}
				e.collect(s)
				continue
			}
			free = e.refreshFree(free, e.transmit(&tx))
			e.free = free
			e.active[n] = s
			n++
		}
		clear(e.active[n:])
		e.active = e.active[:n]
	}
	e.pumping = false
	for _, s := range e.touched {
		s.inTouch = false
		e.rearm(s)
	}
	clear(e.touched)
	e.touched = e.touched[:0]
}

// transmit builds and sends tx's frame and returns the plane it went out
// on, or -1 if it could not be built.
func (e *Engine) transmit(tx *verbs.Tx) int {
	tc := tx.DSCP << 2
	if tx.ECT {
		tc |= fabric.ECNECT0
	}
	p, payload, err := e.nic.AllocRDMA(RDMAHeader{DstHost: tx.DstHost, EV: EV(tx.EV), TrafficClass: tc, PayloadLen: tx.WireLen, Stored: tx.Len,
		DstPath: tx.DstPath, SrcPath: tx.SrcPath})
	if err != nil {
		e.Counters.TxErrors++
		return -1
	}
	copy(payload, e.scratch[:tx.Len])
	e.Counters.TxPackets++
	e.Counters.TxBytes += uint64(tx.WireLen)
	e.nic.SendRDMA(p)
	return EV(tx.EV).Plane() % len(e.nic.ports)
}

// rearm keeps the QP's one loop timer at the transport's deadline.
func (e *Engine) rearm(s *qpSlot) {
	d, ok := s.t.Deadline()
	if !ok {
		s.timer.Stop()
		return
	}
	at := sim.Time(d)
	if s.ticked && at <= s.lastTick {
		e.Counters.StaleDeadlines++
		s.timer.Stop()
		return
	}
	if s.timer.Pending() {
		if s.timer.When() == at {
			return
		}
		s.timer.Stop()
	}
	s.timer = e.loop.Schedule(at, e, uint64(s.t.QPN()))
}

// OnEvent runs a QP's timers, and the NIC latencies' deliveries.
func (e *Engine) OnEvent(arg uint64) {
	switch arg {
	case evPost:
		e.postDue()
		return
	case evCompletion:
		c := e.cqes.Pop()
		c.cq.push(c.c)
		return
	}
	s := e.slot(uint32(arg))
	e.Counters.TimerRuns++
	s.lastTick, s.ticked = e.loop.Now(), true
	s.t.Tick(int64(e.loop.Now()))
	e.collect(s)
	e.touch(s)
	e.activate(s)
	e.pump()
}

// collect moves the QP's completions to its CQ (RxLatency later).
func (e *Engine) collect(s *qpSlot) {
	e.comps = s.t.PollCompletions(e.comps[:0])
	for _, c := range e.comps {
		e.deliver(s.cq, c)
	}
}

// deliver puts c on cq, at once or RxLatency later.
func (e *Engine) deliver(cq *CQ, c verbs.Completion) {
	e.Counters.Completions++
	if e.RxLatency <= 0 {
		cq.push(c)
		return
	}
	e.cqes.Push(pendingCompletion{cq, c})
	e.loop.Post(e.loop.Now()+sim.Time(e.RxLatency), e, evCompletion)
}

// TxReady implements TxReadyEngine: plane's port sent a frame or its link
// changed state, so QPs that were held back by full ports get another
// chance.
func (e *Engine) TxReady(plane int) {
	if e.freeValid {
		e.free = e.refreshFree(e.free, plane)
	}
	if len(e.blocked) == 0 {
		return
	}
	for _, s := range e.blocked {
		s.inBlocked = false
		e.activate(s)
	}
	clear(e.blocked)
	e.blocked = e.blocked[:0]
	e.pump()
}

// Receive implements RDMAEngine: hand the frame to its QP's transport.
func (e *Engine) Receive(p *fabric.Packet, plane int) {
	d := p.Data
	const udp = offL4
	if len(d) < udp+udpLen+verbs.BTHLen {
		e.Counters.RxMalformed++
		p.Release()
		return
	}
	qpn, _ := verbs.DestQP(d[udp+udpLen:])
	s := e.slot(qpn)
	if s == nil && !(qpn == verbs.EndpointQPN && (e.Endpoint != nil || e.speakers > 0)) {
		e.Counters.RxNoQP++
		p.Release()
		return
	}
	tc := d[offIP]<<4 | d[offIP+1]>>4
	dscp := tc >> 2
	src, _, _ := e.nic.topo.HostOf(d[offIP+8 : offIP+24])
	e.rx = verbs.Rx{
		Data:    d[udp+udpLen:],
		WireLen: int(binary.BigEndian.Uint16(d[udp+4:])) - udpLen,
		SrcHost: src,
		Plane:   plane,
		EV:      uint32(EVFromWire(binary.BigEndian.Uint16(d[udp:]), binary.BigEndian.Uint32(d[offIP:])&0xfffff)),
		CE:      tc&3 == fabric.ECNCE,
		Trimmed: dscp == fabric.DSCPTrimmed || dscp == fabric.DSCPTrimmedLastHop,
		LastHop: dscp == fabric.DSCPTrimmedLastHop,
		SrcPath: binary.BigEndian.Uint16(d[offIP+8+8:]),
		DstPath: binary.BigEndian.Uint16(d[offIP+24+8:]),
	}
	e.Counters.RxPackets++
	if s == nil {
		// Endpoint operations may change any QP's state: let all of them
		// look again.
		e.endpointReceive(&e.rx)
		e.rx.Data = nil
		p.Release()
		for _, s := range e.qps {
			e.touch(s)
			e.activate(s)
		}
		e.pump()
		return
	}
	s.t.Receive(int64(e.loop.Now()), &e.rx)
	e.rx.Data = nil
	p.Release()
	e.collect(s)
	e.touch(s)
	e.activate(s)
	e.pump()
}

// PathController is implemented by transports whose entropy values name
// explicit paths (MRC under uSID forwarding): the controller API a policy
// controller (Clustermapper's denylist) drives through the engine.
type PathController interface {
	Remote() verbs.QPAttrs
	DenyPath(plane, choice int) int
	AllowPath(plane, choice int) int
}

type deniedPath struct{ peer, plane, choice int }

// DenyPath denies path (plane, choice) on every QP of the engine that talks
// to host peer (any peer when peer < 0) and reports how many EVs it denied.
// The entry stays on the engine's denylist: QPs connected later (Connect)
// start with those paths denied.
func (e *Engine) DenyPath(peer, plane, choice int) int {
	if e.denied == nil {
		e.denied = map[deniedPath]bool{}
	}
	e.denied[deniedPath{peer, plane, choice}] = true
	return e.pathCmd(peer, plane, choice, true)
}

// AllowPath undoes DenyPath.
func (e *Engine) AllowPath(peer, plane, choice int) int {
	delete(e.denied, deniedPath{peer, plane, choice})
	return e.pathCmd(peer, plane, choice, false)
}

// applyDenied denies a newly connected transport the paths on the
// engine's denylist that concern its peer.
func (e *Engine) applyDenied(t verbs.Transport) {
	pc, ok := t.(PathController)
	if !ok || len(e.denied) == 0 {
		return
	}
	peer := pc.Remote().Host
	// Sorted, so the EV state changes happen in a reproducible order.
	keys := make([]deniedPath, 0, len(e.denied))
	for k := range e.denied {
		if k.peer < 0 || k.peer == peer {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b deniedPath) int {
		return cmp.Or(cmp.Compare(a.peer, b.peer), cmp.Compare(a.plane, b.plane), cmp.Compare(a.choice, b.choice))
	})
	for _, k := range keys {
		pc.DenyPath(k.plane, k.choice)
	}
}

func (e *Engine) pathCmd(peer, plane, choice int, deny bool) int {
	n := 0
	for _, s := range e.qps {
		pc, ok := s.t.(PathController)
		if !ok || peer >= 0 && pc.Remote().Host != peer {
			continue
		}
		if deny {
			n += pc.DenyPath(plane, choice)
		} else {
			n += pc.AllowPath(plane, choice)
		}
		e.touch(s)
		e.activate(s)
	}
	e.pump()
	return n
}

// ConnectOne connects transport t of engine e (already added with AddQP)
// to a peer QP that lives elsewhere — another process, reached through
// the tunnels of a lab: local describes this side (Host and QPN are
// filled from e and t), remote the peer as it published itself. It is one
// side of Connect, the engine's path denylist included (applyDenied); the
// peer's process does the other side with the attributes reversed.
func ConnectOne(e *Engine, t verbs.Transport, local, remote verbs.QPAttrs) error {
	if t == nil || e.QP(t.QPN()) != t {
		return errors.New("endpoint: ConnectOne: the transport is not a QP of the engine (AddQP it first)")
	}
	local.Host, local.QPN = e.Host(), t.QPN()
	if err := t.Connect(local, remote); err != nil {
		return err
	}
	e.applyDenied(t)
	return nil
}

// Retire takes qpn out of service for good: its timer stops and the
// engine never drives it again — it sends nothing, its timers never run,
// packets addressed to it are counted (Counters.RxRetired) and dropped,
// and its posted work never completes. It is what a NIC does to a QP a
// failed job leaves behind: without it the QP keeps retransmitting toward
// a peer that is gone (or restarted, and knows nothing of it) until its
// retries run out, loading the fabric the next job needs. Its Stats stay
// as they were. It reports whether qpn was a live QP.
func (e *Engine) Retire(qpn uint32) bool {
	s := e.slot(qpn)
	if s == nil {
		return false
	}
	if _, done := s.t.(*retiredQP); done {
		return false
	}
	s.timer.Stop()
	if _, ok := s.t.(verbs.PortStatusSpeaker); ok {
		e.speakers--
	}
	s.t = &retiredQP{qpn: qpn, stats: s.t.Stats(), rx: &e.Counters.RxRetired}
	return true
}

// retiredQP stands in for a retired transport (Engine.Retire).
type retiredQP struct {
	qpn   uint32
	stats verbs.QPStats
	rx    *uint64
}

func (q *retiredQP) QPN() uint32                                 { return q.qpn }
func (q *retiredQP) State() verbs.QPState                        { return verbs.QPError }
func (q *retiredQP) Connect(_, _ verbs.QPAttrs) error            { return verbs.ErrQPError }
func (q *retiredQP) Post(int64, verbs.WorkRequest) error         { return verbs.ErrQPError }
func (q *retiredQP) Send(int64, uint32, []byte) (verbs.Tx, bool) { return verbs.Tx{}, false }
func (q *retiredQP) Receive(int64, *verbs.Rx)                    { *q.rx++ }
func (q *retiredQP) Deadline() (int64, bool)                     { return 0, false }
func (q *retiredQP) Tick(int64)                                  {}
func (q *retiredQP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	return dst
}
func (q *retiredQP) Stats() verbs.QPStats { return q.stats }
