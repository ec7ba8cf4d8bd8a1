package roce

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/internal/ring"
	"github.com/vcluster/vcluster/internal/rng"
	"github.com/vcluster/vcluster/verbs"
)

var _ verbs.Transport = (*QP)(nil)

// Connect errors.
var (
	ErrState = verbs.ErrConnectState
	ErrQPN   = verbs.ErrConnectQPN
)

// QP is one RoCEv2 RC queue pair: requester and responder, as a pure state
// machine (see verbs.Transport). It owns the sequence space, the posted
// WRs, the per-packet state and the control queue; what go-back-N and IRN
// do differently is rel's (gbn.go, irn.go), and the sending rate is cc's
// (cc.go). It reads no clock: every input carries now.
//
// Sequence numbers are kept as 64-bit counters from 0; the wire carries
// (InitialPSN + seq) mod 2^24 (psnOf, rpsnOf).
//
// File map: qp.go (this type, New, Connect, Post), requester.go (Send and
// what answers it), responder.go (data in, ACKs out), control.go (the
// control-packet queue), timers.go (the retransmission timer, Deadline,
// Tick), stats.go, inflight.go (per-packet state), wrqueue.go,
// invariants.go.
type QP struct {
	cfg   Config
	mem   *verbs.Memory
	qpn   uint32
	state verbs.QPState
	local verbs.QPAttrs
	peer  verbs.QPAttrs
	ev    uint32 // entropy value (EV): UDP source port, plane and flow label
	stats verbs.QPStats
	cqe   []verbs.Completion

	// rel is go-back-N (*gbn) or IRN (*irn): the requester's and the
	// responder's loss-recovery rules.
	rel reliability
	// rethEvery is IRN's wire extension: every WRITE packet carries a
	// RETH. Encode and Decode take it.
	rethEvery bool
	// rtoVaries: rel.rto() depends on what is in flight (IRN's RTO_low
	// and RTO_high), so Send re-derives the deadline after every packet.
	// Go-back-N's is fixed, and Send skips the interface call (11
	// instructions per packet, BenchmarkRoCEPacket/gbn-*).
	rtoVaries bool
	// cc is the reaction point: DCQCN, TIMELY or line rate.
	cc congestion

	// --- requester ---
	wrs     wrQueue // posted WRs not yet completed, oldest first
	nextSeq uint64  // first sequence of the next posted WR
	sndUna  uint64  // snd_una: the oldest unacknowledged sequence
	sndMax  uint64  // snd_max: one past the highest sequence ever sent
	pk      inflight
	retries int // retries made since the last progress (IB retry_cnt)
	rto     rtoTimer

	// Pacing: the next data packet may go at lastSendPs + lastBits/rate
	// (ps). helpers_test.go reads paceWait and paceAt.
	lastSendPs int64
	lastBits   int64 // wire bits of the last data packet, framing included
	sentAny    bool  // lastSendPs is a send
	paceAt     int64 // ns; valid when paceWait
	paceWait   bool  // Send refused a data packet until paceAt

	// --- responder ---
	ePSN    uint64 // ePSN, the expected sequence (IBA 9.7.5.1): all below it is placed
	msn     uint32 // MSN, the message sequence number: messages completed, mod 2^24
	unacked int    // in-order packets since the last ACK (AckEvery coalescing)
	ackDue  bool   // an ACK for ePSN−1 goes out at the next Send
	ctrl    ring.Ring[ctrlPkt]
	// The DCQCN notification point: a CE-marked data packet makes a CNP,
	// at most one per CNPIntervalNs.
	notifyCE bool  // CC is DCQCN
	cnpAny   bool  // lastCNP is a CNP
	lastCNP  int64 // when the last CNP was queued

	pktHdr   Packet // Receive's decoded packet (kept to avoid allocating)
	hdrWrite Header // Send's header being encoded
}

