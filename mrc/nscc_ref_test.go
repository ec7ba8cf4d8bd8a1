package mrc

import "testing"

// Step tests of NSCC against uet-htsim's uec.cpp (UecSrc: processAck,
// quick_adapt, updateCwndOnAck_NSCC, updateCwndOnNack_NSCC, update_delay,
// fast_increase, multiplicative_decrease, fulfill_adjustment,
// mark_packet_for_retransmission). Each expected value is htsim's formula
// worked by hand on DefaultConfig's constants: 400 Gb/s, base_rtt = network
// RTT = 10 µs, trimming → target 7.5 µs, MTU 4096, maxwnd 750 000,
// maxwnd>>3 = 93 750, quick-adapt period base_rtt+target = 17.5 µs,
// adjust period 10 µs, adjust bytes 8·MTU = 32 768, eta = 0.15·4096·(10/3).

const (
	mtu4k    = 4096
	qaPeriod = 17_500 // base_rtt + target, ns
)

// refCC is a fresh NSCC on DefaultConfig, nothing received yet (htsim's
// zero _qa_endtime, _last_adjust_time and _last_dec_time).
func refCC(t *testing.T) *nscc {
	t.Helper()
	cfg := DefaultConfig()
	var c nscc
	c.init(ResolveNSCC(&cfg), false)
	if c.p.MaxWnd != 750_000 || c.p.Target != 7500 || c.p.BaseRTT != 10_000 || c.p.AdjBytes != 8*mtu4k {
		t.Fatalf("DefaultConfig's NSCC constants changed: %+v", c.p)
	}
	return &c
}

// fireQA makes quick adapt fire at the end of the first period: the first
// ACK (t=1) only starts the period (qa_endtime was 0), a trim at t=100 sets
// the trigger, and the ACK at t = 1 + qaPeriod + 1 fires it with inflight
// bytes in flight. It returns the time of that ACK.
func fireQA(t *testing.T, c *nscc, inflight int64) int64 {
	t.Helper()
	c.onAck(1, 3*mtu4k, 500, true, false, 0)
	c.onTrim(100, mtu4k, 0)
	c.onAck(200, 2*mtu4k, 500, true, false, 0)
	now := int64(1 + qaPeriod + 1)
	if q := c.onAck(now, mtu4k, 500, true, false, inflight); q != QQuickAdapt {
		t.Fatalf("quick adapt did not fire: %v", q)
	}
	return now
}

// Quick adapt: cwnd = achieved bytes of the period, which starts at the
// first ACK and does not count it (quick_adapt zeroes _achieved_bytes when
// qa_endtime is 0); it fires only when now > qa_endtime.
func TestNSCCRefQuickAdaptAchieved(t *testing.T) {
	c := refCC(t)
	c.onAck(1, 3*mtu4k, 500, true, false, 0) // starts the period: qa_endtime = 1 + 17 500
	c.onTrim(100, mtu4k, 0)                  // trigger; before the period ends: cwnd −= 4096
	if want := c.p.MaxWnd - mtu4k; c.cwnd != want {
		t.Fatalf("trim before the period ended: cwnd %v, want %v", c.cwnd, want)
	}
	c.onAck(200, 2*mtu4k, 500, true, false, 0)
	if q := c.onAck(1+qaPeriod, mtu4k, 500, true, false, 0); q == QQuickAdapt {
		t.Fatal("quick adapt at now == qa_endtime (htsim: now > qa_endtime)")
	}
	if q := c.onAck(1+qaPeriod+1, mtu4k, 500, true, false, 80_000); q != QQuickAdapt {
		t.Fatalf("quick adapt did not fire after the period: %v", q)
	}
	// achieved = 2·4096 + 4096 + 4096 (the ACKs after the first).
	if want := 4.0 * mtu4k; c.cwnd != want {
		t.Fatalf("quick adapt cwnd %v, want achieved %v", c.cwnd, want)
	}
	if c.inc != 0 {
		t.Fatalf("quick adapt left inc %v", c.inc)
	}
}

