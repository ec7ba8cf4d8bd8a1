package mrc

import (
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestResolveNSCC(t *testing.T) {
	cfg := DefaultConfig() // 400 Gb/s, 10 µs, trimming
	p := ResolveNSCC(&cfg)
	a := 500000.0 / 150000.0
	b := 7500.0 / 12000.0
	for name, c := range map[string][2]float64{
		"BDP":         {p.BDP, 500000},
		"MaxWnd":      {p.MaxWnd, 750000},
		"Target":      {p.Target, 7500},
		"Alpha":       {p.Alpha, 4 * 4096 * a * b / 7500},
		"Fi":          {p.Fi, 5 * 4096 * a},
		"Eta":         {p.Eta, 0.15 * 4096 * a},
		"FiScale":     {p.FiScale, 0.25 * a},
		"Gamma":       {p.Gamma, 0.8},
		"DelayAlpha":  {p.DelayAlpha, 0.0125},
		"MaxMDJump":   {p.MaxMDJump, 0.5},
		"QAThreshold": {p.QAThreshold, 4 * 7500},
		"AdjBytes":    {p.AdjBytes, 8 * 4096},
		"AdjPeriod":   {p.AdjPeriod, 10000},
	} {
		if !near(c[0], c[1]) {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if p.QAGate != 3 {
		t.Error("QAGate")
	}
	cfg.Trimming = false
	cfg.NSCC.Gamma = 0.5
	cfg.NSCC.MaxCwnd = 1 << 20
	p = ResolveNSCC(&cfg)
	if p.Target != 10000 || p.Gamma != 0.5 || p.MaxWnd != 1<<20 {
		t.Fatalf("overrides: %+v", p)
	}
}

func newCC(t *testing.T) *nscc {
	cfg := DefaultConfig()
	var c nscc
	c.init(ResolveNSCC(&cfg), false)
	return &c
}

func TestNSCCQuadrants(t *testing.T) {
	c := newCC(t)
	c.cwnd = 300000
	// No ECN, delay ≥ target: fair increase, applied at fulfill.
	if q := c.onAck(1, 4096, 8000, true, false, 0); q != QFairIncrease {
		t.Fatalf("got %v", q)
	}
	if !near(c.inc, c.p.Fi*4096) {
		t.Fatalf("inc %v", c.inc)
	}
	// No ECN, delay < target: proportional increase.
	c.inc = 0
	if q := c.onAck(2, 4096, 2000, true, false, 0); q != QProportional {
		t.Fatalf("got %v", q)
	}
	if !near(c.inc, c.p.Alpha*4096*(7500-2000)) {
		t.Fatalf("inc %v", c.inc)
	}
	// Fulfill once more than 8 MTU were received: cwnd += inc/cwnd.
	c.inc, c.received = 1e9, 0
	before := c.cwnd
	for i := 0; i < 9; i++ {
		c.onAck(3, 4096, 5000, true, true, 0) // marked, below target: inc unchanged
	}
	if !near(c.cwnd, before+1e9/before) || c.inc != 0 {
		t.Fatalf("fulfill: %v → %v", before, c.cwnd)
	}
	// ECN, delay < target: no change.
	before = c.cwnd
	if q := c.onAck(4, 4096, 1000, true, true, 0); q != QNoChange || c.cwnd != before {
		t.Fatalf("got %v cwnd %v", q, c.cwnd)
	}
	// Fast increase once delay < 1 µs for more than a cwnd.
	var q Quadrant
	for i := 0; i < 200 && q != QFastIncrease; i++ {
		q = c.onAck(5, 4096, 500, true, false, 0)
	}
	if q != QFastIncrease {
		t.Fatal("no fast increase")
	}
	before = c.cwnd
	c.onAck(5, 4096, 500, true, false, 0)
	if !near(c.cwnd, before+4096*c.p.FiScale) {
		t.Fatalf("fast increase %v → %v", before, c.cwnd)
	}
}

func TestNSCCMultiplicativeDecrease(t *testing.T) {
	c := newCC(t)
	c.p.Eta = 0 // keep fulfill's additive term out of the arithmetic
	c.cwnd = 400000
	c.avgDelay = 100 * c.p.Target // huge: the raw factor would be ~0.2
	if q := c.onAck(11000, 4096, 20000, true, true, 0); q != QMultiplicative {
		t.Fatalf("got %v", q)
	}
	if !near(c.cwnd, 200000) {
		t.Fatalf("decrease not bounded by max_md_jump: cwnd %v", c.cwnd)
	}
	// At most once per base_rtt.
	c.onAck(12000, 4096, 20000, true, true, 0)
	if !near(c.cwnd, 200000) {
		t.Fatalf("second decrease within base_rtt: %v", c.cwnd)
	}
	c.onAck(11001+int64(c.p.BaseRTT), 4096, 20000, true, true, 0)
	if !near(c.cwnd, 100000) {
		t.Fatalf("decrease after base_rtt: %v", c.cwnd)
	}
	// Mild excess: factor 1 − gamma·(avg−target)/avg.
	c = newCC(t)
	c.p.Eta = 0
	c.cwnd = 400000
	c.avgDelay = 1.1 * c.p.Target
	c.onAck(11000, 4096, 9000, true, true, 0)
	avg := c.avgDelay
	want := 400000 * (1 - 0.8*(avg-c.p.Target)/avg)
	if !near(c.cwnd, want) {
		t.Fatalf("cwnd %v want %v", c.cwnd, want)
	}
	// avg_delay ≤ target: no decrease even with ECN and high delay.
	c = newCC(t)
	c.p.Eta = 0
	c.cwnd = 400000
	c.onAck(11000, 4096, 9000, true, true, 0)
	if c.cwnd != 400000 {
		t.Fatalf("decreased with low avg_delay: %v", c.cwnd)
	}
}

func TestNSCCQuickAdapt(t *testing.T) {
	c := newCC(t)
	period := int64(c.p.BaseRTT + c.p.Target)
	// Only when little was achieved in the period.
	c2 := newCC(t)
	c2.onAck(1, 4096, 0, true, false, 0)
	c2.onTrim(2, 4096, 0)
	for i := int64(0); i < 100; i++ {
		c2.onAck(10+i*100, 4096, 0, true, false, 0) // 400 KB > maxwnd>>3
	}
	if q := c2.onAck(period+2, 4096, 0, true, false, 0); q == QQuickAdapt {
		t.Fatal("quick adapt with high achieved bytes")
	}
	// High delay alone also triggers it.
	c3 := newCC(t)
	c3.cwnd = 600000
	c3.onAck(1, 4096, 0, true, false, 0)
	if q := c3.onAck(period+2, 4096, int64(c3.p.QAThreshold)+1, true, false, 0); q != QQuickAdapt {
		t.Fatalf("delay trigger: %v", q)
	}
	if c3.cwnd != 4096 {
		t.Fatalf("cwnd %v", c3.cwnd)
	}
	cfg := DefaultConfig()
	cfg.NSCC.DisableQA = true
	var c4 nscc
	c4.init(ResolveNSCC(&cfg), false)
	c4.onAck(1, 4096, 0, true, false, 0)
	c4.onTrim(2, 4096, 0)
	if q := c4.onAck(period+2, 4096, 0, true, false, 0); q == QQuickAdapt {
		t.Fatal("DisableQA")
	}
}

func TestNSCCTrimAndPenalty(t *testing.T) {
	c := newCC(t)
	c.cwnd = 500000
	// Before the QA period ends: no quick adapt → cwnd −= trimmed bytes.
	c.onAck(1, 4096, 0, true, false, 0)
	if c.onTrim(10, 4096, 0) {
		t.Fatal("quick adapt fired before its period")
	}
	if c.cwnd != 500000-4096 || !c.qaTrigger {
		t.Fatalf("trim: cwnd %v trigger %v", c.cwnd, c.qaTrigger)
	}
	// After it, with little achieved: quick adapt.
	if !c.onTrim(int64(2+c.p.BaseRTT+c.p.Target), 4096, 0) || c.cwnd != 4096 {
		t.Fatalf("trim quick adapt: cwnd %v", c.cwnd)
	}
	// Receiver penalty.
	c = newCC(t)
	c.onPenalty(64)
	if c.cwnd != c.p.MaxWnd/2 {
		t.Fatalf("pen 64: %v", c.cwnd)
	}
	c.onPenalty(127)
	if c.cwnd != 4096 {
		t.Fatalf("pen 127: %v", c.cwnd)
	}
	// Clamp to [MTU, maxwnd].
	c.cwnd = 1e12
	c.clamp()
	if c.cwnd != c.p.MaxWnd {
		t.Fatal("clamp")
	}
	// base_rtt follows the minimum RTT and rescales maxwnd.
	c.onRTT(5000)
	if c.p.BaseRTT != 5000 || c.p.MaxWnd != 375000 {
		t.Fatalf("onRTT: %+v", c.p)
	}
}
