package roce

import (
	"errors"
	"math"

	"github.com/vcluster/vcluster/verbs"
)

var _ verbs.Transport = (*QP)(nil)

// Connect errors.
var (
	ErrState = errors.New("roce: Connect on a QP that is not in RESET")
	ErrQPN   = errors.New("roce: local attributes name another QPN")
)

// wrEntry is a posted work request and the sequence numbers it occupies.
type wrEntry struct {
	wr    verbs.WorkRequest
	first uint64 // first sequence
	n     uint64 // packets
}

func (w *wrEntry) end() uint64 { return w.first + w.n }

// Per-packet requester flags.
const (
	pkRetx   = 1 << iota // retransmitted at least once (no RTT sample: Karn)
	pkSacked             // IRN: selectively acknowledged
)

type pktInfo struct {
	sent  int64 // first transmission time
	flags uint8
}

// retxRec is an IRN retransmission and snd_max at the time it was sent.
type retxRec struct{ seq, mark uint64 }

// ctrlPkt is a queued control packet (NAK, IRN NACK, CNP).
type ctrlPkt struct {
	op       uint8
	syndrome uint8
	psn, msn uint32
}

// immRec is an IRN WriteImm whose last packet arrived before the message
// was complete.
type immRec struct {
	seq uint64
	imm uint32
	n   uint32
}

// QP is one RoCEv2 RC queue pair: requester and responder, as a pure state
// machine (see verbs.Transport).
//
// Sequence numbers are kept as 64-bit counters from 0; the wire carries
// (InitialPSN + seq) mod 2^24.
type QP struct {
	cfg   Config
	mem   *verbs.Memory
	qpn   uint32
	state verbs.QPState
	local verbs.QPAttrs
	peer  verbs.QPAttrs
	ev    uint32
	irn   bool
	stats verbs.QPStats
	cqe   []verbs.Completion

	// --- requester ---
	wrs     []wrEntry // ring
	wrHead  int       // absolute index of the oldest WR
	wrTail  int       // absolute index one past the newest
	wrCur   int       // absolute index of the WR holding sndNxt
	nextSeq uint64    // first sequence of the next posted WR
	sndUna  uint64    // oldest unacknowledged
	sndNxt  uint64    // next to send (go-back-N rewinds it)
	sndMax  uint64    // one past the highest ever sent
	pk      []pktInfo // ring indexed by sequence
	retries int
	rtoAt   int64
	rtoFrom int64 // when the timer was (re)started
	rtoOn   bool

	// pacing: the next send may go at lastSendPs + lastBits/rate (ps)
	lastSendPs int64
	lastBits   int64
	sentAny    bool
	paceAt     int64 // ns; valid when paceWait
	paceWait   bool

	cc     dcqcn
	tm     timely
	ccKind uint8 // 0 none, 1 dcqcn, 2 timely

	// IRN requester
	recovery    bool
	recoverySeq uint64
	retxScan    uint64    // next candidate for retransmission
	retxLimit   uint64    // candidates lie below it (highest SACK + 1, or snd_max on timeout)
	lost        []uint64  // ring: retransmissions found lost again
	lostHead    int       // absolute
	lostTail    int       // absolute
	retxLog     []retxRec // ring: retransmissions in send order (marks non-decreasing)
	retxHead    int
	retxTail    int
	bdpPkts     uint64

	// --- responder ---
	ePSN     uint64 // expected sequence
	msn      uint32
	curKey   uint32 // go-back-N: the message being placed
	curVA    uint64
	curLen   uint64
	curOff   uint64
	curOn    bool
	nakSent  bool // go-back-N: a NAK went out for the current ePSN
	unacked  int
	ackDue   bool
	ctrl     [64]ctrlPkt
	ctrlHead int
	ctrlN    int
	lastCNP  int64
	cnpAny   bool
	npOn     bool

	// IRN responder
	rxBits   []uint64 // out-of-order received, indexed by sequence
	rxLast   []uint64 // out-of-order received last packets of messages
	rxMask   uint64
	ooo      int // bits set in rxBits
	nackAt   int64
	imms     []immRec
	pktHdr   Packet
	hdrWrite Header
}

