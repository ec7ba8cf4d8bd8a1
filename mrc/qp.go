package mrc

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"

	"github.com/vcluster/vcluster/verbs"
)

var _ verbs.Transport = (*QP)(nil)

// Connect errors.
var (
	ErrConnected = errors.New("mrc: QP already connected")
	ErrAttrs     = errors.New("mrc: invalid QP attributes (QPN/PSN beyond 24 bits, MaxPSNRange beyond 255 or negative MaxWImm)")
)

// MRCStats are MRC-specific counters and gauges (QP.MRCStats).
type MRCStats struct {
	// EV pool: EVs per state and in the active sets.
	EVGood, EVSkip, EVAssumedBad, EVDenied, EVActive int
	EVTransitions                                    uint64
	EVChangesDropped                                 uint64 // EV changes not kept: PollEVChanges fell behind (MaxEVChanges)

	TrimNacksReceived        uint64 // requester: NACK TRIMMED
	TrimLastHopNacksReceived uint64 // requester: NACK TRIMMED_LASTHOP
	OtherNacksReceived       uint64 // requester: NO_BITMAP … PSN_OOR_WINDOW
	UnexpEventsReceived      uint64
	AckNaksReceived          uint64 // requester: AETH NAKs (remote access/op errors)

	TrimRetransmits    uint64 // retransmissions caused by trim NACKs
	FastRetransmits    uint64 // … by the fast-loss rule (LossDetection) or the tail-loss probe's cut
	LossRecoveries     uint64 // loss-recovery episodes entered (LossOOO)
	TimeoutRetransmits uint64 // … by ACK timeouts
	NackRetransmits    uint64 // … by other NACKs
	PlaneDownRetx      uint64 // … by SetPlaneStatus(down)

	ProbesSent, ProbeReplies uint64
	TailLossProbes           uint64 // tail-loss probes sent (TLPFactor)

	SACKsSent, NACKsSent, AcksSent uint64 // responder
	OutOfWindow                    uint64 // responder: PSNs beyond the window
	Malformed                      uint64 // packets that failed to decode or were misaddressed
	CtrlDropped                    uint64 // control packets dropped (queue full)

	RTTSamples uint64
	LastRTT    int64
	MinRTT     int64
	SRTT       int64 // smoothed RTT (EWMA 1/8), which the tail-loss probe waits on
	CwndBytes  int64
	MaxWnd     int64
	BaseRTT    int64
	Quadrants  [numQuadrants]uint64 // NSCC decisions, indexed by Quadrant
}

// ctrl kinds.
const (
	ctrlSACK uint8 = iota
	ctrlAck
	ctrlAckNak
	ctrlNACK
	ctrlProbe
)

type ctrlEnt struct {
	kind      uint8
	m         uint8
	code      uint8
	probeResp bool
	rtxEcho   bool
	ts        uint16
	seq       uint16
	psn       uint32
	ev        uint32
}

// pktRec is the requester's state of one PSN in [cack+1, sndNxt).
type pktRec struct {
	wr       uint64 // work-request sequence number
	off      uint32 // payload offset in the message
	plen     uint32
	sendTime int64
	seq      uint64 // send sequence of the current transmission
	ev       int32  // EV index of the current transmission
	tx       uint8  // transmissions so far
	attempts uint8  // ACK timeouts (they drive the backoff)
	nacks    uint8  // retry-counting NACKs since cack last moved past a refusal
	live     bool
	acked    bool
	inflight bool // counted in inflight bytes, timer armed
	queued   bool // waiting in the retransmission queue
	timedOut bool // last loss was a timeout: retransmit on another plane
	// held: refused by the responder for lack of a resource (NO_BITMAP,
	// NO_PKT_BUFFER, NO_RESOURCE); out of flight, retransmitted once the
	// cumulative ack moves (the resource frees as ePSN advances).
	held bool
}

type wrState struct {
	wr       verbs.WorkRequest
	firstPSN uint32
	npkts    uint32
	sent     uint32
	started  bool
	// virt: the local region stores no bytes (checked at Post; regions
	// never change), so sending a packet need not look it up.
	virt  bool
	msn   uint16
	rqmsn uint16
}

type sendRec struct {
	seq uint64
	psn uint32
}

// Responder per-PSN flags.
const (
	rfLast uint8 = 1 << iota
	rfImm
	rfAR
)

// QP is one MRC queue pair: requester and responder as a pure state
// machine (see the package documentation).
type QP struct {
	cfg    Config
	mem    *verbs.Memory
	rxMR   *verbs.MR // the region the last data packet was written to
	qpn    uint32
	state  verbs.QPState
	local  verbs.QPAttrs
	remote verbs.QPAttrs

	// Port status: bit p set ⇔ plane p's port is down on this side
	// (SetPlaneStatus) or on the peer's (ApplyPortStatus).
	localDown, remoteDown uint32
	rng                   *rand.Rand
	evs                   evPool
	cc                    nscc
	stats                 verbs.QPStats
	ms                    MRCStats
	comps                 []verbs.Completion
	rto                   int64
	err                   error // why the QP went to ERROR (Err)

	// requester
	sndMPR int // PSNs the requester may send beyond cack (the latest SACK's MPR)
	negMPR int // … at most this: the peer's MPR negotiated at Connect
	// retries is the connection's retry counter (RetryConnection): timeouts
	// since a PSN was last newly acknowledged.
	retries int
	// held counts packets refused for a resource, waiting for cack to move.
	held int
	// rcvdUnits is the CC_STATE received-bytes counter (256-B units, 24
	// bits) of the latest SACK; NSCC is fed the newly received bytes.
	rcvdUnits uint32
	// Loss recovery (LossOOO, htsim's runSleek): recEnd is sndNxt when
	// recovery began (it ends once cack reaches recEnd−1), rtxNext the
	// first PSN recovery has not retransmitted yet.
	recovery bool
	recEnd   uint32
	rtxNext  uint32
	maxWImm  int
	wrs      []wrState
	wrHead   int // first WR not completed
	wrCur    int // first WR not fully segmented
	wrBase   uint64
	msn      uint16
	rqmsn    uint16
	wimm     int
	sndNxt   uint32
	cack     uint32
	recs     []pktRec
	recMask  uint32
	inflight int64
	rtxQ     ring[uint32]
	order    ring[sendRec]
	timers   timerHeap
	txSeq    uint64
	hiAcked  uint64
	// stallAt is the QP's own retry clock while it has work but no packet
	// outstanding and no plane or EV to send on (0: not running); stallN
	// counts its timeouts. Outstanding packets keep their own timers.
	stallAt int64
	stallN  uint8
	// Tail-loss probe (TLPFactor): lastProgress is the last data
	// transmission or new acknowledgement; srtt the smoothed RTT; tlpFired
	// that the probe of this silence period went; tlpSeq the probe's
	// transmission while it is unacknowledged (tlpPending: queued, not yet
	// sent) and tlpCut, once it was acknowledged, the send sequence below
	// which every unacknowledged transmission is lost.
	lastProgress int64
	srtt         int64
	tlpFired     bool
	tlpPending   bool
	tlpPSN       uint32
	tlpSeq       uint64
	tlpCut       uint64

	// responder
	rcvWin    int
	ePSN      uint32
	rbits     []uint64
	rmask     uint32
	rflags    []uint8
	rimm      []uint32
	rlen      []uint32
	rcount    int // PSNs received above ePSN
	sackBytes int
	rcvdBytes uint64
	rmsn      uint32
	rcvPen    uint8
	ctrl      []ctrlEnt
	ctrlHead  int
	ctrlN     int
	rsp       responderState // resource bounds and EV judgement (responder.go)
}