// An ECN-marked ACK inside the ignore window changes nothing (quick_adapt
// returns true for a skip while bytes_ignored < bytes_to_ignore); its RTT
// sample still feeds avg_delay (processAck's update_delay runs first). An
// unmarked ACK in the window is processed normally.
func TestNSCCRefIgnoreWindowECN(t *testing.T) {
	c := refCC(t)
	now := fireQA(t, c, 100_000)
	cw := c.cwnd
	c.avgDelay = 2 * c.p.Target // would allow a decrease
	avg := c.avgDelay
	q := c.onAck(now+1, mtu4k, 20_000, true, true, 100_000)
	if q != QIgnored || c.cwnd != cw || c.inc != 0 {
		t.Fatalf("ECN ACK in ignore window: quadrant %v cwnd %v → %v inc %v", q, cw, c.cwnd, c.inc)
	}
	if want := avg + 0.0125*(20_000-avg); !near(c.avgDelay, want) {
		t.Fatalf("avg_delay %v, want %v (the marked sample folded in)", c.avgDelay, want)
	}
	// Unmarked in the window: proportional increase as usual, applied by
	// the fulfill that is due (now − last_adjust_time(0) > 10 µs) with eta.
	if q := c.onAck(now+2, mtu4k, 2000, true, false, 100_000); q != QProportional {
		t.Fatalf("unmarked ACK in ignore window: %v", q)
	}
	if want := cw + c.p.Alpha*mtu4k*(7500-2000)/cw + c.p.Eta; !near(c.cwnd, want) {
		t.Fatalf("cwnd %v, want %v", c.cwnd, want)
	}
}

// The ignore window counts received and nacked bytes; a trim inside it cuts
// nothing, and the window covers the trimmed packet (htsim's _in_flight
// still holds it when quick adapt fires from a NACK).
func TestNSCCRefIgnoreWindowBytes(t *testing.T) {
	c := refCC(t)
	now := fireQA(t, c, 3*mtu4k)
	cw := c.cwnd
	c.onAck(now+1, mtu4k, 20_000, true, true, 2*mtu4k) // ignored: 4096 < 12288
	if fired := c.onTrim(now+2, mtu4k, mtu4k); fired || c.cwnd != cw {
		t.Fatalf("trim in ignore window: fired %v cwnd %v → %v", fired, cw, c.cwnd)
	}
	// 8192 ignored; this ACK makes 12 288: no longer < bytes_to_ignore.
	c.avgDelay = 2 * c.p.Target
	if q := c.onAck(now+3, mtu4k, 20_000, true, true, 0); q != QMultiplicative {
		t.Fatalf("ECN ACK after the ignore window: %v", q)
	}
}

// A trim NACK whose quick adapt fires sets the ignore window to the bytes in
// flight including the trimmed one.
func TestNSCCRefTrimIgnoreIncludesTrimmed(t *testing.T) {
	c := refCC(t)
	c.onAck(1, mtu4k, 500, true, false, 0)
	c.onTrim(100, mtu4k, 0)
	if !c.onTrim(1+qaPeriod+1, mtu4k, 2*mtu4k) {
		t.Fatal("trim after the period: no quick adapt")
	}
	// 3 packets to ignore (2 in flight + the trimmed one): two marked ACKs
	// are ignored, the third is not.
	c.avgDelay = 2 * c.p.Target
	for i := range 2 {
		if q := c.onAck(20_000+int64(i), mtu4k, 20_000, true, true, 0); q != QIgnored {
			t.Fatalf("marked ACK %d: %v", i, q)
		}
	}
	if q := c.onAck(20_010, mtu4k, 20_000, true, true, 0); q != QMultiplicative {
		t.Fatalf("marked ACK 3: %v", q)
	}
}

// An ACK without an RTT sample takes avg_delay as its delay: a marked one
// can halve the window, an unmarked one grows it proportionally.
func TestNSCCRefNoSampleUsesAvgDelay(t *testing.T) {
	c := refCC(t)
	c.cwnd = 400_000
	c.avgDelay = 20_000
	// now 20 001: past last_dec (0) + base_rtt, and past last_adjust (0) +
	// the adjust period, so fulfill adds eta.
	if q := c.onAck(20_001, mtu4k, 0, false, true, 0); q != QMultiplicative {
		t.Fatalf("marked ACK without sample: %v", q)
	}
	// factor max(1 − 0.8·(20 000 − 7 500)/20 000, 0.5) = 0.5
	if want := 400_000*0.5 + c.p.Eta; !near(c.cwnd, want) {
		t.Fatalf("cwnd %v, want %v", c.cwnd, want)
	}
	if c.avgDelay != 20_000 {
		t.Fatalf("avg_delay moved without a sample: %v", c.avgDelay)
	}
	c = refCC(t)
	c.avgDelay = 2000
	if q := c.onAck(1, mtu4k, 0, false, false, 0); q != QProportional {
		t.Fatalf("unmarked ACK without sample: %v", q)
	}
	if want := c.p.Alpha * mtu4k * (7500 - 2000); !near(c.inc, want) {
		t.Fatalf("inc %v, want %v", c.inc, want)
	}
}