// New returns a QP in RESET. cfg must Validate (New panics otherwise: a
// configuration error is a programming error caught by Validate earlier).
// mem is the host's registered memory; qpn the local 24-bit QP number;
// seed feeds the derived source port and flow label.
func New(cfg Config, mem *verbs.Memory, qpn uint32, seed uint64) *QP {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	q := &QP{cfg: cfg, mem: mem, qpn: qpn & PSNMask, irn: cfg.Reliability == IRN}
	rng := splitmix(seed ^ uint64(qpn)*0x9e3779b97f4a7c15)
	sp := cfg.SrcPort
	if sp == 0 {
		sp = uint16(49152 + rng.next()%16384)
	}
	fl := cfg.FlowLabel
	if fl == 0 {
		fl = uint16(rng.next()%0xffff) + 1
	}
	q.ev = EV(sp, cfg.Plane, fl)
	q.wrs = make([]wrEntry, 16)
	q.pk = make([]pktInfo, 1024)
	q.cqe = make([]verbs.Completion, 0, 16)
	switch cfg.CC {
	case CCDCQCN:
		q.ccKind = 1
		q.cc = newDCQCN(&q.cfg.DCQCN, cfg.LineRateBps)
		q.npOn = true
	case CCTimely:
		q.ccKind = 2
		q.tm = newTimely(&q.cfg.Timely, cfg.LineRateBps)
	}
	if q.irn {
		w := cfg.oooWindow()
		q.rxBits = make([]uint64, w/64)
		q.rxLast = make([]uint64, w/64)
		q.rxMask = uint64(w - 1)
		q.lost = make([]uint64, 256)
		q.retxLog = make([]retxRec, 256)
		q.imms = make([]immRec, 0, 16)
		if cfg.IRN.BDPFC {
			q.bdpPkts = uint64(cfg.bdpPackets())
		}
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

type splitmixState struct{ s uint64 }

func splitmix(seed uint64) *splitmixState { return &splitmixState{seed} }

func (r *splitmixState) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// QPN implements verbs.Transport.
func (q *QP) QPN() uint32 { return q.qpn }

// State implements verbs.Transport.
func (q *QP) State() verbs.QPState { return q.state }

// Connect implements verbs.Transport.
func (q *QP) Connect(local, remote verbs.QPAttrs) error {
	if q.state != verbs.QPReset {
		return ErrState
	}
	if local.QPN&PSNMask != q.qpn {
		return ErrQPN
	}
	local.InitialPSN &= PSNMask
	remote.InitialPSN &= PSNMask
	remote.QPN &= PSNMask
	q.local, q.peer = local, remote
	q.state = verbs.QPReady
	return nil
}

// Post implements verbs.Transport: OpWrite and OpWriteImm.
func (q *QP) Post(now int64, wr verbs.WorkRequest) error {
	if _, err := verbs.CheckPost(q.state, wr, q.mem); err != nil {
		return err
	}
	mtu := uint64(q.cfg.PMTU)
	n := max((wr.Length+mtu-1)/mtu, 1)
	if q.wrTail-q.wrHead == len(q.wrs) {
		q.growWRs()
	}
	q.wrs[q.wrTail&(len(q.wrs)-1)] = wrEntry{wr: wr, first: q.nextSeq, n: n}
	q.wrTail++
	q.nextSeq += n
	q.stats.BytesPosted += wr.Length
	return nil
}

func (q *QP) growWRs() {
	nw := make([]wrEntry, 2*len(q.wrs))
	for i := q.wrHead; i < q.wrTail; i++ {
		nw[i&(len(nw)-1)] = q.wrs[i&(len(q.wrs)-1)]
	}
	q.wrs = nw
}

func (q *QP) wr(abs int) *wrEntry { return &q.wrs[abs&(len(q.wrs)-1)] }

// findWR returns the absolute index of the WR holding seq (which must lie
// in [wrs[head].first, nextSeq)).
func (q *QP) findWR(seq uint64) int {
	lo, hi := q.wrHead, q.wrTail-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if q.wr(m).first <= seq {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

func (q *QP) pkt(seq uint64) *pktInfo { return &q.pk[seq&uint64(len(q.pk)-1)] }

func (q *QP) growPk() {
	np := make([]pktInfo, 2*len(q.pk))
	for s := q.sndUna; s < q.sndMax; s++ {
		np[s&uint64(len(np)-1)] = *q.pkt(s)
	}
	q.pk = np
}

// PollCompletions implements verbs.Transport.
func (q *QP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	dst = append(dst, q.cqe...)
	clear(q.cqe)
	q.cqe = q.cqe[:0]
	return dst
}

// Stats implements verbs.Transport.
func (q *QP) Stats() verbs.QPStats {
	s := q.stats
	switch q.ccKind {
	case 1:
		s.RateBps = int64(q.cc.rc)
	case 2:
		s.RateBps = int64(q.tm.rate)
	default:
		s.RateBps = q.cfg.LineRateBps
	}
	return s
}

// rate returns the sending rate at now.
func (q *QP) rate(now int64) float64 {
	switch q.ccKind {
	case 1:
		return q.cc.rate(now)
	case 2:
		return q.tm.rate
	}
	return float64(q.cfg.LineRateBps)
}

// Deadline implements verbs.Transport.
func (q *QP) Deadline() (int64, bool) {
	if q.state != verbs.QPReady {
		return 0, false
	}
	t, ok := int64(0), false
	if q.rtoOn {
		t, ok = q.rtoAt, true
	}
	if q.paceWait && (!ok || q.paceAt < t) {
		t, ok = q.paceAt, true
	}
	return t, ok
}

// Tick implements verbs.Transport: the retransmission timer.
func (q *QP) Tick(now int64) {
	if q.state != verbs.QPReady || !q.rtoOn || now < q.rtoAt {
		return
	}
	q.rtoOn = false
	if q.sndUna == q.sndMax {
		return
	}
	q.stats.Timeouts++
	if q.retries >= q.cfg.RetryCount {
		q.fail(verbs.StatusRetryExceeded)
		return
	}
	q.retries++
	if q.irn {
		// Enter recovery; everything outstanding and not SACKed is lost.
		if !q.recovery {
			q.recovery, q.recoverySeq = true, q.sndMax
		}
		q.retxScan, q.retxLimit = q.sndUna, q.sndMax
		q.lostHead, q.lostTail = 0, 0
		q.retxHead, q.retxTail = 0, 0
	} else {
		q.goBack(q.sndUna)
	}
	q.armRTO(now)
}

func (q *QP) goBack(seq uint64) {
	q.sndNxt = seq
	q.wrCur = q.findWR(seq)
}

func (q *QP) rto() int64 {
	if !q.irn {
		return q.cfg.TimeoutNs
	}
	if q.sndMax-q.sndUna <= uint64(q.cfg.IRN.RTOLowPackets) {
		return q.cfg.IRN.RTOLowNs
	}
	return q.cfg.IRN.RTOHighNs
}

// armRTO (re)starts the retransmission timer, or stops it when nothing is
// outstanding. Like an IB requester, the timer restarts on every response
// and detects the absence of responses, not the loss of one packet.
func (q *QP) armRTO(now int64) {
	if q.sndUna == q.sndMax {
		q.rtoOn = false
		return
	}
	q.rtoOn, q.rtoFrom, q.rtoAt = true, now, now+q.rto()
}

// fail completes the oldest WR with st, flushes the rest and moves the QP
// to ERROR.
func (q *QP) fail(st verbs.Status) {
	if q.wrHead < q.wrTail {
		q.failAt(q.wr(q.wrHead).first, st)
	}
	q.enterError()
}

// failAt completes the WR holding seq with st and every other outstanding
// WR (under IRN, earlier ones may not be fully placed) with FLUSHED, and
// moves the QP to ERROR.
func (q *QP) failAt(seq uint64, st verbs.Status) {
	for i := q.wrHead; i < q.wrTail; i++ {
		w := q.wr(i)
		s := verbs.StatusFlushed
		if w.first <= seq && seq < w.end() {
			s = st
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: s})
	}
	q.wrHead = q.wrTail
	q.enterError()
}

func (q *QP) enterError() {
	for i := q.wrHead; i < q.wrTail; i++ {
		w := q.wr(i)
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: verbs.StatusFlushed})
	}
	q.wrHead = q.wrTail
	q.state = verbs.QPError
	q.rtoOn = false
	q.paceWait = false
	q.ackDue = false
}

// ackTo acknowledges every sequence below seq (which lies in
// [sndUna, sndMax]) and completes the WRs it covers.
func (q *QP) ackTo(seq uint64) bool {
	if seq <= q.sndUna {
		return false
	}
	q.sndUna = seq
	if !q.irn && q.sndNxt < seq {
		q.sndNxt = seq
		q.wrCur = q.findWR(min(seq, q.nextSeq-1))
	}
	q.retries = 0
	for q.wrHead < q.wrTail {
		w := q.wr(q.wrHead)
		if w.end() > seq {
			break
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: verbs.StatusOK, Bytes: w.wr.Length})
		q.stats.BytesCompleted += w.wr.Length
		q.wrHead++
	}
	if q.wrCur < q.wrHead {
		q.wrCur = q.wrHead
	}
	if q.recovery && seq >= q.recoverySeq {
		q.recovery = false
	}
	return true
}

