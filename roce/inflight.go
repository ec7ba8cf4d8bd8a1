package roce

import "github.com/vcluster/vcluster/internal/ring"

// pktState is what the requester knows of one outstanding packet. The
// states are the product of two facts: whether it was retransmitted
// (then its ACK gives no RTT sample: Karn's rule) and whether the
// responder SACKed it (IRN only; then it is never sent again).
//
//	          resend               sack
//	pkSent ---------> pkResent ---------> pkSackedResent
//	   |                                   ^
//	   | sack                              | resend (never happens: a
//	   v                                   | SACKed packet is not resent)
//	pkSacked ------------------------------+
//
// Go-back-N uses pkSent and pkResent only.
type pktState uint8

const (
	pkSent         pktState = iota // sent once, not known to have arrived
	pkResent                       // retransmitted at least once
	pkSacked                       // IRN: SACKed, sent once
	pkSackedResent                 // IRN: SACKed, retransmitted before that
)

// pktEvent is an input to pktState.next.
type pktEvent uint8

const (
	evResend pktEvent = iota // the packet was retransmitted
	evSack                   // an IRN NACK SACKed it
)

// next is pktState's one transition function.
func (s pktState) next(e pktEvent) pktState {
	switch e {
	case evResend:
		switch s {
		case pkSent:
			return pkResent
		case pkSacked:
			return pkSackedResent
		}
	case evSack:
		switch s {
		case pkSent:
			return pkSacked
		case pkResent:
			return pkSackedResent
		}
	}
	return s
}

// sacked reports whether the responder holds the packet (IRN).
func (s pktState) sacked() bool { return s >= pkSacked }

// resent reports whether the packet was retransmitted (no RTT sample).
func (s pktState) resent() bool { return s == pkResent || s == pkSackedResent }

// pktInfo is the requester's record of one outstanding packet.
type pktInfo struct {
	sent  int64 // first transmission time (the RTT sample's start)
	state pktState
}

// inflight is the requester's per-packet state of the sequences
// [sndUna, sndMax), oldest first: a packet is pushed when first sent and
// popped when cumulatively acknowledged.
type inflight struct{ ring.Ring[pktInfo] }

// at returns the record of seq, which lies in [una, una+Len()).
func (f *inflight) at(una, seq uint64) *pktInfo { return f.At(int(seq - una)) }

// drop pops the records of the n oldest packets.
func (f *inflight) drop(n uint64) {
	for ; n > 0; n-- {
		f.Pop()
	}
}
