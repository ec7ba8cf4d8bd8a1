package roce

// congestion is a reaction point: it owns the sending rate and the state
// that moves it. The QP tells it what happened (a packet sent, a CNP, an
// RTT sample) and asks it for the rate; it knows nothing of sequence
// numbers, WRs or the wire, and must not schedule anything: timers it
// needs run lazily, on the next input (see dcqcn).
//
// One implementation per file: cc_dcqcn.go, cc_timely.go, cc_none.go.
type congestion interface {
	// rate returns the sending rate in bits per second at now, after
	// running any timer events due by then. Send calls it once per packet
	// that has a predecessor to pace from.
	rate(now int64) float64
	// rateBps returns the rate as last computed, running nothing (Stats).
	rateBps() int64
	// onSent counts a data packet of wireLen bytes (UDP payload) just sent.
	onSent(wireLen int)
	// onCNP handles a congestion notification arriving at now.
	onCNP(now int64)
	// onRTT feeds an RTT sample from an ACK covering sequences below
	// ackSeq; sndMax is one past the highest sequence sent.
	onRTT(rtt int64, ackSeq, sndMax uint64)
}

// newCongestion returns the reaction point cfg.CC names. It keeps
// pointers into cfg, which must outlive it (it is the QP's own copy).
func newCongestion(cfg *Config) congestion {
	switch cfg.CC {
	case CCDCQCN:
		d := newDCQCN(&cfg.DCQCN, cfg.LineRateBps)
		return &d
	case CCTimely:
		t := newTimely(&cfg.Timely, cfg.LineRateBps)
		return &t
	}
	return newLineRate(cfg.LineRateBps)
}
