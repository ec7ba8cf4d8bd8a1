package mrc

// The QP: its type, construction, Connect, and the verbs.Transport entry
// points (Post, Send, Receive, PollCompletions), which dispatch to the
// requester (requester.go, ack.go, loss.go, timers.go), the responder
// (responder.go) and the control queue (ctrlq.go).

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/internal/ring"
	"github.com/vcluster/vcluster/internal/rng"
	"github.com/vcluster/vcluster/verbs"
)

var _ verbs.Transport = (*QP)(nil)

// Connect errors.
var (
	ErrConnected = errors.New("mrc: QP already connected")
	ErrAttrs     = errors.New("mrc: invalid QP attributes (QPN/PSN beyond 24 bits, MaxPSNRange beyond 255 or negative MaxWImm)")
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
	stats                 stats // every counter, once (stats.go)
	comps                 []verbs.Completion
	rto                   int64 // base ACK timeout (Config.rto: 1.024 µs × 2^Timeout, or Config.RTO)
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
	maxWImm  int                // WriteImms allowed in flight (the peer's MaxWImm)
	wrs      []wrState          // posted WRs not yet completed, in post order
	wrHead   int                // first WR not completed
	wrCur    int                // first WR not fully segmented
	wrBase   uint64             // sequence number of wrs[0]
	msn      uint16             // next message sequence number (METH MSN)
	rqmsn    uint16             // next WriteImm sequence number (METH RQMSN: the responder's receive queue)
	wimm     int                // WriteImms started and not completed
	sndNxt   uint32             // the next new PSN
	cack     uint32             // cumulative ack (the spec's cack, SETH's CACK PSN): every PSN up to it is acknowledged
	recs     []pktRec           // per-PSN send records, indexed by psn & recMask (sendstate.go)
	recMask  uint32             // len(recs) − 1: len(recs) is a power of two ≥ the negotiated MPR
	inflight int64              // bytes of sendInFlight records
	rtxQ     ring.Ring[uint32]  // PSNs in sendLost, in loss order (and stale entries)
	order    ring.Ring[sendRec] // transmissions in send order, for detectLoss
	timers   timerHeap          // per-transmission ACK timers (lazy deletion)
	txSeq    uint64             // send sequence of the latest transmission
	hiAcked  uint64             // highest send sequence of an acknowledged first transmission
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
	rcvWin int    // the receive window in PSNs: the offered MPR × 128
	ePSN   uint32 // expected PSN: every PSN below it has been received
	// The receive bitmap and per-PSN records, indexed by psn & rcvMask
	// (a power of two ≥ rcvWin): a bit per PSN received above ePSN, its
	// flags (rcvLast, rcvHasImm, rcvAckReq), and for a WriteImm's last
	// packet its immediate and message length, kept until ePSN passes it.
	rcvBitmap []uint64
	rcvMask   uint32
	rcvFlags  []uint8
	rcvImm    []uint32
	rcvLen    []uint32
	rcvAbove  int                // PSNs received above ePSN (the SACK's out-of-order count)
	sackBytes int                // wire bytes received since the last SACK (SackThresholdBytes)
	rcvdBytes uint64             // wire bytes received, as CC_STATE's received-bytes count
	rcvMSN    uint32             // messages completed in order (the AETH's MSN, 24 bits)
	rcvPen    uint8              // rcv_cwnd_pen this side returns in its SACKs
	ctrl      ring.Ring[ctrlEnt] // control packets waiting for Send (ctrlq.go)
	rsp       responderState     // resource bounds and EV judgement (responder.go)
}