// New returns a QP in the RESET state. cfg must be valid (Validate); New
// panics otherwise, as it is a programming error. mem is the host's
// registered memory, used both as the source of Writes and as their target
// at the responder. All randomness comes from seed.
func New(cfg Config, mem *verbs.Memory, qpn uint32, seed uint64) *QP {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	q := &QP{cfg: cfg, mem: mem, qpn: qpn & psnMask, rto: cfg.rto()}
	q.rng = rand.New(rand.NewPCG(seed, uint64(qpn)^0x6d7263))
	q.evs.init(&q.cfg, q.rng)
	q.cc.init(ResolveNSCC(&q.cfg), cfg.DisableCC)
	q.ctrl = make([]ctrlEnt, min(16, cfg.CtrlQueue)) // grows to CtrlQueue on demand
	return q
}

// QPN returns the local queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// State returns the QP's lifecycle state.
func (q *QP) State() verbs.QPState { return q.state }

// Err says why the QP is in ERROR (nil while it is not): the status of
// the work request that failed it, in words.
func (q *QP) Err() error { return q.err }

// failError words the status that moved a QP to ERROR.
func failError(s verbs.Status, retries int) error {
	switch s {
	case verbs.StatusRetryExceeded:
		return fmt.Errorf("QP error: retry limit exceeded after %d timeouts", retries)
	case verbs.StatusRemoteAccess:
		return errors.New("QP error: remote access error (the peer rejected the key or range)")
	case verbs.StatusRemoteOp:
		return errors.New("QP error: remote operational error (the peer reported an unexpected event)")
	}
	return fmt.Errorf("QP error: %v", s)
}

// Config returns the QP's configuration.
func (q *QP) Config() Config { return q.cfg }

// Connect records both sides' attributes and moves the QP to READY.
// local.MaxPSNRange (or Config.MPR) is the receive window this side
// offers; remote.MaxPSNRange (or Config.MPR) bounds what it sends, and
// likewise remote.MaxWImm (or Config.MaxWImm) its WriteImms in flight.
func (q *QP) Connect(local, remote verbs.QPAttrs) error {
	if q.state != verbs.QPReset {
		return ErrConnected
	}
	for _, a := range []*verbs.QPAttrs{&local, &remote} {
		if a.QPN > psnMask || a.InitialPSN > psnMask || a.MaxPSNRange < 0 || a.MaxPSNRange > 255 || a.MaxWImm < 0 {
			return ErrAttrs
		}
	}
	q.local, q.remote = local, remote
	rw := local.MaxPSNRange
	if rw == 0 {
		rw = q.cfg.MPR
	}
	sw := remote.MaxPSNRange
	if sw == 0 {
		sw = q.cfg.MPR
	}
	q.maxWImm = remote.MaxWImm
	if q.maxWImm == 0 {
		q.maxWImm = q.cfg.MaxWImm
	}
	q.sndMPR = sw * 128
	q.negMPR = q.sndMPR
	n := 1
	for n < q.sndMPR {
		n <<= 1
	}
	q.recs = make([]pktRec, n)
	q.recMask = uint32(n - 1)
	q.sndNxt = local.InitialPSN
	q.cack = psnAdd(local.InitialPSN, -1)

	q.rcvWin = rw * 128
	n = 128
	for n < q.rcvWin {
		n <<= 1
	}
	q.rbits = make([]uint64, n/64)
	q.rflags = make([]uint8, n)
	q.rimm = make([]uint32, n)
	q.rlen = make([]uint32, n)
	q.rmask = uint32(n - 1)
	q.ePSN = remote.InitialPSN
	q.state = verbs.QPReady
	return nil
}

func psnAdd(a uint32, n int) uint32 { return uint32(int64(a)+int64(n)) & psnMask }

// psnDiff returns a − b in 24-bit serial arithmetic (−2^23 .. 2^23−1).
func psnDiff(a, b uint32) int { return int(int32((a-b)<<8) >> 8) }

// Post validates and queues a work request.
func (q *QP) Post(now int64, wr verbs.WorkRequest) error {
	mr, err := verbs.CheckPost(q.state, wr, q.mem)
	if err != nil {
		return err
	}
	q.wrs = append(q.wrs, wrState{wr: wr, virt: mr.Virtual()})
	q.stats.BytesPosted += wr.Length
	return nil
}

func (q *QP) wrAt(seq uint64) *wrState { return &q.wrs[seq-q.wrBase] }

func (q *QP) busy() bool { return q.wrHead < len(q.wrs) }

// ---------------------------------------------------------------- Send

// Send produces the next packet: queued control packets first (on any
// plane), then retransmissions, then new data (on a plane in freePlanes).
func (q *QP) Send(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	if q.state != verbs.QPReady {
		return verbs.Tx{}, false
	}
	q.evs.clock = now
	if q.ctrlN > 0 {
		return q.sendCtrl(now, buf)
	}
	return q.sendData(now, freePlanes, buf)
}

func (q *QP) cwnd() int64 { return q.cc.window() }

