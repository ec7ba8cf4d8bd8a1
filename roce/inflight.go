package roce

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

// inflight is the requester's per-packet state of the outstanding
// sequences [sndUna, sndMax), a window indexed by sequence (a slot is seq
// mod its power-of-two size). It is a FIFO, but not an internal/ring one:
// a cumulative ACK retires many records at once and must cost nothing per
// packet (ring pops, and zeroes, one at a time), and a record stays
// readable until its slot is reused (the RTT sample of the packet an ACK
// covers last).
type inflight struct{ buf []pktInfo }

// at returns the record of seq.
func (f *inflight) at(seq uint64) *pktInfo { return &f.buf[seq&uint64(len(f.buf)-1)] }

// full reports whether the window cannot take seq with una..seq−1
// outstanding.
func (f *inflight) full(una, seq uint64) bool { return seq-una >= uint64(len(f.buf)) }

// grow doubles the window (to 1024 at first), keeping una..seq−1.
func (f *inflight) grow(una, seq uint64) {
	nb := make([]pktInfo, max(1024, 2*len(f.buf)))
	for s := una; s < seq; s++ {
		nb[s&uint64(len(nb)-1)] = *f.at(s)
	}
	f.buf = nb
}
