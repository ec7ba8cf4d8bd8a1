package roce

import "math"

// dcqcn is a DCQCN reaction point (Zhu et al., SIGCOMM 2015, §3.1; HPCC
// ns-3 rdma-hw.cc for the timer model). It owns the rate and its timers;
// the notification point (CNP generation) is the responder's, in
// responder.go. Its timers are evaluated lazily: every input (a CNP, a
// send, a rate query) first runs the timer events due up to now in time
// order, so an idle QP needs no wake-ups and the result is the same as
// with eagerly fired timers. testdata/dcqcn.txt walks through its rules.
type dcqcn struct {
	c    *DCQCNConfig
	line float64 // the port's rate: the ceiling of rc and rt
	rc   float64 // R_C, the current rate: what Send paces at
	rt   float64 // R_T, the target rate: where increases head

	alpha     float64 // α, the congestion estimate: a cut multiplies rc by 1−α/2
	everCNP   bool    // a CNP has arrived: until then no timer runs and α stays InitialAlpha
	alphaNext int64   // next α timer event (τ′, or the timer model's α period)
	alphaFlag bool    // timer model: a CNP arrived since the last α update

	decNext int64 // timer model: next decrease check
	decFlag bool  // timer model: a CNP arrived since the last check

	incArmed bool  // the rate-increase timer runs (stopped once rc is back at line rate)
	incNext  int64 // its next event
	tStage   int   // T, timer events since the last cut
	bStage   int   // BC, byte-counter events since the last cut
	bytes    int64 // bytes sent toward the next byte-counter event
}

func newDCQCN(c *DCQCNConfig, line int64) dcqcn {
	return dcqcn{c: c, line: float64(line), rc: float64(line), rt: float64(line), alpha: c.InitialAlpha}
}

// rateBps returns R_C as last computed (Stats: it runs no timer).
func (d *dcqcn) rateBps() int64 { return int64(d.rc) }

// onRTT: DCQCN takes no RTT samples.
func (d *dcqcn) onRTT(int64, uint64, uint64) {}

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
