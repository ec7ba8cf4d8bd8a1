package roce

// reliability is what go-back-N (gbn.go) and IRN (irn.go) do differently,
// at both ends of a connection. The QP owns the shared state (sndUna,
// sndMax, the WRs, the per-packet records, ePSN, the ACK coalescing) and
// calls these at fixed points; an implementation owns only its mode's own
// state and must not send anything itself (it queues control packets via
// the QP).
type reliability interface {
	// next picks the sequence of the next data packet (retx: it was sent
	// before) and the index in the QP's wrQueue of the WR holding it, or
	// reports none ready. It commits nothing but harmless skips and
	// cursor moves: the packet may not go (pacing), and the QP asks again.
	next() (seq uint64, wr int, retx, ok bool)
	// sent records that seq went out (resend: not for the first time),
	// after the QP updated sndMax and the packet's record.
	sent(seq uint64, resend bool)
	// acked is told the new sndUna, before the WRs it completes are
	// popped.
	acked(seq uint64)
	// timedOut is the retransmission timer expiring with data outstanding
	// and a retry left (counted already).
	timedOut()
	// rto returns the retransmission timeout for what is in flight now.
	rto() int64
	// seqNAK handles a NAK-sequence-error for expected sequence seq, after
	// the QP acknowledged below it (progress: that moved sndUna); sack is
	// the AETH MSN field (IRN: the SACKed PSN). It reports false when the
	// QP failed (retries exhausted) and must do nothing more.
	seqNAK(seq uint64, sack uint32, progress bool) bool
	// errorNAK handles an error NAK for seq, just before the QP fails.
	errorNAK(seq uint64)

	// receive handles a data packet d ≥ 0 sequences past ePSN.
	receive(now int64, p *Packet, d uint64)
	// holding reports whether the responder holds out-of-order packets (a
	// duplicate is then acknowledged at once).
	holding() bool
}