// --- sending ---

// psnOf maps a requester sequence to its wire PSN.
func (q *QP) psnOf(seq uint64) uint32 { return (q.local.InitialPSN + uint32(seq)) & PSNMask }

// rpsnOf maps a responder sequence to the peer's PSN.
func (q *QP) rpsnOf(seq uint64) uint32 { return (q.peer.InitialPSN + uint32(seq)) & PSNMask }

// sext24 sign-extends a 24-bit difference.
func sext24(d uint32) int64 { return int64(int32(d<<8) >> 8) }

// Send implements verbs.Transport.
func (q *QP) Send(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	if q.ctrlN > 0 {
		c := q.ctrl[q.ctrlHead]
		q.ctrlHead = (q.ctrlHead + 1) & (len(q.ctrl) - 1)
		q.ctrlN--
		return q.sendCtrl(buf, c)
	}
	if q.state != verbs.QPReady {
		return verbs.Tx{}, false
	}
	if q.ackDue {
		q.ackDue = false
		q.unacked = 0
		return q.sendCtrl(buf, ctrlPkt{op: OpAck, syndrome: SyndromeACK | CreditsInvalid, psn: q.rpsnOf(q.ePSN - 1), msn: q.msn})
	}
	if freePlanes&(1<<uint(q.cfg.Plane)) == 0 {
		// The port is full: the engine asks again when it drains, so no
		// pacing deadline (a stale one would wake the QP for nothing, at
		// the same instant, forever).
		q.paceWait = false
		return verbs.Tx{}, false
	}
	seq, retx, ok := q.nextData()
	if !ok {
		q.paceWait = false
		return verbs.Tx{}, false
	}
	// Pacing at the current rate, in picoseconds: the deadline is rounded
	// up to the ns, but a packet sent within that ns starts at its exact
	// time, so the fraction carries to the next gap instead of being lost
	// on every packet (which cost 3.7% of 1.6T with 4 KB packets). A
	// packet sent later than that (idle, or waiting for the port) starts
	// at now: no credit is banked.
	nowPs := now * 1000
	startPs := nowPs
	if q.sentAny {
		at := q.lastSendPs + int64(math.Round(float64(q.lastBits)*1e12/q.rate(now)))
		if nowPs < at {
			q.paceWait = true
			q.paceAt = (at + 999) / 1000
			return verbs.Tx{}, false
		}
		if nowPs-at < 1000 {
			startPs = at
		}
	}
	q.paceWait = false
	tx := q.buildData(now, seq, buf)
	if retx {
		q.stats.Retransmissions++
	} else {
		q.stats.DataPacketsSent++
	}
	q.lastSendPs, q.lastBits, q.sentAny = startPs, int64(tx.WireLen+q.cfg.WireOverhead)*8, true
	if q.ccKind == 1 {
		q.cc.onSent(tx.WireLen)
	}
	if !q.rtoOn {
		q.armRTO(now)
	} else if q.irn {
		q.rtoAt = q.rtoFrom + q.rto() // RTO_low or RTO_high by what is in flight now
	}
	return tx, true
}

