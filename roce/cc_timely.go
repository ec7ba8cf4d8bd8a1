package roce

// timely is TIMELY's rate computation from the RTT gradient (Mittal et al.,
// SIGCOMM 2015, Algorithm 1; HPCC ns-3 UpdateRateTimely with HPCCStages).
// It owns the rate; its only input is onRTT, which the requester feeds
// from ACKs (Karn: never for a retransmitted packet).
type timely struct {
	c        *TimelyConfig
	line     float64 // the port's rate: the ceiling
	cur      float64 // the current rate: what Send paces at
	prevRTT  int64   // the previous sample, for the RTT difference
	rttDiff  float64 // EWMA of RTT differences (the paper's rtt_diff)
	haveRTT  bool    // prevRTT is a sample
	negCount int     // paper: non-positive gradients in a row; HPCCStages: increases in a row
	nextSeq  uint64  // update when an ACK covers this sequence (once per RTT)
}

func newTimely(c *TimelyConfig, line int64) timely {
	return timely{c: c, line: float64(line), cur: float64(line)}
}

func (t *timely) rate(int64) float64 { return t.cur }
func (t *timely) rateBps() int64     { return int64(t.cur) }
func (t *timely) onSent(int)         {}
func (t *timely) onCNP(int64)        {}

// onRTT feeds an RTT sample taken from an ACK covering sequence ackSeq
// (exclusive); sndMax is the next new sequence, which marks the next
// update (one per RTT).
func (t *timely) onRTT(rtt int64, ackSeq, sndMax uint64) {
	if ackSeq < t.nextSeq {
		return
	}
	t.nextSeq = sndMax + 1
	if !t.haveRTT {
		t.haveRTT, t.prevRTT = true, rtt
		return
	}
	c := t.c
	newDiff := float64(rtt - t.prevRTT)
	t.prevRTT = rtt
	t.rttDiff = (1-c.EWMAAlpha)*t.rttDiff + c.EWMAAlpha*newDiff
	grad := t.rttDiff / float64(c.MinRTTNs)
	if c.HPCCStages {
		t.hpccUpdate(rtt, grad)
		return
	}
	switch {
	case rtt < c.TLowNs:
		t.cur += float64(c.DeltaBps)
	case rtt > c.THighNs:
		t.cur *= 1 - c.Beta*(1-float64(c.THighNs)/float64(rtt))
	case grad <= 0:
		t.negCount++
		n := 1
		if t.negCount >= c.HAIThreshold {
			n = c.HAIFactor
		}
		t.cur += float64(n) * float64(c.DeltaBps)
	default:
		t.negCount = 0
		t.cur *= 1 - c.Beta*grad
	}
	t.cur = min(t.line, max(float64(c.MinRateBps), t.cur))
}

// hpccUpdate is HPCC ns-3's UpdateRateTimely: one stage count over every
// increase (below T_low too), reset by any decrease; HAI from the
// (HAIThreshold+1)-th increase in a row.
func (t *timely) hpccUpdate(rtt int64, grad float64) {
	c := t.c
	inc, cut := true, 1.0
	switch {
	case rtt < c.TLowNs:
	case rtt > c.THighNs:
		inc, cut = false, 1-c.Beta*(1-float64(c.THighNs)/float64(rtt))
	case grad <= 0:
	default:
		inc, cut = false, max(1-c.Beta*grad, 0)
	}
	if !inc {
		t.cur = max(float64(c.MinRateBps), t.cur*cut)
		t.negCount = 0
		return
	}
	n := 1
	if t.negCount >= c.HAIThreshold {
		n = c.HAIFactor
	}
	t.cur = min(t.line, t.cur+float64(n)*float64(c.DeltaBps))
	t.negCount++
}