// New returns a QP in RESET. cfg must Validate (New panics otherwise: a
// configuration error is a programming error caught by Validate earlier).
// mem is the host's registered memory; qpn the local 24-bit QP number;
// seed feeds the derived source port and flow label.
func New(cfg Config, mem *verbs.Memory, qpn uint32, seed uint64) *QP {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	q := &QP{cfg: cfg, mem: mem, qpn: qpn & ib.PSNMask, rethEvery: cfg.Reliability == IRN}
	r := rng.NewFast(seed ^ uint64(qpn)*0x9e3779b97f4a7c15)
	sp := cfg.SrcPort
	if sp == 0 {
		sp = uint16(49152 + r.Uint64()%16384)
	}
	fl := cfg.FlowLabel
	if fl == 0 {
		fl = uint16(r.Uint64()%0xffff) + 1
	}
	q.ev = EV(sp, cfg.Plane, fl)
	q.cqe = make([]verbs.Completion, 0, 16)
	q.cc = newCongestion(&q.cfg)
	q.notifyCE = cfg.CC == CCDCQCN
	if cfg.Reliability == IRN {
		q.rel = newIRN(q)
		q.rtoVaries = true
	} else {
		q.rel = &gbn{q: q}
	}
	return q
}

// EV builds the entropy value of a QP: the UDP source port with its low 4
// bits replaced by the plane (EV bits 0..3 = plane, 4..13 = the port's
// next bits, i.e. the path choice) and bits 14..15 set, and the flow label
// in bits 16..31. The UDP source port on the wire is EV & 0xffff: a derived
// port (49152..65535) is unchanged but for the plane, an explicit one below
// 0xC000 is lifted into the dynamic range, so no port is ever 0
// (endpoint.EV's layout).
func EV(srcPort uint16, plane int, flowLabel uint16) uint32 {
	return uint32(srcPort&^0xf) | 0xc000 | uint32(plane)&0xf | uint32(flowLabel)<<16
}

// EV returns the QP's entropy value (fixed for its lifetime).
func (q *QP) EV() uint32 { return q.ev }

// Config returns the QP's configuration.
func (q *QP) Config() Config { return q.cfg }

// QPN implements verbs.Transport.
func (q *QP) QPN() uint32 { return q.qpn }

// State implements verbs.Transport.
func (q *QP) State() verbs.QPState { return q.state }

// Connect implements verbs.Transport.
func (q *QP) Connect(local, remote verbs.QPAttrs) error {
	local, remote, err := verbs.ConnectAttrs(q.state, q.qpn, local, remote)
	if err != nil {
		return err
	}
	q.local, q.peer = local, remote
	q.state = verbs.QPReady
	return nil
}

// Post implements verbs.Transport: OpWrite and OpWriteImm.
func (q *QP) Post(now int64, wr verbs.WorkRequest) error {
	if debugInvariants {
		q.checkInvariants()
	}
	if _, err := verbs.CheckPost(q.state, wr, q.mem); err != nil {
		return err
	}
	mtu := uint64(q.cfg.PMTU)
	n := max((wr.Length+mtu-1)/mtu, 1)
	q.wrs.Push(wrEntry{wr: wr, first: q.nextSeq, n: n})
	q.nextSeq += n
	q.stats.BytesPosted += wr.Length
	return nil
}

// PollCompletions implements verbs.Transport.
func (q *QP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	if debugInvariants {
		q.checkInvariants()
	}
	dst = append(dst, q.cqe...)
	clear(q.cqe)
	q.cqe = q.cqe[:0]
	return dst
}

// rate returns the sending rate at now.
func (q *QP) rate(now int64) float64 { return q.cc.rate(now) }

// psnOf maps a requester sequence to its wire PSN.
func (q *QP) psnOf(seq uint64) uint32 { return ib.PSNAdd(q.local.InitialPSN, int(seq)) }

// rpsnOf maps a responder sequence to the peer's PSN.
func (q *QP) rpsnOf(seq uint64) uint32 { return ib.PSNAdd(q.peer.InitialPSN, int(seq)) }

// enterError moves the QP to ERROR: every WR still queued completes
// FLUSHED and nothing but queued control packets goes out any more.
func (q *QP) enterError() {
	for i := 0; i < q.wrs.Len(); i++ {
		w := q.wrs.At(i)
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: verbs.StatusFlushed})
	}
	q.wrs.clear()
	q.state = verbs.QPError
	q.rto.on = false
	q.paceWait = false
	q.ackDue = false
}