// nextData picks the next data packet: IRN retransmissions first, then
// (go-back-N) the rewound sequence, then new data. It commits nothing but
// harmless skips; Send commits with buildData.
func (q *QP) nextData() (seq uint64, retx, ok bool) {
	if q.irn {
		for q.lostHead < q.lostTail {
			s := q.lost[q.lostHead&(len(q.lost)-1)]
			if s >= q.sndUna && q.pkt(s).flags&pkSacked == 0 {
				return s, true, true
			}
			q.lostHead++
		}
		if q.recovery || q.retxScan < q.retxLimit {
			if q.retxScan < q.sndUna {
				q.retxScan = q.sndUna
			}
			for q.retxScan < q.retxLimit && q.pkt(q.retxScan).flags&pkSacked != 0 {
				q.retxScan++
			}
			if q.retxScan < q.retxLimit {
				return q.retxScan, true, true
			}
		}
		if q.sndMax >= q.nextSeq {
			return 0, false, false
		}
		if q.bdpPkts > 0 && q.sndMax-q.sndUna >= q.bdpPkts {
			return 0, false, false
		}
		if q.sndMax-q.sndUna >= uint64(q.cfg.MaxOutstandingPSNs) {
			return 0, false, false
		}
		return q.sndMax, false, true
	}
	if q.sndNxt >= q.nextSeq {
		return 0, false, false
	}
	if q.sndNxt == q.sndMax && q.sndMax-q.sndUna >= uint64(q.cfg.MaxOutstandingPSNs) {
		return 0, false, false
	}
	return q.sndNxt, q.sndNxt < q.sndMax, true
}

