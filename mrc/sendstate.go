package mrc

// The requester's record of one PSN and its send state machine. sendState
// is the only notion of where a PSN stands; setState is the only writer
// of it and keeps the QP's aggregates (bytes in flight, the held count,
// the retransmission queue) in step with it.

import (
	"fmt"
	"math/bits"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// sendState is where one PSN stands at the requester.
//
//	           first transmission              cumulative ack passes it
//	sendFree ───────────────────▶ sendInFlight ─┐      (from any state)
//	   ▲                      ▲        │   │    │  ack (SACK bit or cack)
//	   │              retransmit   lose│   │resource NACK
//	   │                      │        ▼   ▼    ▼
//	   └── sendAcked ◀── ack ── sendLost ◀─ sendHeld
//	                                  release (cack moves, or its timer)
//
// Invariants (checkInvariants asserts them after every input when
// debugInvariants is set; the tests set it):
//
//   - Every PSN in (cack, sndNxt) has a record, recs[psn&recMask], that is
//     not sendFree; 1 ≤ sndNxt − cack ≤ negMPR + 1 ≤ len(recs) + 1, so no
//     two PSNs in the window share a slot.
//   - inflight (bytes) is the sum of plen over the sendInFlight records.
//   - held is the number of sendHeld records.
//   - Every sendLost PSN has exactly one entry in rtxQ; every other entry
//     is stale (its PSN was acknowledged, or left the window) and Send
//     drops it when it reaches the front.
//   - Every sendInFlight, sendLost or sendHeld record has exactly one live
//     timer in the heap (psn and seq of its current transmission): its
//     clock runs until it is acknowledged, so a packet that can never be
//     sent again still reaches the retry limit.
//   - Every sendInFlight record's transmission is in order (the send-order
//     walk of detectLoss) until the walk settles it.
//   - A record that is not sendFree has been transmitted (tx ≥ 1).
//
// None of them hold once the QP is in ERROR (fail drops the queues and
// timers and leaves the records as they were).
type sendState uint8

const (
	// sendFree: no PSN uses the slot (the zero value: Connect's records
	// start free, and cack passing a PSN frees it).
	sendFree sendState = iota
	// sendInFlight: the current transmission is outstanding; its bytes
	// count in inflight and its ACK timer runs.
	sendInFlight
	// sendLost: found lost (NACK, fast-loss rule, tail-loss probe,
	// timeout, plane down) and waiting in rtxQ for cwnd and an EV; out of
	// flight, but its timer keeps running.
	sendLost
	// sendHeld: refused by the responder for lack of a resource
	// (NO_BITMAP, NO_PKT_BUFFER, NO_RESOURCE) above cack+1; out of flight
	// and not queued until the cumulative ack moves (the resource frees as
	// ePSN advances) or its timer fires.
	sendHeld
	// sendAcked: selectively acknowledged (SACK bitmap), waiting for the
	// cumulative ack to pass it.
	sendAcked
	numSendStates
)

func (s sendState) String() string {
	if s >= numSendStates {
		return fmt.Sprintf("sendState(%d)", uint8(s))
	}
	return [...]string{"free", "in-flight", "lost", "held", "acked"}[s]
}

// outstanding reports whether a PSN in state s is unacknowledged and sent:
// its ACK timer counts.
func (s sendState) outstanding() bool {
	return s == sendInFlight || s == sendLost || s == sendHeld
}

// legalSend[from][to] are the transitions of the diagram above.
var legalSend = [numSendStates][numSendStates]bool{
	sendFree:     {sendInFlight: true},
	sendInFlight: {sendLost: true, sendHeld: true, sendAcked: true},
	sendLost:     {sendInFlight: true, sendAcked: true},
	sendHeld:     {sendLost: true, sendAcked: true},
	sendAcked:    {sendFree: true},
}

// pktRec is the requester's record of one PSN in [cack+1, sndNxt).
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
	state    sendState
	// timedOut: the latest loss was an ACK timeout, so the retransmission
	// goes on another plane if one qualifies. Read only in sendLost.
	timedOut bool
}

// setState moves psn's record r to state to and keeps the aggregates in
// step: leaving sendInFlight takes its bytes out of inflight, leaving
// sendHeld out of held; entering sendLost queues psn in rtxQ.
func (q *QP) setState(psn uint32, r *pktRec, to sendState) {
	if debugInvariants && !legalSend[r.state][to] {
		panic(fmt.Sprintf("mrc: PSN %d: illegal send transition %v → %v", psn, r.state, to))
	}
	switch r.state {
	case sendInFlight:
		q.inflight -= int64(r.plen)
	case sendHeld:
		q.held--
	}
	r.state = to
	switch to {
	case sendInFlight:
		q.inflight += int64(r.plen)
	case sendLost:
		q.rtxQ.Push(psn)
	case sendHeld:
		q.held++
	}
}