func (q *QP) sendData(now int64, free uint32, buf []byte) (verbs.Tx, bool) {
	if free == 0 || !q.evs.canSend(free) {
		q.noteStall(now)
		return verbs.Tx{}, false
	}
	cwnd := q.cwnd()
	for q.rtxQ.len() > 0 {
		psn := *q.rtxQ.front()
		r := &q.recs[psn&q.recMask]
		if !q.inFlightRange(psn) || !r.live || r.acked || !r.queued || r.inflight {
			q.rtxQ.pop()
			if q.inFlightRange(psn) && r.live && !r.inflight {
				r.queued = false
			}
			continue
		}
		if q.inflight > 0 && q.inflight+int64(r.plen) > cwnd {
			return verbs.Tx{}, false
		}
		avoid := -1
		if r.timedOut {
			avoid = int(q.evs.evs[r.ev].plane)
		}
		ev := q.evs.pick(now, free, r.ev, avoid)
		if ev < 0 {
			return verbs.Tx{}, false
		}
		q.rtxQ.pop()
		r.queued = false
		return q.emitData(now, psn, r, ev, true, buf), true
	}
	if q.wrCur >= len(q.wrs) || psnDiff(q.sndNxt, q.cack) > q.sndMPR {
		return verbs.Tx{}, false
	}
	w := &q.wrs[q.wrCur]
	if !w.started && w.wr.Op == verbs.OpWriteImm && q.wimm >= q.maxWImm {
		return verbs.Tx{}, false
	}
	pmtu := uint64(q.cfg.PMTU)
	off := uint64(w.sent) * pmtu
	plen := min(pmtu, w.wr.Length-min(off, w.wr.Length))
	if q.inflight > 0 && q.inflight+int64(plen) > cwnd {
		return verbs.Tx{}, false
	}
	ev := q.evs.pick(now, free, -1, -1)
	if ev < 0 {
		q.noteStall(now)
		return verbs.Tx{}, false
	}
	if !w.started {
		w.started = true
		w.firstPSN = q.sndNxt
		w.npkts = uint32(max(1, (w.wr.Length+pmtu-1)/pmtu))
		w.msn = q.msn
		q.msn++
		if w.wr.Op == verbs.OpWriteImm {
			w.rqmsn = q.rqmsn
			q.rqmsn++
			q.wimm++
		}
	}
	psn := q.sndNxt
	q.sndNxt = psnAdd(psn, 1)
	r := &q.recs[psn&q.recMask]
	*r = pktRec{wr: q.wrBase + uint64(q.wrCur), off: uint32(off), plen: uint32(plen), live: true}
	w.sent++
	if w.sent == w.npkts {
		q.wrCur++
	}
	return q.emitData(now, psn, r, ev, false, buf), true
}

// noteStall starts the QP's retry clock when it has work, nothing
// outstanding (no packet timer can run) and no path to send on: no plane
// that is up on both sides with a usable EV in its active set. A QP whose
// every path is gone thus fails after the same retry schedule as a packet
// that is never acknowledged, instead of waiting forever.
func (q *QP) noteStall(now int64) {
	if q.stallAt != 0 || !q.busy() || psnDiff(q.sndNxt, q.cack) != 1 || q.evs.anyPath() {
		return
	}
	q.stallAt = now + q.timeoutFor(q.stallN)
}

// timeoutFor returns the ACK timeout of a transmission after attempts
// timeouts: the base RTO for the linear retries, then doubling.
func (q *QP) timeoutFor(attempts uint8) int64 {
	k := int(attempts) - q.cfg.RetryLinear
	if k <= 0 {
		return q.rto
	}
	return q.rto << uint(min(k, 20))
}

func (q *QP) emitData(now int64, psn uint32, r *pktRec, ev int32, rtx bool, buf []byte) verbs.Tx {
	w := q.wrAt(r.wr)
	pmtu := uint32(q.cfg.PMTU)
	idx := r.off / pmtu
	first, last := idx == 0, idx == w.npkts-1
	imm := w.wr.Op == verbs.OpWriteImm
	var op uint8
	switch {
	case first && last && imm:
		op = OpWriteOnlyImm
	case first && last:
		op = OpWriteOnly
	case last && imm:
		op = OpWriteLastImm
	case last:
		op = OpWriteLast
	case first:
		op = OpWriteFirst
	default:
		op = OpWriteMiddle
	}
	r.ev = ev
	r.sendTime = now
	q.stallAt, q.stallN = 0, 0
	q.lastProgress = now
	if !rtx {
		q.tlpFired = false // new data: a new tail to watch
	}
	q.txSeq++
	r.seq = q.txSeq
	if rtx && q.tlpPending && psn == q.tlpPSN {
		q.tlpPending, q.tlpSeq = false, r.seq
	}
	r.tx++
	r.inflight = true
	q.inflight += int64(r.plen)
	// AckReq: on the last packet of a message, and whenever this packet
	// closes the window (cwnd or MPR), so the responder never sits on
	// unacknowledged data below its byte threshold.
	ar := last || q.inflight+int64(q.cfg.PMTU) > q.cwnd() || psnDiff(psn, q.cack) >= q.sndMPR
	h := DataHeader{
		BTH:   BTH{Opcode: op, PKey: DefaultPKey, DestQP: q.remote.QPN, AckReq: ar, Rtx: rtx, TS: true, PSN: psn},
		METH:  METH{RQMSN: w.rqmsn, MSN: w.msn},
		TSETH: TSETH{TS: uint16(now >> 7)},
		RETH:  RETH{VA: w.wr.RemoteVA + uint64(r.off), RKey: w.wr.RemoteKey, DMALen: uint32(w.wr.Length)},
		Imm:   w.wr.Imm,
	}
	hl, _ := h.Encode(buf)
	n := hl
	if !w.virt { // an elided payload has nothing to copy: no lookup
		if src, err := q.mem.Bytes(w.wr.LocalKey, w.wr.LocalVA+uint64(r.off), uint64(r.plen)); err == nil && src != nil {
			n += copy(buf[hl:], src)
			putICRC(buf[n:])
			n += ICRCLen
		}
	}
	q.order.push(sendRec{seq: r.seq, psn: psn})
	q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
	dscp := uint8(verbs.DSCPTrimmable)
	if rtx {
		dscp = verbs.DSCPTrimmableRetx
		q.stats.Retransmissions++
	} else {
		q.stats.DataPacketsSent++
	}
	return verbs.Tx{Len: n, WireLen: hl + int(r.plen) + ICRCLen, DstHost: q.remote.Host,
		EV: q.evs.evs[ev].ev, DSCP: dscp, ECT: true}
}

func (q *QP) pushCtrl(e ctrlEnt) {
	if q.ctrlN == len(q.ctrl) {
		if len(q.ctrl) >= q.cfg.CtrlQueue {
			q.ms.CtrlDropped++
			return
		}
		// Double the ring, unrolling it so the head is at 0.
		grown := make([]ctrlEnt, 2*len(q.ctrl))
		for i := 0; i < q.ctrlN; i++ {
			grown[i] = q.ctrl[(q.ctrlHead+i)&(len(q.ctrl)-1)]
		}
		q.ctrl, q.ctrlHead = grown, 0
	}
	q.ctrl[(q.ctrlHead+q.ctrlN)&(len(q.ctrl)-1)] = e
	q.ctrlN++
}