// buildData encodes data packet seq into buf and advances the send state.
func (q *QP) buildData(now int64, seq uint64, buf []byte) verbs.Tx {
	var wi int
	if q.irn {
		if seq == q.sndMax {
			wi = q.wrCur
			for q.wr(wi).end() <= seq {
				wi++
			}
			q.wrCur = wi
		} else {
			wi = q.findWR(seq)
		}
	} else {
		wi = q.wrCur
		for q.wr(wi).end() <= seq {
			wi++
		}
		q.wrCur = wi
	}
	w := q.wr(wi)
	idx := seq - w.first
	mtu := uint64(q.cfg.PMTU)
	off := idx * mtu
	n := min(mtu, w.wr.Length-off)
	if w.wr.Length == 0 {
		n = 0
	}
	last := idx == w.n-1
	imm := w.wr.Op == verbs.OpWriteImm
	h := &q.hdrWrite
	*h = Header{PKey: DefaultPKey, DestQP: q.peer.QPN, PSN: q.psnOf(seq)}
	switch {
	case w.n == 1 && imm:
		h.Opcode = OpWriteOnlyImm
	case w.n == 1:
		h.Opcode = OpWriteOnly
	case idx == 0:
		h.Opcode = OpWriteFirst
	case last && imm:
		h.Opcode = OpWriteLastImm
	case last:
		h.Opcode = OpWriteLast
	default:
		h.Opcode = OpWriteMiddle
	}
	h.AckReq = last
	h.RETH = RETH{VA: w.wr.RemoteVA + off, RKey: w.wr.RemoteKey, DMALen: uint32(w.wr.Length)}
	if idx == 0 {
		h.RETH.VA = w.wr.RemoteVA
	}
	if last && imm {
		h.Imm = w.wr.Imm
	}
	var payload []byte
	if n > 0 {
		payload, _ = q.mem.Bytes(w.wr.LocalKey, w.wr.LocalVA+off, n)
	}
	stored, wire, err := Encode(buf, h, q.irn, payload, int(n))
	if err != nil {
		panic("roce: Send buffer shorter than verbs.MaxTxBytes")
	}
	// Advance the send state.
	if seq == q.sndMax {
		if q.sndMax-q.sndUna >= uint64(len(q.pk)) {
			q.growPk()
		}
		*q.pkt(seq) = pktInfo{sent: now}
		q.sndMax++
	} else {
		q.pkt(seq).flags |= pkRetx
		if q.irn {
			q.logRetx(seq)
		}
	}
	if q.irn {
		if seq == q.retxScan {
			q.retxScan++
		} else if q.lostHead < q.lostTail && q.lost[q.lostHead&(len(q.lost)-1)] == seq {
			q.lostHead++
		}
	} else {
		q.sndNxt = seq + 1
	}
	return verbs.Tx{Len: stored, WireLen: wire, DstHost: q.peer.Host, EV: q.ev, DSCP: verbs.DSCPRoCE, ECT: true}
}

func (q *QP) logRetx(seq uint64) {
	if !q.cfg.IRN.LostRetxDetect {
		return
	}
	if q.retxTail-q.retxHead == len(q.retxLog) {
		nl := make([]retxRec, 2*len(q.retxLog))
		for i := q.retxHead; i < q.retxTail; i++ {
			nl[i&(len(nl)-1)] = q.retxLog[i&(len(q.retxLog)-1)]
		}
		q.retxLog = nl
	}
	q.retxLog[q.retxTail&(len(q.retxLog)-1)] = retxRec{seq: seq, mark: q.sndMax}
	q.retxTail++
}

func (q *QP) pushLost(seq uint64) {
	if q.lostTail-q.lostHead == len(q.lost) {
		nl := make([]uint64, 2*len(q.lost))
		for i := q.lostHead; i < q.lostTail; i++ {
			nl[i&(len(nl)-1)] = q.lost[i&(len(q.lost)-1)]
		}
		q.lost = nl
	}
	q.lost[q.lostTail&(len(q.lost)-1)] = seq
	q.lostTail++
}