// debugInvariants makes every input check the QP's invariants
// (checkInvariants) and panic on the first that fails. The mrc tests set
// it (TestMain); in production it is false and costs one predictable
// branch per input.
var debugInvariants = false

// assertInvariants panics if an invariant fails; callers test
// debugInvariants first.
func (q *QP) assertInvariants() {
	if err := q.checkInvariants(); err != nil {
		panic(err)
	}
}

// checkInvariants checks the invariants of sendState, the EV pool's
// (evPool.checkInvariants) and the responder's window. It allocates
// nothing unless one fails, so it can run under the allocation tests.
func (q *QP) checkInvariants() error {
	if q.state != verbs.QPReady {
		return nil
	}
	d := ib.PSNDiff(q.sndNxt, q.cack)
	if d < 1 || d > q.negMPR+1 || q.negMPR > len(q.recs) {
		return fmt.Errorf("mrc invariant: sndNxt %d − cack %d = %d outside [1, MPR %d + 1] (%d records)",
			q.sndNxt, q.cack, d, q.negMPR, len(q.recs))
	}
	var inflight int64
	var held, lost, out int
	for p := ib.PSNAdd(q.cack, 1); p != q.sndNxt; p = ib.PSNAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		switch r.state {
		case sendFree:
			return fmt.Errorf("mrc invariant: PSN %d in (cack %d, sndNxt %d) has no record", p, q.cack, q.sndNxt)
		case sendInFlight:
			inflight += int64(r.plen)
		case sendLost:
			lost++
		case sendHeld:
			held++
		}
		if r.state.outstanding() {
			out++
		}
		if r.tx == 0 {
			return fmt.Errorf("mrc invariant: PSN %d is %v but was never sent", p, r.state)
		}
	}
	if inflight != q.inflight {
		return fmt.Errorf("mrc invariant: inflight %d bytes, records in flight hold %d", q.inflight, inflight)
	}
	if held != q.held {
		return fmt.Errorf("mrc invariant: held %d, %d records held", q.held, held)
	}
	queued := 0
	for i := 0; i < q.rtxQ.Len(); i++ {
		if p := *q.rtxQ.At(i); q.inFlightRange(p) && q.recs[p&q.recMask].state == sendLost {
			queued++
		}
	}
	if queued != lost {
		return fmt.Errorf("mrc invariant: %d lost records, %d live rtxQ entries", lost, queued)
	}
	timers := 0
	for k := range q.timers {
		if q.timerLive(&q.timers[k]) {
			timers++
		}
	}
	if timers != out {
		return fmt.Errorf("mrc invariant: %d outstanding records, %d live timers", out, timers)
	}
	inOrder, inFlightRecs := 0, 0
	for i := 0; i < q.order.Len(); i++ {
		f := q.order.At(i)
		if r := &q.recs[f.psn&q.recMask]; q.inFlightRange(f.psn) && r.state == sendInFlight && r.seq == f.seq {
			inOrder++
		}
	}
	for p := ib.PSNAdd(q.cack, 1); p != q.sndNxt; p = ib.PSNAdd(p, 1) {
		if q.recs[p&q.recMask].state == sendInFlight {
			inFlightRecs++
		}
	}
	if inOrder != inFlightRecs {
		return fmt.Errorf("mrc invariant: %d records in flight, %d in the send order", inFlightRecs, inOrder)
	}
	if err := q.checkResponder(); err != nil {
		return err
	}
	return q.evs.checkInvariants()
}

// checkResponder checks the responder's window: rcvAbove is the number of
// PSNs received above ePSN (bits set in the bitmap), ePSN itself is never
// received (advance moves past it), and immHeld counts the WriteImm last
// packets among them.
func (q *QP) checkResponder() error {
	n, imm := 0, 0
	for i, w := range q.rcvBitmap {
		n += bits.OnesCount64(w)
		for ; w != 0; w &= w - 1 {
			if q.rcvFlags[i<<6+bits.TrailingZeros64(w)]&rcvHasImm != 0 {
				imm++
			}
		}
	}
	if n != q.rcvAbove || q.rcvGot(q.ePSN) {
		return fmt.Errorf("mrc invariant: %d PSNs received above ePSN %d, rcount %d (ePSN received: %v)", n, q.ePSN, q.rcvAbove, q.rcvGot(q.ePSN))
	}
	if imm != q.rsp.immHeld {
		return fmt.Errorf("mrc invariant: %d immediates held, immHeld %d", imm, q.rsp.immHeld)
	}
	return nil
}