func (q *QP) sendCtrl(now int64, buf []byte) (verbs.Tx, bool) {
	e := q.ctrl[q.ctrlHead]
	q.ctrlHead = (q.ctrlHead + 1) & (len(q.ctrl) - 1)
	q.ctrlN--
	cack := psnAdd(q.ePSN, -1)
	bth := BTH{PKey: DefaultPKey, DestQP: q.remote.QPN, PSN: cack}
	var n int
	switch e.kind {
	case ctrlSACK:
		s := SETH{M: e.m, ProbeResp: e.probeResp, RtxEcho: e.rtxEcho, EV: e.ev, CackPSN: cack,
			MPR: uint8(q.rcvWin / 128)}
		ao := psnDiff(e.psn, cack)
		s.AckOffset = int16(max(-1<<15, min(1<<15-1, ao)))
		off := 1
		if o := psnDiff(e.psn, q.ePSN); o > 47 {
			off = o - 46
		}
		s.SackOffset = uint16(off)
		s.Bitmap = q.sackBits(psnAdd(cack, off))
		c := CCState{TSEcho: e.ts, OOOCount: uint16(min(q.rcount, 0x7fff)), RcvCwndPen: q.rcvPen,
			RcvdBytes: uint32(q.rcvdBytes>>8) & psnMask}
		n, _ = EncodeSACK(buf, bth, &s, &c)
		q.ms.SACKsSent++
	case ctrlAck:
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: AckSyndrome, MSN: q.rmsn})
		q.ms.AcksSent++
	case ctrlAckNak:
		bth.PSN = e.psn
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: e.code, MSN: q.rmsn})
		q.ms.AcksSent++
	case ctrlNACK:
		bth.PSN = e.psn
		n, _ = EncodeNACK(buf, bth, &NETH{Code: e.code, RtxEcho: e.rtxEcho, TSEcho: e.ts, EV: e.ev, PSN: e.psn})
		q.ms.NACKsSent++
	case ctrlProbe:
		bth.PSN = psnAdd(q.sndNxt, -1)
		n, _ = EncodeProbe(buf, bth, PETH{EV: e.ev, Seq: e.seq, TS: uint16(now >> 7)})
		q.ms.ProbesSent++
	}
	q.stats.ControlPacketsSent++
	return verbs.Tx{Len: n, WireLen: n, DstHost: q.remote.Host, EV: e.ev, DSCP: verbs.DSCPControl}, true
}

// ---------------------------------------------------------------- Receive

// Receive consumes one packet addressed to this QP.
func (q *QP) Receive(now int64, rx *verbs.Rx) {
	if q.state != verbs.QPReady {
		return
	}
	q.evs.clock = now
	b := rx.Data
	if len(b) < BTHLen {
		q.ms.Malformed++
		return
	}
	if dq, _ := verbs.DestQP(b); dq != q.qpn {
		q.ms.Malformed++
		return
	}
	switch op := b[0]; {
	case IsDataOpcode(op):
		q.rcvData(now, rx)
	case op == OpSACK:
		q.rcvSACK(now, rx)
	case op == OpNACK:
		q.rcvNACK(now, rx)
	case op == OpAck:
		q.rcvAck(now, rx)
	case op == OpProbe:
		q.rcvProbe(now, rx)
	default:
		q.ms.Malformed++
	}
}

// inFlightRange reports whether psn is in (cack, sndNxt).
func (q *QP) inFlightRange(psn uint32) bool {
	return psnDiff(psn, q.cack) > 0 && psnDiff(psn, q.sndNxt) < 0
}

func (q *QP) rcvSACK(now int64, rx *verbs.Rx) {
	_, s, c, err := DecodeSACK(rx.Data)
	if err != nil {
		q.ms.Malformed++
		return
	}
	cack := s.CackPSN
	if psnDiff(cack, psnAdd(q.sndNxt, -1)) > 0 {
		q.ms.Malformed++ // acknowledges PSNs never sent
		return
	}
	// Dynamic MPR: the responder's current window bounds what is sent
	// beyond cack from now on (never beyond the negotiated one; packets
	// already sent beyond a shrunk window are not recalled). 0 is no
	// window at all and is ignored.
	if s.MPR > 0 {
		q.sndMPR = min(int(s.MPR)*128, q.negMPR)
	}
	evi := q.evs.lookup(s.EV)
	if s.ProbeResp {
		q.ms.ProbeReplies++
		if evi >= 0 && q.evs.evs[evi].state == EVAssumedBad {
			if s.M == PathSkipOnce {
				q.evs.set(evi, EVSkip, now, CauseProbe)
			} else {
				q.evs.set(evi, EVGood, now, CauseProbe)
			}
		}
	} else if evi >= 0 {
		switch s.M {
		case PathSkipOnce:
			q.evs.skip(evi, now, CauseSackSkip)
		case PathAlwaysSkip:
			q.evs.markBad(evi, now, CauseAlwaysSkip)
		}
	}
	// RTT sample from the triggering packet, valid (htsim's
	// validateSendTs) when it was sent once and the SACK does not echo
	// rtx, or sent exactly twice and the SACK echoes rtx: then the sample
	// times the transmission that triggered it.
	var delay int64
	hasDelay := false
	if trig := psnAdd(cack, int(s.AckOffset)); !s.ProbeResp && q.inFlightRange(trig) {
		r := &q.recs[trig&q.recMask]
		if r.live && (r.tx == 1 && !s.RtxEcho || r.tx == 2 && s.RtxEcho) {
			rtt := now - r.sendTime
			q.sampleRTT(rtt)
			delay, hasDelay = max(0, rtt-int64(q.cc.p.BaseRTT)), true
		}
	}
	// NSCC's acknowledged bytes are the responder's newly received bytes
	// (CC_STATE received bytes, 256-B units modulo 2^24; htsim's
	// recvd_bytes): a SACK that arrives after a later one adds nothing.
	var rcvd int64
	if d := int32((c.RcvdBytes-q.rcvdUnits)<<8) >> 8; d > 0 {
		rcvd = int64(d) << 8
		q.rcvdUnits = c.RcvdBytes & psnMask
	}
	newly := q.ackCumulative(cack)
	base := psnAdd(cack, int(s.SackOffset))
	for bm := s.Bitmap; bm != 0; bm &= bm - 1 {
		p := psnAdd(base, bits.TrailingZeros64(bm))
		if q.inFlightRange(p) {
			if r := &q.recs[p&q.recMask]; r.live && !r.acked {
				newly += q.ackRec(r)
			}
		}
	}
	if newly > 0 {
		q.progress(now)
	}
	// ALWAYS_SKIP is judged on CE-marked arrivals (ResponderConfig), so it
	// echoes a mark too.
	q.cc.onAck(now, rcvd, delay, hasDelay, (s.M == PathSkipOnce || s.M == PathAlwaysSkip) && !s.ProbeResp, q.inflight)
	q.cc.onPenalty(c.RcvCwndPen)
	if q.cfg.LossDetection == LossOOO {
		q.sleek(now, int(c.OOOCount), cack)
	}
	q.detectLoss(now)
	q.completeWRs()
}

// progress notes a new acknowledgement: the silence the tail-loss probe
// waits for starts again, and it may fire again.
func (q *QP) progress(now int64) {
	q.lastProgress = now
	q.tlpFired = false
	q.tlpPending = false // a probe not yet sent is an ordinary retransmission now
}