func (q *QP) sendCtrl(buf []byte, c ctrlPkt) (verbs.Tx, bool) {
	h := &q.hdrWrite
	*h = Header{Opcode: c.op, PKey: DefaultPKey, DestQP: q.peer.QPN, PSN: c.psn}
	if c.op == OpCNP {
		h.BECN = true
		h.PSN = 0
		q.stats.CNPsSent++
	} else {
		h.AETH = AETH{Syndrome: c.syndrome, MSN: c.msn}
	}
	stored, wire, err := Encode(buf, h, q.irn, nil, 0)
	if err != nil {
		panic("roce: Send buffer shorter than verbs.MaxTxBytes")
	}
	q.stats.ControlPacketsSent++
	return verbs.Tx{Len: stored, WireLen: wire, DstHost: q.peer.Host, EV: q.ev, DSCP: verbs.DSCPControl}, true
}

func (q *QP) queueCtrl(c ctrlPkt) {
	if q.ctrlN == len(q.ctrl) {
		return // full: drop (only the requester's knowledge of SACKs suffers)
	}
	q.ctrl[(q.ctrlHead+q.ctrlN)&(len(q.ctrl)-1)] = c
	q.ctrlN++
}

// --- receiving ---

// Receive implements verbs.Transport.
func (q *QP) Receive(now int64, rx *verbs.Rx) {
	if q.state != verbs.QPReady {
		return
	}
	if rx.Trimmed {
		q.stats.TrimmedReceived++
		return
	}
	p := &q.pktHdr
	if p.Decode(rx.Data, max(rx.WireLen, len(rx.Data)), q.irn) != nil || p.DestQP != q.qpn {
		return
	}
	switch p.Opcode {
	case OpAck:
		q.recvAck(now, p)
	case OpCNP:
		q.stats.CNPsReceived++
		if q.ccKind == 1 {
			q.cc.onCNP(now)
		}
	default:
		q.recvData(now, p, rx.CE)
	}
}

func (q *QP) recvAck(now int64, p *Packet) {
	// Unwrap the PSN against sndUna.
	d := sext24(p.PSN - q.psnOf(q.sndUna))
	a := p.AETH
	switch {
	case a.IsACK():
		if d < -1 || uint64(d+1) > q.sndMax-q.sndUna {
			return
		}
		seq := q.sndUna + uint64(d+1)
		if q.ackTo(seq) {
			q.rttSample(now, seq)
		}
		q.armRTO(now)
	case a.IsNAK():
		if d < 0 || uint64(d) > q.sndMax-q.sndUna {
			return
		}
		seq := q.sndUna + uint64(d) // the expected PSN (sequence error) or the failing PSN
		q.stats.NacksReceived++
		switch a.Code() {
		case NakPSNSeqError:
			progress := q.ackTo(seq)
			if q.irn {
				q.onSack(a.MSN)
				if !q.recovery && q.sndUna < q.sndMax {
					q.recovery, q.recoverySeq = true, q.sndMax
					q.retxScan = q.sndUna
				}
			} else if q.sndUna < q.sndMax {
				if !progress {
					if q.retries >= q.cfg.RetryCount {
						q.fail(verbs.StatusRetryExceeded)
						return
					}
					q.retries++
				}
				q.goBack(seq)
			}
			q.armRTO(now)
		default:
			st := verbs.StatusRemoteOp // invalid request, remote operational error
			if a.Code() == NakRemoteAccess {
				st = verbs.StatusRemoteAccess
			}
			if !q.irn {
				q.ackTo(seq) // in order: everything before the failing PSN was placed
			}
			q.failAt(seq, st)
		}
	}
}

// onSack records an IRN NACK's SACKed PSN (carried in the AETH MSN field).
func (q *QP) onSack(psn uint32) {
	d := sext24(psn - q.psnOf(q.sndUna))
	if d < 0 || uint64(d) >= q.sndMax-q.sndUna {
		return
	}
	s := q.sndUna + uint64(d)
	q.pkt(s).flags |= pkSacked
	if s+1 > q.retxLimit {
		q.retxLimit = s + 1
	}
	// Retransmissions sent before s was first sent are lost if still
	// missing (one path, FIFO).
	for q.retxHead < q.retxTail {
		r := q.retxLog[q.retxHead&(len(q.retxLog)-1)]
		if r.mark > s {
			break
		}
		q.retxHead++
		if r.seq >= q.sndUna && q.pkt(r.seq).flags&pkSacked == 0 {
			q.pushLost(r.seq)
		}
	}
}

