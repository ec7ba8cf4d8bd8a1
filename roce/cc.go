package roce

import "math"

// dcqcn is a DCQCN reaction point. Its timers are evaluated lazily: every
// input (a CNP, a send, a rate query) first runs the timer events due up
// to now in time order, so an idle QP needs no wake-ups and the result is
// the same as with eagerly fired timers.
type dcqcn struct {
	c    *DCQCNConfig
	line float64
	rc   float64 // current rate
	rt   float64 // target rate

	alpha     float64
	everCNP   bool
	alphaNext int64 // next α timer event
	alphaFlag bool  // timer model: a CNP arrived since the last α update

	decNext int64 // timer model: next decrease check
	decFlag bool  // timer model: a CNP arrived since the last check

	incArmed bool
	incNext  int64
	tStage   int // timer events since the last cut
	bStage   int // byte-counter events since the last cut
	bytes    int64
}

func newDCQCN(c *DCQCNConfig, line int64) dcqcn {
	return dcqcn{c: c, line: float64(line), rc: float64(line), rt: float64(line), alpha: c.InitialAlpha}
}

// rate returns the current rate after running the events due by now.
func (d *dcqcn) rate(now int64) float64 {
	d.advance(now)
	return d.rc
}

// advance runs the timer events due at or before now.
func (d *dcqcn) advance(now int64) {
	if !d.everCNP {
		return
	}
	for {
		// Earliest due event. Ties run as ns-3 runs same-time events, in
		// the order they were scheduled: α first (the decrease reads α);
		// the increase timer before the decrease check when it was
		// scheduled earlier — HPCC's 300 µs timer, restarted by a cut,
		// always lands on a 4 µs check, and its step runs first.
		t, kind := int64(math.MaxInt64), 0
		if d.c.AlphaPeriodic && d.alphaFlag && d.alphaNext <= now {
			t, kind = d.alphaNext, 1
		}
		if d.c.AlphaPeriodic && d.decFlag && d.decNext <= now && d.decNext < t {
			t, kind = d.decNext, 2
		}
		if d.incArmed && d.incNext <= now && (d.incNext < t || d.incNext == t && kind == 2 &&
			d.incNext-d.c.IncreaseTimerNs < d.decNext-d.c.DecreaseIntervalNs) {
			t, kind = d.incNext, 3
		}
		switch kind {
		case 0:
			d.decayAlpha(now)
			return
		case 1:
			d.decayAlpha(t - 1)
			d.alpha = (1-d.c.G)*d.alpha + d.c.G
			d.alphaFlag = false
			d.alphaNext += d.c.AlphaIntervalNs
		case 2:
			d.decayAlpha(t)
			d.cut()
			d.decFlag = false
			d.decNext += d.c.DecreaseIntervalNs
			d.incArmed, d.incNext = true, t+d.c.IncreaseTimerNs
		case 3:
			d.decayAlpha(t)
			d.increase(false)
			d.incNext += d.c.IncreaseTimerNs
		}
	}
}

// decayAlpha applies the α timer events without a CNP due by t:
// α = (1−g)α each.
func (d *dcqcn) decayAlpha(t int64) {
	if d.alphaNext > t || (d.c.AlphaPeriodic && d.alphaFlag) {
		return
	}
	n := (t-d.alphaNext)/d.c.AlphaIntervalNs + 1
	d.alpha *= math.Pow(1-d.c.G, float64(n))
	d.alphaNext += n * d.c.AlphaIntervalNs
}

// cut is the multiplicative decrease.
func (d *dcqcn) cut() {
	if d.c.ClampTargetRate || d.tStage > 0 || d.bStage > 0 {
		d.rt = d.rc
	}
	d.rc = max(float64(d.c.MinRateBps), d.rc*(1-d.alpha/2))
	d.tStage, d.bStage, d.bytes = 0, 0, 0
}