func (q *QP) sampleRTT(rtt int64) {
	if q.srtt == 0 {
		q.srtt = rtt
	} else {
		q.srtt += (rtt - q.srtt) / 8
	}
	q.stats.RTTSamples++
	q.stats.LastRTT = rtt
	if q.stats.MinRTT == 0 || rtt < q.stats.MinRTT {
		q.stats.MinRTT = rtt
	}
	q.cc.onRTT(rtt)
}

// ackCumulative acknowledges every PSN up to cack and frees their records.
func (q *QP) ackCumulative(cack uint32) int64 {
	var newly int64
	for psnDiff(cack, q.cack) > 0 {
		p := psnAdd(q.cack, 1)
		r := &q.recs[p&q.recMask]
		if r.live && !r.acked {
			newly += q.ackRec(r)
		}
		r.live = false
		q.cack = p
	}
	if q.held > 0 && newly > 0 {
		q.releaseHeld()
	}
	return newly
}

// releaseHeld queues every packet held after a resource NACK for
// retransmission.
func (q *QP) releaseHeld() {
	for p := psnAdd(q.cack, 1); q.held > 0 && psnDiff(p, q.sndNxt) < 0; p = psnAdd(p, 1) {
		if r := &q.recs[p&q.recMask]; r.live && r.held {
			r.nacks = 0
			q.lose(p, r)
		}
	}
	q.held = 0
}

func (q *QP) ackRec(r *pktRec) int64 {
	r.acked = true
	q.unhold(r)
	q.retries = 0 // forward progress resets the connection's retry counter
	if q.tlpSeq != 0 && r.seq == q.tlpSeq {
		// The probe got through: whatever was sent before it and is
		// still unacknowledged, after more than TLPFactor RTTs of
		// silence, is lost (detectLoss).
		q.tlpCut, q.tlpSeq = max(q.tlpCut, r.seq), 0
	}
	if r.inflight {
		r.inflight = false
		q.inflight -= int64(r.plen)
	}
	if r.tx == 1 {
		if r.seq > q.hiAcked {
			q.hiAcked = r.seq
		}
		q.evs.evs[r.ev].losses = 0
	}
	return int64(r.plen)
}

// lose takes a PSN's current transmission out of flight and queues it for
// retransmission.
func (q *QP) lose(psn uint32, r *pktRec) {
	q.unhold(r)
	q.leaveFlight(r)
	if !r.queued {
		r.queued = true
		q.rtxQ.push(psn)
	}
}

// leaveFlight takes r's transmission out of the bytes in flight.
func (q *QP) leaveFlight(r *pktRec) {
	if r.inflight {
		r.inflight = false
		q.inflight -= int64(r.plen)
	}
}

// unhold clears r's hold after a resource NACK.
func (q *QP) unhold(r *pktRec) {
	if r.held {
		r.held = false
		q.held--
	}
}

// sleekThreshold is the fast-loss threshold in packets.
//
// It is also capped at 3/4 of the PSN window the peer allows (MPR): the
// requester never sends beyond cack + MPR, so neither the out-of-order
// count nor the packets sent after a hole can exceed the window, and
// htsim's threshold (1.5·cwnd up to maxwnd, from a transport with no PSN
// window) would never be reached once the window is below maxwnd — at the
// spec's one unit (128 PSNs) on a 400G NIC, every loss would wait for the
// tail-loss probe or the RTO ([I], issue #16).
func (q *QP) sleekThreshold() uint64 {
	mtu := float64(q.cfg.PMTU)
	t := min(q.cfg.SleekFactor*q.cc.cwnd, q.cc.p.MaxWnd) / mtu
	t = min(t, float64(3*q.sndMPR/4))
	return uint64(max(float64(q.cfg.SleekMinPackets), t))
}

// detectLoss walks the transmissions in send order: one is lost once an
// acknowledged tail-loss probe was sent after it (tlpCut) or, under
// LossPerHole ([I], SLEEK-like, per hole), once transmissions sent ≥
// threshold after it have been acknowledged. Under LossOOO the walk only
// drops settled transmissions (and applies tlpCut); sleek finds losses.
func (q *QP) detectLoss(now int64) {
	perHole := q.cfg.LossDetection == LossPerHole
	var thr uint64
	if perHole {
		thr = q.sleekThreshold()
	}
	for q.order.len() > 0 {
		f := q.order.front()
		r := &q.recs[f.psn&q.recMask]
		settled := !r.live || r.acked || !r.inflight || r.seq != f.seq || !q.inFlightRange(f.psn)
		if !settled && f.seq >= q.tlpCut && (!perHole || f.seq+thr > q.hiAcked) {
			return
		}
		psn := q.order.pop().psn
		if !settled {
			q.fastLose(now, psn, r, true)
		}
	}
}

// fastLose retransmits a packet the fast-loss rule (or the tail-loss
// probe's cut) found lost. With penalize, such a silent loss counts
// against its EV (EVLossThreshold consecutive ones → ASSUMED_BAD).
func (q *QP) fastLose(now int64, psn uint32, r *pktRec, penalize bool) {
	q.lose(psn, r)
	r.timedOut = false
	q.ms.FastRetransmits++
	if !penalize {
		return
	}
	e := &q.evs.evs[r.ev]
	if e.losses < 255 {
		e.losses++
	}
	if e.losses >= q.evs.lossThr {
		q.evs.markBad(r.ev, now, CauseSilentLoss)
	}
}

// sleek is the spec's fast-loss rule ([I], htsim's runSleek), run on every
// SACK with its out-of-order count and its cumulative ack (cack): when the
// count reaches the threshold the QP enters loss recovery until the QP's
// cumulative ack reaches the highest PSN sent so far; while it lasts, every
// SACK retransmits the unacknowledged PSNs in [cack+1, min(that end,
// cack+1 + cwnd in packets)) not retransmitted yet in this recovery.
//
// The range is anchored at the SACK's own cumulative ack, as htsim anchors
// runSleek's at the ACK's cum_ack: the out-of-order count describes the
// PSNs above that ack. A SACK overtaken by a later one (SACKs are sprayed
// too) carries an older cack; read from the QP's newer cack instead, its
// range would reach PSNs sent after that SACK left the responder, still in
// flight, and resend them.
func (q *QP) sleek(now int64, ooo int, cack uint32) {
	if q.recovery && psnDiff(q.cack, q.recEnd) >= -1 {
		q.recovery = false
	}
	if !q.recovery {
		if uint64(ooo) < q.sleekThreshold() || q.rtxQ.len() > 0 {
			return
		}
		q.recovery, q.recEnd, q.rtxNext = true, q.sndNxt, psnAdd(q.cack, 1)
		q.ms.LossRecoveries++
	}
	from := psnAdd(q.cack, 1)
	if psnDiff(q.rtxNext, from) > 0 {
		from = q.rtxNext
	}
	// cack ≤ q.cack: rcvSACK applied it first.
	end := psnAdd(cack, 1+int(q.cwnd()/int64(q.cfg.PMTU)))
	if psnDiff(q.recEnd, end) < 0 {
		end = q.recEnd
	}
	for p := from; psnDiff(p, end) < 0; p = psnAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		q.rtxNext = psnAdd(p, 1)
		if r.live && !r.acked && r.inflight {
			// Recovery resends every unacknowledged PSN in range, also
			// those merely still in flight (htsim's runSleek does not
			// penalise paths at all). Only a packet a later transmission
			// overtook (sent before the newest acknowledged one) is a
			// likely loss on its EV's path.
			q.fastLose(now, p, r, r.seq < q.hiAcked)
		}
	}
}