// The trim NACK feeds a delay of network_rtt (update_delay(base_rtt +
// network_rtt) subtracts base_rtt).
func TestNSCCRefTrimDelaySample(t *testing.T) {
	c := refCC(t)
	c.onTrim(100, mtu4k, 0)
	if want := 0.0125 * 10_000; !near(c.avgDelay, want) {
		t.Fatalf("avg_delay %v after a trim, want %v", c.avgDelay, want)
	}
}

// update_delay: a sample over 5·base_rtt uses the fixed weight 0.0125 even
// when delay_alpha is configured otherwise; an unmarked sample over target
// counts as 0.25·base_rtt.
func TestNSCCRefUpdateDelay(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NSCC.DelayAlpha = 0.1
	var c nscc
	c.init(ResolveNSCC(&cfg), false)
	c.onAck(1, mtu4k, 60_000, true, true, 0)
	if want := 0.0125 * 60_000; !near(c.avgDelay, want) {
		t.Fatalf("large sample: avg_delay %v, want %v", c.avgDelay, want)
	}
	avg := c.avgDelay
	c.onAck(2, mtu4k, 20_000, true, false, 0)
	if want := avg + 0.1*(0.25*10_000-avg); !near(c.avgDelay, want) {
		t.Fatalf("unmarked over target: avg_delay %v, want %v", c.avgDelay, want)
	}
	avg = c.avgDelay
	c.onAck(3, mtu4k, 20_000, true, true, 0)
	if want := avg + 0.1*(20_000-avg); !near(c.avgDelay, want) {
		t.Fatalf("marked: avg_delay %v, want %v", c.avgDelay, want)
	}
}

// A timeout cuts cwnd by the packet, floor one MTU, and does not arm quick
// adapt (rtxTimerExpired → mark_packet_for_retransmission; neither it nor
// SLEEK's fast loss sets _trigger_qa).
func TestNSCCRefTimeout(t *testing.T) {
	c := refCC(t)
	c.cwnd = 300_000
	c.onTimeout(mtu4k)
	if c.cwnd != 300_000-mtu4k {
		t.Fatalf("timeout: cwnd %v, want %v", c.cwnd, 300_000-mtu4k)
	}
	c.cwnd = 5000
	c.onTimeout(mtu4k)
	if c.cwnd != mtu4k {
		t.Fatalf("timeout floor: cwnd %v", c.cwnd)
	}
}

func TestNSCCRefLossArmsNoQuickAdapt(t *testing.T) {
	c := refCC(t)
	c.onAck(1, mtu4k, 500, true, false, 0)
	c.onTimeout(mtu4k) // a fast loss tells NSCC nothing at all (qp.go's fastLose)
	if q := c.onAck(1+qaPeriod+1, mtu4k, 500, true, false, 0); q == QQuickAdapt {
		t.Fatal("quick adapt after a timeout / fast loss alone")
	}
}

// The quick-adapt trigger stays set over a period in which quick adapt
// could not fire (much achieved) and fires it at the next.
func TestNSCCRefTriggerKept(t *testing.T) {
	c := refCC(t)
	c.onAck(1, mtu4k, 500, true, false, 0) // period ends at 17 501
	c.onTrim(100, mtu4k, 0)
	for i := range 25 { // 102 400 ≥ maxwnd>>3 achieved
		c.onAck(200+int64(i), mtu4k, 5000, true, false, 0)
	}
	if q := c.onAck(17_502, mtu4k, 5000, true, false, 0); q == QQuickAdapt {
		t.Fatal("quick adapt with much achieved")
	} // next period ends at 35 002
	c.onAck(20_000, mtu4k, 5000, true, false, 0)
	if q := c.onAck(35_003, mtu4k, 5000, true, false, 0); q != QQuickAdapt {
		t.Fatalf("trigger lost at the period's end: %v", q)
	}
	if c.cwnd != 2*mtu4k {
		t.Fatalf("cwnd %v, want the period's achieved %v", c.cwnd, 2*mtu4k)
	}
}