// increase runs one rate-increase event (timer or byte counter).
func (d *dcqcn) increase(byteEvent bool) {
	t, b := d.tStage, d.bStage
	if d.c.ByteCounter == 0 {
		b = t
	}
	switch {
	case max(t, b) < d.c.F: // fast recovery
	case min(t, b) > d.c.F: // hyper increase
		d.rt = min(d.line, d.rt+float64(d.c.RHAIBps))
	default: // additive increase
		d.rt = min(d.line, d.rt+float64(d.c.RAIBps))
	}
	d.rc = (d.rc + d.rt) / 2
	if byteEvent {
		d.bStage++
	} else {
		d.tStage++
	}
	if d.rt >= d.line && d.line-d.rc < 1 { // fully recovered: stop increasing
		d.rc, d.rt = d.line, d.line
		d.incArmed = false
	}
}

// onCNP handles a CNP arriving at now.
func (d *dcqcn) onCNP(now int64) {
	d.advance(now)
	c := d.c
	if !c.AlphaPeriodic {
		// Paper: cut at once, then α = (1−g)α + g; restart the α timer,
		// the increase timer and the byte counter.
		if !d.everCNP {
			d.everCNP = true
			d.alpha = c.InitialAlpha
		}
		d.cut()
		d.alpha = (1-c.G)*d.alpha + c.G
		d.alphaNext = now + c.AlphaIntervalNs
		d.incArmed, d.incNext = true, now+c.IncreaseTimerNs
		return
	}
	// Timer model (HPCC ns-3 cnp_received_mlx).
	if !d.everCNP {
		d.everCNP = true
		d.alpha = c.InitialAlpha
		d.alphaFlag = false
		d.alphaNext = now + c.AlphaIntervalNs
		d.decNext = now + c.DecreaseIntervalNs + 1 // after the α update
		d.rc *= c.RateOnFirstCNP
		d.rt = d.rc
		d.rc = max(d.rc, float64(c.MinRateBps))
		d.decFlag = true
		return
	}
	d.alphaFlag = true
	if !d.decFlag {
		// Checks without a CNP are no-ops: skip to the first one after now.
		if d.decNext <= now {
			d.decNext += ((now-d.decNext)/c.DecreaseIntervalNs + 1) * c.DecreaseIntervalNs
		}
		d.decFlag = true
	}
	if d.alphaNext <= now { // (cannot happen after advance; kept for safety)
		d.alphaNext += ((now-d.alphaNext)/c.AlphaIntervalNs + 1) * c.AlphaIntervalNs
	}
}

// onSent counts bytes for the byte counter (paper model).
func (d *dcqcn) onSent(n int) {
	if d.c.ByteCounter == 0 || !d.incArmed {
		return
	}
	d.bytes += int64(n)
	for d.bytes >= d.c.ByteCounter && d.incArmed {
		d.bytes -= d.c.ByteCounter
		d.increase(true)
	}
}

// timely is TIMELY's rate computation (RTT gradient).
type timely struct {
	c        *TimelyConfig
	line     float64
	rate     float64
	prevRTT  int64
	rttDiff  float64
	haveRTT  bool
	negCount int    // paper: non-positive gradients in a row; HPCCStages: increases in a row
	nextSeq  uint64 // update when an ACK covers this sequence (once per RTT)
}

func newTimely(c *TimelyConfig, line int64) timely {
	return timely{c: c, line: float64(line), rate: float64(line)}
}

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
		t.rate += float64(c.DeltaBps)
	case rtt > c.THighNs:
		t.rate *= 1 - c.Beta*(1-float64(c.THighNs)/float64(rtt))
	case grad <= 0:
		t.negCount++
		n := 1
		if t.negCount >= c.HAIThreshold {
			n = c.HAIFactor
		}
		t.rate += float64(n) * float64(c.DeltaBps)
	default:
		t.negCount = 0
		t.rate *= 1 - c.Beta*grad
	}
	t.rate = min(t.line, max(float64(c.MinRateBps), t.rate))
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
		t.rate = max(float64(c.MinRateBps), t.rate*cut)
		t.negCount = 0
		return
	}
	n := 1
	if t.negCount >= c.HAIThreshold {
		n = c.HAIFactor
	}
	t.rate = min(t.line, t.rate+float64(n)*float64(c.DeltaBps))
	t.negCount++
}