func (q *QP) rcvNACK(now int64, rx *verbs.Rx) {
	_, n, err := DecodeNACK(rx.Data)
	if err != nil {
		q.ms.Malformed++
		return
	}
	switch n.Code {
	case NackTrimmed:
		q.ms.TrimNacksReceived++
	case NackTrimmedLastHop:
		q.ms.TrimLastHopNacksReceived++
	case NackUnexpEvent:
		q.ms.UnexpEventsReceived++
	default:
		q.ms.OtherNacksReceived++
	}
	q.stats.NacksReceived++
	if !q.inFlightRange(n.PSN) {
		if n.Code == NackUnexpEvent {
			q.fail(verbs.StatusRemoteOp, q.wrBase+uint64(q.wrHead))
		}
		return
	}
	r := &q.recs[n.PSN&q.recMask]
	if !r.live || r.acked {
		return
	}
	evi := q.evs.lookup(n.EV)
	current := r.inflight && evi == r.ev // the NACK is about the current transmission
	switch n.Code {
	case NackTrimmed, NackTrimmedLastHop:
		if !current {
			return
		}
		q.lose(n.PSN, r)
		r.timedOut = false
		q.ms.TrimRetransmits++
		if q.cfg.TrimReaction {
			if n.Code == NackTrimmed {
				q.evs.skip(evi, now, CauseTrim)
			}
			q.cc.onTrim(now, int64(r.plen), q.inflight)
		}
	case NackNoBitmap, NackNoPktBuffer, NackNoResource, NackPSNOutOfWindow:
		if !current {
			return
		}
		// These count toward the packet's retry limit (PROTOCOLS.md's NACK
		// table), not the connection's timeout counter: one burst refused by
		// a full bitmap is many NACKs in one RTT, and would otherwise fail
		// the QP before the hole that holds the bitmap is repaired. The
		// count restarts when the cumulative ack moves (the resource is
		// freeing) and does not stretch the packet's ACK timer.
		if r.nacks < 255 {
			r.nacks++
		}
		if q.retryExceeded(int(r.nacks)) {
			q.fail(verbs.StatusRetryExceeded, r.wr)
			return
		}
		r.timedOut = false
		q.ms.NackRetransmits++
		if n.Code == NackPSNOutOfWindow || n.PSN == psnAdd(q.cack, 1) {
			// Out of window: send again. At cack+1 the packet is itself
			// what the cumulative ack waits for (the SACK that moved cack
			// may have overtaken the NACK): holding it would stall the QP
			// until its timer.
			q.lose(n.PSN, r)
			return
		}
		// A resource NACK: sending again at once is refused again until
		// ePSN moves, so wait for the cumulative ack to move (the packet's
		// timer still runs: no progress for an RTO retransmits it anyway).
		q.leaveFlight(r)
		if !r.held && !r.queued {
			r.held = true
			q.held++
		}
	case NackUnexpEvent:
		q.fail(verbs.StatusRemoteOp, r.wr)
	}
}

func (q *QP) rcvAck(now int64, rx *verbs.Rx) {
	bth, a, err := DecodeAck(rx.Data)
	if err != nil {
		q.ms.Malformed++
		return
	}
	if a.Syndrome>>5 == 0b011 { // AETH NAK
		q.ms.AckNaksReceived++
		wr := q.wrBase + uint64(q.wrHead)
		if q.inFlightRange(bth.PSN) {
			if r := &q.recs[bth.PSN&q.recMask]; r.live {
				wr = r.wr
			}
		}
		switch a.Syndrome & 0x1f {
		case NakRemoteAccessError & 0x1f:
			q.fail(verbs.StatusRemoteAccess, wr)
		default:
			q.fail(verbs.StatusRemoteOp, wr)
		}
		return
	}
	if a.Syndrome>>5 != 0 {
		return
	}
	if psnDiff(bth.PSN, psnAdd(q.sndNxt, -1)) > 0 {
		q.ms.Malformed++
		return
	}
	// NSCC hears of these bytes through the received-bytes count of the
	// SACK that accompanies every Transport ACK (or a later one).
	if q.ackCumulative(bth.PSN) > 0 {
		q.progress(now)
	}
	q.detectLoss(now)
	q.completeWRs()
}

// completeWRs completes, in post order, the WRs whose every PSN is
// cumulatively acknowledged.
func (q *QP) completeWRs() {
	for q.wrHead < q.wrCur {
		w := &q.wrs[q.wrHead]
		if psnDiff(q.cack, psnAdd(w.firstPSN, int(w.npkts)-1)) < 0 {
			break
		}
		q.comps = append(q.comps, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op,
			Status: verbs.StatusOK, Bytes: w.wr.Length})
		q.stats.BytesCompleted += w.wr.Length
		if w.wr.Op == verbs.OpWriteImm {
			q.wimm--
		}
		q.wrHead++
	}
	if q.wrHead >= 256 && 2*q.wrHead >= len(q.wrs) {
		n := copy(q.wrs, q.wrs[q.wrHead:])
		clear(q.wrs[n:])
		q.wrs = q.wrs[:n]
		q.wrBase += uint64(q.wrHead)
		q.wrCur -= q.wrHead
		q.wrHead = 0
	}
}

func (q *QP) retryExceeded(attempts int) bool {
	if q.cfg.RetryExp >= 25 {
		return false
	}
	return attempts > q.cfg.RetryLinear+q.cfg.RetryExp
}

// countRetry counts one ACK timeout against attempts — a packet's, or the
// QP's stall clock's — and, under RetryConnection, against the
// connection's counter. It reports
// whether the limit RetryScope applies is exceeded. attempts alone drives
// the backoff of that packet's next timer.
func (q *QP) countRetry(attempts *uint8) bool {
	if *attempts < 255 {
		*attempts++
	}
	if q.cfg.RetryScope == RetryConnection {
		q.retries++
		return q.retryExceeded(q.retries)
	}
	return q.retryExceeded(int(*attempts))
}