// Fast increase (inside proportional increase): sticky once on; fair
// increase and an unchanged marked ACK leave its count alone;
// multiplicative decrease resets it.
func TestNSCCRefFastIncrease(t *testing.T) {
	c := refCC(t)
	c.p.FiScale = 2 // cwnd outgrows fi_count: only _increase keeps it on
	c.cwnd = 10_000
	for i, want := range []Quadrant{QProportional, QProportional, QFastIncrease, QFastIncrease} {
		if q := c.onAck(int64(1+i), mtu4k, 500, true, false, 0); q != want {
			t.Fatalf("ACK %d: %v, want %v (cwnd %v)", i, q, want, c.cwnd)
		}
	}
	if want := 10_000 + 2*2.0*mtu4k; c.cwnd != want {
		t.Fatalf("cwnd %v, want %v", c.cwnd, want)
	}
	c = refCC(t)
	c.cwnd = 10_000
	c.onAck(1, mtu4k, 500, true, false, 0)
	c.onAck(2, mtu4k, 500, true, false, 0)                               // fi_count 8192
	c.onAck(3, mtu4k, 8000, true, false, 0)                              // fair increase: count kept
	c.onAck(4, mtu4k, 5000, true, true, 0)                               // marked, below target: kept
	if q := c.onAck(5, mtu4k, 500, true, false, 0); q != QFastIncrease { // 12 288 > 10 000
		t.Fatalf("fi_count reset by fair increase or a marked ACK: %v", q)
	}
	c.onAck(6, mtu4k, 9000, true, true, 0) // MD path (no decrease: avg low) resets it
	if q := c.onAck(7, mtu4k, 500, true, false, 0); q != QProportional {
		t.Fatalf("fast increase survived multiplicative decrease: %v", q)
	}
}

// Multiplicative decrease only when now − last_dec > base_rtt, last_dec
// starting at 0.
func TestNSCCRefDecreaseTiming(t *testing.T) {
	c := refCC(t)
	c.cwnd = 400_000
	c.avgDelay = 20_000
	c.onAck(5000, mtu4k, 20_000, true, true, 0)
	if c.cwnd != 400_000 {
		t.Fatalf("decrease at t=5 µs < base_rtt after last_dec=0: %v", c.cwnd)
	}
	// t=10 001: decrease by 0.5, and fulfill (10 001 > adjust period) adds eta.
	c.onAck(10_001, mtu4k, 20_000, true, true, 0)
	if want := 200_000 + c.p.Eta; !near(c.cwnd, want) {
		t.Fatalf("decrease at t=10.001 µs: cwnd %v, want %v", c.cwnd, want)
	}
	cw := c.cwnd
	c.onAck(20_001, mtu4k, 20_000, true, true, 0) // exactly base_rtt later
	if c.cwnd != cw {
		t.Fatalf("decrease at now − last_dec == base_rtt: %v → %v", cw, c.cwnd)
	}
	c.onAck(20_002, mtu4k, 20_000, true, true, 0)
	if c.cwnd >= cw {
		t.Fatalf("no decrease after base_rtt: %v → %v", cw, c.cwnd)
	}
}

// fulfill_adjustment: it runs when received_bytes > 8·MTU (not ≥) or the
// adjust period has elapsed since last_adjust_time; eta is added, and
// last_adjust_time moves, only when the period has elapsed.
func TestNSCCRefFulfill(t *testing.T) {
	c := refCC(t)
	c.cwnd = 300_000
	// t=10 001 > 0 + 10 000: fulfill with eta; last_adjust = 10 001.
	c.onAck(10_001, mtu4k, 5000, true, true, 0) // marked, below target: inc stays 0
	if want := 300_000 + c.p.Eta; !near(c.cwnd, want) {
		t.Fatalf("first fulfill: cwnd %v, want %v", c.cwnd, want)
	}
	cw := c.cwnd
	// Exactly 8 MTU received: no fulfill yet.
	for range 8 {
		c.onAck(15_000, mtu4k, 2000, true, false, 0)
	}
	if c.cwnd != cw || c.inc == 0 {
		t.Fatalf("fulfill at received == 8 MTU: cwnd %v → %v, inc %v", cw, c.cwnd, c.inc)
	}
	inc := c.inc + c.p.Alpha*mtu4k*5500
	c.onAck(15_000, mtu4k, 2000, true, false, 0) // 9 MTU: fulfill, no eta
	if want := cw + inc/cw; !near(c.cwnd, want) || c.inc != 0 {
		t.Fatalf("bytes fulfill: cwnd %v, want %v (inc %v)", c.cwnd, want, c.inc)
	}
	cw = c.cwnd
	// 20 002 − 10 001 > 10 000: the period counts from the last eta.
	c.onAck(20_002, mtu4k, 5000, true, true, 0)
	if want := cw + c.p.Eta; !near(c.cwnd, want) {
		t.Fatalf("period fulfill: cwnd %v, want %v", c.cwnd, want)
	}
}