func (q *QP) rttSample(now int64, ackSeq uint64) {
	pi := q.pkt(ackSeq - 1)
	if pi.flags&pkRetx != 0 {
		return
	}
	rtt := now - pi.sent
	q.stats.RTTSamples++
	q.stats.LastRTT = rtt
	if q.stats.MinRTT == 0 || rtt < q.stats.MinRTT {
		q.stats.MinRTT = rtt
	}
	if q.ccKind == 2 {
		q.tm.onRTT(rtt, ackSeq, q.sndMax)
	}
}

// nak queues a NAK with code and the PSN of seq.
func (q *QP) nak(code uint8, seq uint64, msn uint32) {
	q.queueCtrl(ctrlPkt{op: OpAck, syndrome: SyndromeNAK | code, psn: q.rpsnOf(seq), msn: msn})
}

func (q *QP) recvData(now int64, p *Packet, ce bool) {
	if ce {
		q.stats.ECNMarksReceived++
		if q.npOn && (!q.cnpAny || now-q.lastCNP >= q.cfg.DCQCN.CNPIntervalNs) {
			q.cnpAny, q.lastCNP = true, now
			q.queueCtrl(ctrlPkt{op: OpCNP})
		}
	}
	d := sext24(p.PSN - q.rpsnOf(q.ePSN))
	if d < 0 {
		// Duplicate: acknowledge (IB C9-110).
		q.stats.DuplicatesReceived++
		if q.ePSN > 0 {
			q.countAck(p.AckReq || q.ooo > 0)
		}
		return
	}
	if q.irn {
		q.recvIRN(now, p, uint64(d))
		return
	}
	if d > 0 {
		// Go-back-N: drop; NAK once per gap.
		if !q.nakSent {
			q.nakSent = true
			q.nak(NakPSNSeqError, q.ePSN, q.msn)
			q.ackDue, q.unacked = false, 0
		}
		return
	}
	// In order.
	if code, ok := q.placeGBN(p); !ok {
		q.nak(code, q.ePSN, q.msn)
		q.enterError()
		return
	}
	q.ePSN++
	q.nakSent = false
	q.countAck(p.AckReq)
}

func (q *QP) countAck(now bool) {
	q.unacked++
	if now || q.unacked >= q.cfg.AckEvery {
		q.ackDue = true
	}
}

// placeGBN places an in-order WRITE packet; it returns a NAK code on error.
func (q *QP) placeGBN(p *Packet) (uint8, bool) {
	mtu := q.cfg.PMTU
	n := p.PayloadLen
	op := p.Opcode
	if n > mtu {
		return NakInvalidReq, false
	}
	if op == OpWriteFirst || op == OpWriteOnly || op == OpWriteOnlyImm {
		if q.curOn {
			return NakInvalidReq, false
		}
		r := p.RETH
		if _, err := q.mem.Lookup(r.RKey, r.VA, uint64(r.DMALen)); err != nil {
			return NakRemoteAccess, false
		}
		q.curKey, q.curVA, q.curLen, q.curOff, q.curOn = r.RKey, r.VA, uint64(r.DMALen), 0, true
		if op == OpWriteFirst && n != mtu {
			return NakInvalidReq, false
		}
	} else {
		if !q.curOn {
			return NakInvalidReq, false
		}
		if op == OpWriteMiddle && n != mtu {
			return NakInvalidReq, false
		}
	}
	last := op != OpWriteFirst && op != OpWriteMiddle
	end := q.curOff + uint64(n)
	if end > q.curLen || (last && end != q.curLen) {
		return NakInvalidReq, false
	}
	q.place(q.curKey, q.curVA+q.curOff, p)
	q.curOff = end
	if last {
		q.curOn = false
		q.msn = (q.msn + 1) & PSNMask
		if op == OpWriteLastImm || op == OpWriteOnlyImm {
			q.cqe = append(q.cqe, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm, Status: verbs.StatusOK, Bytes: q.curLen, Imm: p.Imm})
		}
	}
	return 0, true
}

// place copies a packet's stored payload into memory (nothing for a
// virtual region or an elided payload) and counts it.
func (q *QP) place(key uint32, va uint64, p *Packet) {
	n := p.PayloadLen
	q.stats.BytesPlaced += uint64(n)
	if n == 0 || p.Elided() {
		return
	}
	if dst, err := q.mem.Bytes(key, va, uint64(n)); err == nil && dst != nil {
		copy(dst, p.Payload)
	}
}