// fail moves the QP to ERROR: WR failing completes with status, every
// other outstanding WR with StatusFlushed, in post order.
func (q *QP) fail(status verbs.Status, failing uint64) {
	if q.state == verbs.QPError {
		return
	}
	q.state = verbs.QPError
	q.err = failError(status, q.cfg.RetryLinear+q.cfg.RetryExp+1)
	for k := q.wrHead; k < len(q.wrs); k++ {
		w := &q.wrs[k]
		st := verbs.StatusFlushed
		if q.wrBase+uint64(k) == failing {
			st = status
		}
		q.comps = append(q.comps, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: st})
	}
	q.wrBase += uint64(len(q.wrs))
	q.wrs = q.wrs[:0]
	q.wrHead, q.wrCur = 0, 0
	q.rtxQ.clear()
	q.order.clear()
	q.timers = q.timers[:0]
	q.stallAt = 0
	q.ctrlN = 0
	q.inflight = 0
}

// ---------------------------------------------------------------- timers

// timerLive reports whether a timer still counts: its PSN is unacknowledged
// and has not been sent again since, whether that transmission is in flight
// or was found lost and waits for retransmission. A waiting packet's clock
// keeps running, so one that cannot be retransmitted (no plane, no EV)
// still reaches its retry limit.
func (q *QP) timerLive(t *timerEnt) bool {
	r := &q.recs[t.psn&q.recMask]
	return r.live && !r.acked && r.seq == t.seq && (r.inflight || r.queued || r.held)
}

// Deadline returns the earliest time the QP needs Tick: the first live
// per-packet ACK timer, or the next probe of an ASSUMED_BAD EV while the
// requester has work.
func (q *QP) Deadline() (int64, bool) {
	if q.state != verbs.QPReady {
		return 0, false
	}
	for len(q.timers) > 0 && !q.timerLive(&q.timers[0]) {
		q.timers.pop()
	}
	at, ok := int64(0), false
	if len(q.timers) > 0 {
		at, ok = q.timers[0].at, true
	}
	if q.evs.nBad > 0 && q.busy() && (!ok || q.evs.nextProbeAt < at) {
		at, ok = q.evs.nextProbeAt, true
	}
	if q.stallAt != 0 && (!ok || q.stallAt < at) {
		at, ok = q.stallAt, true
	}
	if tlp, due := q.tlpAt(); due && (!ok || tlp < at) {
		at, ok = tlp, true
	}
	return at, ok
}

// tlpAt returns when the tail-loss probe fires, if it is armed: TLPFactor
// × the smoothed RTT (the base RTT before the first sample) after the last
// data transmission or new acknowledgement, while data is in flight,
// nothing waits for retransmission, and this silence period has had no
// probe yet. It always precedes the RTO in practice (2 RTTs against an RTO
// of many); a timer due first wins (Tick runs timers first).
func (q *QP) tlpAt() (int64, bool) {
	if q.cfg.TLPFactor <= 0 || q.tlpFired || q.inflight <= 0 || q.rtxQ.len() > 0 {
		return 0, false
	}
	rtt := q.srtt
	if rtt <= 0 {
		rtt = int64(q.cc.p.BaseRTT)
	}
	return q.lastProgress + int64(q.cfg.TLPFactor*float64(rtt)), true
}

// tailLossProbe queues the last unacknowledged transmission in flight for
// retransmission (on another EV, as every retransmission), once per
// silence period. Its SACK either acknowledges it — then every earlier
// transmission still missing is lost (tlpCut) — or, if the original had
// arrived, shows what did.
func (q *QP) tailLossProbe() {
	q.tlpFired = true
	for p := psnAdd(q.sndNxt, -1); psnDiff(p, q.cack) > 0; p = psnAdd(p, -1) {
		r := &q.recs[p&q.recMask]
		if r.live && !r.acked && r.inflight {
			q.lose(p, r)
			r.timedOut = false
			q.tlpPending, q.tlpPSN = true, p
			q.ms.TailLossProbes++
			return
		}
	}
}

// Tick runs the timers due at now: packet timeouts (retransmission,
// EV → ASSUMED_BAD, retry accounting) and probes.
func (q *QP) Tick(now int64) {
	if q.state != verbs.QPReady {
		return
	}
	q.evs.clock = now
	for len(q.timers) > 0 && q.timers[0].at <= now && q.state == verbs.QPReady {
		t := q.timers.pop()
		if !q.timerLive(&t) {
			continue
		}
		q.timeout(now, t.psn, &q.recs[t.psn&q.recMask])
	}
	if q.state == verbs.QPReady && q.stallAt != 0 && now >= q.stallAt {
		q.stallTimeout(now)
	}
	if at, due := q.tlpAt(); due && q.state == verbs.QPReady && now >= at {
		q.tailLossProbe()
	}
	if q.state == verbs.QPReady && q.evs.nBad > 0 && q.busy() && now >= q.evs.nextProbeAt {
		q.probe(now)
	}
}

// timeout handles a packet's timer: its transmission was not acknowledged
// within the timeout. A packet still in flight is presumed lost on a failed
// path and queued for retransmission; one already waiting for
// retransmission (found lost earlier, or with no plane or EV to go on)
// only counts the timeout. Either way its clock is re-armed for the next
// attempt, so the retry limit fires even if it is never sent again.
func (q *QP) timeout(now int64, psn uint32, r *pktRec) {
	if r.held || r.queued && q.evs.anyPath() {
		// No transmission of it is outstanding, so this is no ACK timeout:
		// a held packet (refused for a resource) is withheld by this side —
		// its timer releases it, while the hole that holds the resource has
		// its own timer, which counts; a queued one was found lost already
		// and waits only for cwnd (htsim keeps no timer for a packet in its
		// retransmission queue). Check again one RTO later; with no path
		// left a queued packet counts, so the QP still fails when every
		// path is gone.
		q.lose(psn, r)
		q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
		return
	}
	q.stats.Timeouts++
	if q.countRetry(&r.attempts) {
		q.fail(verbs.StatusRetryExceeded, r.wr)
		return
	}
	if r.inflight {
		q.evs.markBad(r.ev, now, CauseTimeout) // silent timeout: the path is presumed failed
		q.lose(psn, r)
		r.timedOut = true
		q.ms.TimeoutRetransmits++
		q.cc.onTimeout(int64(r.plen)) // htsim: one packet off cwnd, no quick-adapt trigger
	}
	q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
}

// stallTimeout runs the QP's own retry clock (noteStall): a timeout with
// still no path counts toward the retry limit of the first waiting work
// request; a path that came back stops the clock (Send follows Tick).
func (q *QP) stallTimeout(now int64) {
	if q.evs.anyPath() || !q.busy() || psnDiff(q.sndNxt, q.cack) != 1 {
		q.stallAt, q.stallN = 0, 0
		return
	}
	q.stats.Timeouts++
	if q.countRetry(&q.stallN) {
		q.fail(verbs.StatusRetryExceeded, q.wrBase+uint64(q.wrHead))
		return
	}
	q.stallAt = now + q.timeoutFor(q.stallN)
}

