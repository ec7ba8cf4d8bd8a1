package mrc

// The requester's record of one PSN and its send state machine. sendState
// is the only notion of where a PSN stands; setState is the only writer
// of it and keeps the QP's aggregates (bytes in flight, the held count,
// the retransmission queue) in step with it.

import "fmt"

// sendState is where one PSN stands at the requester. Its transitions
// (legalSend), and what makes each:
//
//	free      → in-flight  first transmission (sendData)
//	in-flight → lost       a loss found: a NACK (TRIMMED, TRIMMED_LASTHOP,
//	                       PSN_OOR_WINDOW, or a resource NACK at cack+1),
//	                       the fast-loss rule, the tail-loss probe, an ACK
//	                       timeout, its plane going down
//	in-flight → held       a resource NACK (NO_BITMAP, NO_PKT_BUFFER,
//	                       NO_RESOURCE) above cack+1
//	held      → lost       released: the cumulative ack moved, or its timer fired
//	lost      → in-flight  retransmission (sendData takes it from rtxQ)
//	in-flight,
//	lost, held → acked     a SACK bitmap bit, or the cumulative ack
//	acked     → free       the cumulative ack passed it (ackCumulative acks
//	                       a PSN it passes first, so it goes through acked)
//
// Invariants (checkInvariants, invariants.go, asserts them after every
// input when debugInvariants is set; the tests set it):
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
//   - Every sendInFlight record's current transmission has an entry in
//     order, the send-order list detectLoss walks.
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
	from := r.state
	switch from {
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
	if debugInvariants {
		checkTransition(psn, from, to)
	}
}

// checkTransition panics on a transition legalSend does not allow (only
// under debugInvariants; kept out of setState so that stays small).
// setState calls it last, after the move: called first, it kept setState's
// arguments live across the call, and the production path paid their
// spills (12 instructions per packet, BenchmarkMRCPacket).
//
//go:noinline
func checkTransition(psn uint32, from, to sendState) {
	if !legalSend[from][to] {
		panic(fmt.Sprintf("mrc: PSN %d: illegal send transition %v → %v", psn, from, to))
	}
}