// recvIRN handles a packet d ≥ 0 sequences past ePSN under IRN.
func (q *QP) recvIRN(now int64, p *Packet, d uint64) {
	seq := q.ePSN + d
	if d > q.rxMask {
		return // beyond the out-of-order window: drop
	}
	bit := uint64(1) << (seq & 63)
	wi := (seq & q.rxMask) >> 6
	if d > 0 && q.rxBits[wi]&bit != 0 {
		// Duplicate of an out-of-order packet: re-NACK, rate-limited.
		q.stats.DuplicatesReceived++
		if now-q.nackAt >= q.cfg.IRN.NackIntervalNs {
			q.nackAt = now
			q.nak(NakPSNSeqError, q.ePSN, p.PSN)
		}
		return
	}
	code, last, ok := q.placeIRN(p)
	if !ok {
		if q.ePSN > 0 {
			// The NAK names the failing PSN, which is not cumulative under
			// IRN: acknowledge what is in order first.
			q.queueCtrl(ctrlPkt{op: OpAck, syndrome: SyndromeACK | CreditsInvalid, psn: q.rpsnOf(q.ePSN - 1), msn: q.msn})
		}
		q.nak(code, seq, q.msn)
		q.enterError()
		return
	}
	if last && (p.Opcode == OpWriteLastImm || p.Opcode == OpWriteOnlyImm) {
		if d == 0 {
			q.cqe = append(q.cqe, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm, Status: verbs.StatusOK, Bytes: uint64(p.RETH.DMALen), Imm: p.Imm})
		} else {
			q.addImm(immRec{seq: seq, imm: p.Imm, n: p.RETH.DMALen})
		}
	}
	if d > 0 {
		q.rxBits[wi] |= bit
		if last {
			q.rxLast[wi] |= bit
		}
		q.ooo++
		q.nackAt = now
		q.nak(NakPSNSeqError, q.ePSN, p.PSN)
		q.ackDue, q.unacked = false, 0
		return
	}
	// In order: advance over the packets already held.
	if last {
		q.msn = (q.msn + 1) & PSNMask
	}
	q.ePSN++
	hadOOO := q.ooo > 0
	for q.ooo > 0 {
		s := q.ePSN
		b := uint64(1) << (s & 63)
		w := (s & q.rxMask) >> 6
		if q.rxBits[w]&b == 0 {
			break
		}
		q.rxBits[w] &^= b
		q.ooo--
		if q.rxLast[w]&b != 0 {
			q.rxLast[w] &^= b
			q.msn = (q.msn + 1) & PSNMask
		}
		q.ePSN++
	}
	for len(q.imms) > 0 && q.imms[0].seq < q.ePSN {
		r := q.imms[0]
		q.cqe = append(q.cqe, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm, Status: verbs.StatusOK, Bytes: uint64(r.n), Imm: r.imm})
		copy(q.imms, q.imms[1:])
		q.imms = q.imms[:len(q.imms)-1]
	}
	// While holes remain (or one was just filled) acknowledge every packet.
	q.countAck(p.AckReq || hadOOO)
}

func (q *QP) addImm(r immRec) {
	i := len(q.imms)
	q.imms = append(q.imms, r)
	for i > 0 && q.imms[i-1].seq > r.seq {
		q.imms[i] = q.imms[i-1]
		i--
	}
	q.imms[i] = r
}

// placeIRN places a WRITE packet by its own RETH (IRN: every packet
// carries one).
func (q *QP) placeIRN(p *Packet) (code uint8, last, ok bool) {
	mtu := q.cfg.PMTU
	n := p.PayloadLen
	op := p.Opcode
	last = op != OpWriteFirst && op != OpWriteMiddle
	if n > mtu || ((op == OpWriteFirst || op == OpWriteMiddle) && n != mtu) {
		return NakInvalidReq, last, false
	}
	r := p.RETH
	span := uint64(n)
	if op == OpWriteFirst || op == OpWriteOnly || op == OpWriteOnlyImm {
		span = uint64(r.DMALen)
		if uint64(n) > span {
			return NakInvalidReq, last, false
		}
	}
	if _, err := q.mem.Lookup(r.RKey, r.VA, span); err != nil {
		return NakRemoteAccess, last, false
	}
	q.place(r.RKey, r.VA, p)
	return 0, last, true
}