// probe queues a reliability probe on every ASSUMED_BAD EV that is due.
func (q *QP) probe(now int64) {
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		if e.state != EVAssumedBad || e.nextProbe > now {
			continue
		}
		e.nextProbe = now + q.evs.probeIvl
		if !q.evs.planes[e.plane].up {
			continue
		}
		e.probeSeq++
		q.pushCtrl(ctrlEnt{kind: ctrlProbe, ev: e.ev, seq: e.probeSeq})
	}
	q.evs.recomputeProbe()
}

// PollEVChanges appends the EV state changes since the last call to dst,
// oldest first, and forgets them (at most MaxEVChanges are kept between
// calls; MRCStats.EVChangesDropped counts the rest).
func (q *QP) PollEVChanges(dst []EVChange) []EVChange {
	dst = append(dst, q.evs.changes...)
	q.evs.changes = q.evs.changes[:0]
	return dst
}

// PollCompletions appends finished completions to dst and forgets them.
func (q *QP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	dst = append(dst, q.comps...)
	q.comps = q.comps[:0]
	return dst
}

// Stats returns the QP's counters.
func (q *QP) Stats() verbs.QPStats {
	s := q.stats
	s.CwndBytes = q.cc.window()
	return s
}

// MRCStats returns MRC-specific counters and gauges.
func (q *QP) MRCStats() MRCStats {
	s := q.ms
	c, act := q.evs.counts()
	s.EVGood, s.EVSkip, s.EVAssumedBad, s.EVDenied, s.EVActive = c[EVGood], c[EVSkip], c[EVAssumedBad], c[EVDenied], act
	s.EVTransitions = q.evs.transitions
	s.EVChangesDropped = q.evs.changesDropped
	s.RTTSamples = q.stats.RTTSamples
	s.LastRTT, s.MinRTT, s.SRTT = q.stats.LastRTT, q.stats.MinRTT, q.srtt
	s.CwndBytes = q.cc.window()
	s.MaxWnd = int64(q.cc.p.MaxWnd)
	s.BaseRTT = int64(q.cc.p.BaseRTT)
	s.Quadrants = q.cc.quadrants
	return s
}

// NSCC returns the QP's current NSCC constants (base_rtt and maxwnd follow
// the measured minimum RTT).
func (q *QP) NSCC() NSCCParams { return q.cc.p }

// ---------------------------------------------------------------- control

// SetPlaneStatus marks this side's NIC port of plane down or up (the NIC
// calls it when the port's link changes). A plane carries data only while
// both this side's port and the peer's (ApplyPortStatus) are up.
func (q *QP) SetPlaneStatus(plane int, up bool) {
	if plane < 0 || plane >= len(q.evs.planes) {
		return
	}
	if up {
		q.localDown &^= 1 << uint(plane)
	} else {
		q.localDown |= 1 << uint(plane)
	}
	q.applyPlane(plane)
}

// ApplyPortStatus applies a peer's Port Status Update: bit p of mask set ⇔
// the peer's plane-p port is up.
func (q *QP) ApplyPortStatus(mask uint32) {
	q.remoteDown = ^mask
	for p := range q.evs.planes {
		q.applyPlane(p)
	}
}

// applyPlane brings plane's usability in line with both sides' port
// status. A plane that goes down carries no more data; packets in flight on
// it are retransmitted elsewhere at once, without penalising their EVs. EV
// states are kept, so the plane resumes as it was.
func (q *QP) applyPlane(plane int) {
	ps := &q.evs.planes[plane]
	up := (q.localDown|q.remoteDown)&(1<<uint(plane)) == 0
	if ps.up == up {
		return
	}
	ps.up = up
	if up || q.state != verbs.QPReady {
		return
	}
	for p := psnAdd(q.cack, 1); psnDiff(p, q.sndNxt) < 0; p = psnAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		if r.live && r.inflight && int(q.evs.evs[r.ev].plane) == plane {
			q.lose(p, r)
			r.timedOut = false
			q.ms.PlaneDownRetx++
		}
	}
}

// Remote returns the peer's QP attributes (valid after Connect).
func (q *QP) Remote() verbs.QPAttrs { return q.remote }

// PlaneUp reports whether plane carries data.
func (q *QP) PlaneUp(plane int) bool {
	return plane >= 0 && plane < len(q.evs.planes) && q.evs.planes[plane].up
}

// SetReceiverPenalty sets the rcv_cwnd_pen (0..127) this side returns in
// its SACKs: 64 halves the peer's window, 127 leaves one packet per RTT.
func (q *QP) SetReceiverPenalty(pen uint8) { q.rcvPen = min(pen, 127) }

// EVStates returns every EV of the pool with its plane, path choice and
// state, as a controller sees them (SKIP is reported as such; a controller
// following mrc_ctl.h treats it as GOOD).
func (q *QP) EVStates() []EVInfo {
	out := make([]EVInfo, len(q.evs.evs))
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		out[k] = EVInfo{EV: e.ev, Plane: int(e.plane), Choice: evChoice(e.ev), State: e.state, Active: e.active}
	}
	return out
}

// EVState returns the state of ev.
func (q *QP) EVState(ev uint32) (EVState, error) {
	i := q.evs.lookup(ev)
	if i < 0 {
		return 0, ErrUnknownEV
	}
	return q.evs.evs[i].state, nil
}

// DenyEV forbids ev (controller command): it leaves the active set and is
// not probed. now is not needed: denial has no timer.
func (q *QP) DenyEV(ev uint32) error {
	i := q.evs.lookup(ev)
	if i < 0 {
		return ErrUnknownEV
	}
	q.evs.set(i, EVDenied, q.evs.clock, CauseDeny)
	return nil
}

// AllowEV returns ev to GOOD (controller command), whatever its state.
func (q *QP) AllowEV(ev uint32) error {
	i := q.evs.lookup(ev)
	if i < 0 {
		return ErrUnknownEV
	}
	q.evs.set(i, EVGood, q.evs.clock, CauseAllow)
	return nil
}

// DenyPath denies every EV of plane whose path-choice bits equal choice
// and returns how many.
func (q *QP) DenyPath(plane, choice int) int { return q.pathCmd(plane, choice, EVDenied) }

// AllowPath returns every DENIED EV of plane and choice to GOOD.
func (q *QP) AllowPath(plane, choice int) int { return q.pathCmd(plane, choice, EVGood) }

func (q *QP) pathCmd(plane, choice int, s EVState) int {
	n := 0
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		if int(e.plane) != plane || evChoice(e.ev) != choice {
			continue
		}
		if s == EVGood && e.state != EVDenied {
			continue
		}
		c := CauseDeny
		if s == EVGood {
			c = CauseAllow
		}
		if q.evs.set(int32(k), s, q.evs.clock, c) {
			n++
		}
	}
	return n
}
