package mprdma

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/internal/rng"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

var _ verbs.Transport = (*QP)(nil)

// Connect errors.
var (
	ErrState = verbs.ErrConnectState
	ErrQPN   = verbs.ErrConnectQPN
)

// QP is one multipath RC queue pair: a requester (requester.go, cc.go,
// timers.go) and a responder (responder.go) that meet only at the wire.
// Receive hands data packets to the responder and acknowledgements to the
// requester; Send drains the responder's control packets before any data.
// It reads no clock and starts no goroutine: every input carries now.
type QP struct {
	cfg   Config // Derived
	mem   *verbs.Memory
	qpn   uint32
	state verbs.QPState
	local verbs.QPAttrs
	peer  verbs.QPAttrs
	// ev is the QP's one entropy value with plane bits 0..3 clear: a
	// packet on path i carries ev | plane(i).
	ev    uint32
	stats verbs.QPStats
	mp    Stats
	cqe   []verbs.Completion

	req  requester
	resp responder

	rx roce.Packet // Receive's decoded packet (kept: no allocation)
}

// New returns a QP in RESET running cfg's Derived configuration. cfg must
// Validate (New panics otherwise, like roce.New: a configuration error is
// caught by Validate before anything runs). mem is the host's registered
// memory, qpn the local 24-bit QP number, seed feeds the entropy value
// and the path draws.
func New(cfg Config, mem *verbs.Memory, qpn uint32, seed uint64) *QP {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	q := &QP{cfg: cfg.Derived(), mem: mem, qpn: qpn & ib.PSNMask}
	r := rng.NewFast(seed ^ uint64(qpn)*0x9e3779b97f4a7c15)
	sp := q.cfg.SrcPort
	if sp == 0 {
		sp = uint16(49152 + r.Uint64()%16384)
	}
	fl := q.cfg.FlowLabel
	if fl == 0 {
		fl = uint16(r.Uint64()%0xffff) + 1
	}
	q.ev = roce.EV(sp, 0, fl)
	q.cqe = make([]verbs.Completion, 0, 16)
	q.req.init(q, rng.NewFast(r.Uint64()))
	q.resp.init(&q.cfg, mem, &q.mp)
	return q
}

// Config returns the Derived configuration in use.
func (q *QP) Config() Config { return q.cfg }

// EV returns the QP's entropy value on plane 0 (a path's packets carry its
// plane in bits 0..3).
func (q *QP) EV() uint32 { return q.ev }

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
	q.resp.connect(local, remote)
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
	q.req.post(wr)
	q.stats.BytesPosted += wr.Length
	return nil
}

// Send implements verbs.Transport: the responder's control packets first
// (any plane), then the requester's data.
func (q *QP) Send(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state == verbs.QPReset {
		return verbs.Tx{}, false
	}
	if tx, ok := q.resp.nextControl(now, buf); ok {
		return tx, true
	}
	if q.state != verbs.QPReady {
		return verbs.Tx{}, false
	}
	return q.req.send(now, freePlanes, buf)
}

// Receive implements verbs.Transport: data to the responder, ACKs, NAKs and
// FNACKs to the requester. Malformed packets are dropped.
func (q *QP) Receive(now int64, rx *verbs.Rx) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady || len(rx.Data) < verbs.BTHLen {
		return
	}
	p := &q.rx
	if p.Decode(rx.Data, rx.WireLen, true) != nil {
		return
	}
	switch {
	case roce.IsWrite(p.Opcode):
		q.resp.receive(now, rx, p)
		if q.resp.err() != nil {
			// The error NAK is queued; the QP stops (like roce's
			// responder): its own WRs are flushed.
			q.enterError()
		}
	case p.Opcode == roce.OpAck:
		q.req.receive(now, rx, p, orderre.IsFNACK(rx.Data))
	}
}

// Deadline implements verbs.Transport: the earlier of the requester's
// retransmission timer and the responder's repair clocks.
func (q *QP) Deadline() (int64, bool) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady {
		return 0, false
	}
	t, ok := q.req.deadline()
	if rt, rok := q.resp.deadline(); rok && (!ok || rt < t) {
		t, ok = rt, true
	}
	return t, ok
}

// Tick implements verbs.Transport.
func (q *QP) Tick(now int64) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady {
		return
	}
	q.resp.tick(now)
	q.req.tick(now)
}

// PollCompletions implements verbs.Transport: the requester's send
// completions, then the responder's WriteImm receive completions.
func (q *QP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	if debugInvariants {
		q.checkInvariants()
	}
	dst = append(dst, q.cqe...)
	clear(q.cqe)
	q.cqe = q.cqe[:0]
	return q.resp.pollCompletions(dst)
}

// Stats implements verbs.Transport: the requester's counters and the
// responder's.
func (q *QP) Stats() verbs.QPStats {
	s := q.stats
	q.resp.fill(&s)
	s.CwndBytes = int64(q.req.win.cwnd * float64(q.cfg.PMTU))
	return s
}

// MPStats returns the multipath and loss-recovery counters of both halves.
func (q *QP) MPStats() Stats {
	s := q.mp
	s.CwndPackets = q.req.win.cwnd
	return s
}

// PollRepairs appends the responder's Repair records since the last call
// to dst and forgets them.
func (q *QP) PollRepairs(dst []Repair) []Repair { return q.resp.pollRepairs(dst) }

// enterError moves the QP to ERROR: every WR still queued completes
// FLUSHED; only queued control packets go out any more.
func (q *QP) enterError() {
	if q.state == verbs.QPError {
		return
	}
	q.req.flush(verbs.StatusFlushed, 0, false)
	q.state = verbs.QPError
}