// New returns a QP in the RESET state. cfg must be valid (Validate); New
// panics otherwise, as it is a programming error. mem is the host's
// registered memory, used both as the source of Writes and as their target
// at the responder. All randomness comes from seed.
func New(cfg Config, mem *verbs.Memory, qpn uint32, seed uint64) *QP {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	q := &QP{cfg: cfg, mem: mem, qpn: qpn & ib.PSNMask, rto: cfg.rto()}
	q.rng = rng.NewPCG(seed, uint64(qpn)^0x6d7263)
	q.evs.init(&q.cfg, q.rng)
	q.cc.init(ResolveNSCC(&q.cfg), cfg.DisableCC)
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
		if a.QPN > ib.PSNMask || a.InitialPSN > ib.PSNMask || a.MaxPSNRange < 0 || a.MaxPSNRange > 255 || a.MaxWImm < 0 {
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
	q.cack = ib.PSNAdd(local.InitialPSN, -1)

	q.rcvWin = rw * 128
	n = 128
	for n < q.rcvWin {
		n <<= 1
	}
	q.rcvBitmap = make([]uint64, n/64)
	q.rcvFlags = make([]uint8, n)
	q.rcvImm = make([]uint32, n)
	q.rcvLen = make([]uint32, n)
	q.rcvMask = uint32(n - 1)
	q.ePSN = remote.InitialPSN
	q.state = verbs.QPReady
	return nil
}

// Post validates and queues a work request.
func (q *QP) Post(now int64, wr verbs.WorkRequest) error {
	mr, err := verbs.CheckPost(q.state, wr, q.mem)
	if err != nil {
		return err
	}
	q.wrs = append(q.wrs, wrState{wr: wr, virt: mr.Virtual()})
	q.stats.BytesPosted += wr.Length
	if debugInvariants {
		q.assertInvariants()
	}
	return nil
}

func (q *QP) wrAt(seq uint64) *wrState { return &q.wrs[seq-q.wrBase] }

func (q *QP) busy() bool { return q.wrHead < len(q.wrs) }

// Send produces the next packet: queued control packets first (on any
// plane), then retransmissions, then new data (on a plane in freePlanes).
func (q *QP) Send(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	if q.state != verbs.QPReady {
		return verbs.Tx{}, false
	}
	q.evs.clock = now
	if debugInvariants {
		return q.sendChecked(now, freePlanes, buf)
	}
	if q.ctrl.Len() > 0 {
		return q.sendCtrl(now, buf)
	}
	return q.sendData(now, freePlanes, buf)
}

// sendChecked is Send's dispatch followed by the invariant check. It is
// apart so that the production path hands the Tx straight back from
// sendCtrl or sendData: holding it in a local across the check costs a
// copy of the Tx per packet (27 instructions, BenchmarkMRCPacket).
func (q *QP) sendChecked(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	var tx verbs.Tx
	var ok bool
	if q.ctrl.Len() > 0 {
		tx, ok = q.sendCtrl(now, buf)
	} else {
		tx, ok = q.sendData(now, freePlanes, buf)
	}
	q.assertInvariants()
	return tx, ok
}

func (q *QP) cwnd() int64 { return q.cc.window() }

// Receive consumes one packet addressed to this QP.
func (q *QP) Receive(now int64, rx *verbs.Rx) {
	if q.state != verbs.QPReady {
		return
	}
	q.evs.clock = now
	b := rx.Data
	if len(b) < BTHLen {
		q.stats.Malformed++
		return
	}
	if dq, _ := verbs.DestQP(b); dq != q.qpn {
		q.stats.Malformed++
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
		q.stats.Malformed++
	}
	if debugInvariants {
		q.assertInvariants()
	}
}

// inFlightRange reports whether psn is in (cack, sndNxt).
func (q *QP) inFlightRange(psn uint32) bool {
	return ib.PSNDiff(psn, q.cack) > 0 && ib.PSNDiff(psn, q.sndNxt) < 0
}

// PollCompletions appends finished completions to dst and forgets them.
func (q *QP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	dst = append(dst, q.comps...)
	q.comps = q.comps[:0]
	return dst
}

// Remote returns the peer's QP attributes (valid after Connect).
func (q *QP) Remote() verbs.QPAttrs { return q.remote }
