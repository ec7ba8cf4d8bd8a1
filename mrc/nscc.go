package mrc

// NSCC (UET's network-signal congestion control, as in htsim's uec.cpp and
// PROTOCOLS.md §b): a window in bytes driven by ECN echoes (SACK M =
// SKIP_ONCE), RTT samples, acknowledged bytes, trim NACKs and the
// responder's window penalty.

const (
	refBps   = 100e9  // reference network: 100 Gb/s …
	refRTTns = 12_000 // … and 12 µs
	// fastIncreaseDelay is the delay under which acked bytes count toward
	// fast increase.
	fastIncreaseDelay = 1_000
)

// NSCCParams are the resolved NSCC constants (exported for tests and
// reports).
type NSCCParams struct {
	MTU         float64 // MSS: the PMTU
	BDP         float64 // bytes at BaseRTT
	MaxWnd      float64 // 1.5·BDP (or MaxCwnd)
	BaseRTT     float64 // ns
	NetworkRTT  float64 // ns (the configured RTT; trim delay samples use it)
	Target      float64 // target queueing delay, ns
	Alpha       float64
	Fi          float64
	FiScale     float64
	Eta         float64
	Gamma       float64
	DelayAlpha  float64
	MaxMDJump   float64
	QAGate      uint
	QAThreshold float64 // ns
	AdjBytes    float64
	AdjPeriod   float64 // ns
	DisableQA   bool
	FixedMaxWnd bool // MaxCwnd given: maxwnd does not follow base_rtt
	LinkBps     float64
}

// ResolveNSCC derives the NSCC constants from cfg.
func ResolveNSCC(cfg *Config) NSCCParams {
	n := &cfg.NSCC
	p := NSCCParams{MTU: float64(cfg.PMTU), LinkBps: float64(cfg.LinkBps)}
	rtt := cfg.BaseRTT
	if n.BaseRTT > 0 {
		rtt = n.BaseRTT
	}
	p.BaseRTT = float64(rtt)
	p.NetworkRTT = float64(rtt)
	p.BDP = p.LinkBps / 8 * p.BaseRTT / 1e9
	p.MaxWnd = 1.5 * p.BDP
	if n.MaxCwnd > 0 {
		p.MaxWnd = float64(n.MaxCwnd)
		p.FixedMaxWnd = true
	}
	if p.MaxWnd < p.MTU {
		p.MaxWnd = p.MTU
	}
	p.Target = p.NetworkRTT
	if cfg.Trimming {
		p.Target = 0.75 * p.NetworkRTT
	}
	if n.TargetDelay > 0 {
		p.Target = float64(n.TargetDelay)
	}
	a := p.BDP / (refBps / 8 * refRTTns / 1e9)
	b := p.Target / refRTTns
	p.Alpha = 4 * p.MTU * a * b / p.Target
	p.Fi = 5 * p.MTU * a
	p.Eta = 0.15 * p.MTU * a
	p.FiScale = 0.25 * a
	p.Gamma = 0.8
	p.DelayAlpha = 0.0125
	p.MaxMDJump = 0.5
	p.QAGate = 3
	p.QAThreshold = 4 * p.Target
	p.AdjBytes = 8 * p.MTU
	p.AdjPeriod = p.NetworkRTT
	p.DisableQA = n.DisableQA
	if n.Alpha > 0 {
		p.Alpha = n.Alpha
	}
	if n.Fi > 0 {
		p.Fi = n.Fi
	}
	if n.Eta > 0 {
		p.Eta = n.Eta
	}
	if n.FiScale > 0 {
		p.FiScale = n.FiScale
	}
	if n.Gamma > 0 {
		p.Gamma = n.Gamma
	}
	if n.DelayAlpha > 0 {
		p.DelayAlpha = n.DelayAlpha
	}
	if n.MaxMDJump > 0 {
		p.MaxMDJump = n.MaxMDJump
	}
	if n.QAGate > 0 {
		p.QAGate = uint(n.QAGate)
	}
	if n.QAThreshold > 0 {
		p.QAThreshold = float64(n.QAThreshold)
	}
	if n.AdjustBytesThreshold > 0 {
		p.AdjBytes = float64(n.AdjustBytesThreshold)
	}
	if n.AdjustPeriodThreshold > 0 {
		p.AdjPeriod = float64(n.AdjustPeriodThreshold)
	}
	return p
}

// Quadrant names the NSCC decision of one ACK (for tests and stats).
type Quadrant uint8

const (
	QNone           Quadrant = iota // disabled: no window decision
	QFairIncrease                   // no ECN, delay ≥ target
	QProportional                   // no ECN, delay < target
	QFastIncrease                   // no ECN, delay < 1 µs for more than a cwnd
	QMultiplicative                 // ECN, delay ≥ target (decrease if due)
	QNoChange                       // ECN, delay < target: only the EV is penalised
	QQuickAdapt                     // quick adapt fired
	QIgnored                        // ECN inside the quick-adapt ignore window: nothing changes
	numQuadrants
)

// largeDelayAlpha is update_delay's EWMA weight for samples over 5·base_rtt
// (htsim hard-codes it; equal to the default DelayAlpha).
const largeDelayAlpha = 0.0125

// nscc follows uet-htsim's UecSrc (uec.cpp) field for field: the zero
// times (lastDec, lastAdj, qaEnd) are htsim's initial zeros on the
// simulation clock, not the flow's start.
type nscc struct {
	p        NSCCParams
	disabled bool

	cwnd     float64
	inc      float64 // _inc_bytes: pending increase (bytes²), applied at fulfill
	avgDelay float64 // _avg_delay, ns

	lastDec       int64   // _last_dec_time
	qaEnd         int64   // _qa_endtime; 0: the first check only starts a period
	achieved      float64 // _achieved_bytes in the current quick-adapt period
	qaTrigger     bool    // _trigger_qa: set by a trim, cleared only when quick adapt fires
	bytesIgnored  float64 // _bytes_ignored: received + nacked since quick adapt fired
	bytesToIgnore float64 // _bytes_to_ignore: in flight when it fired
	fiCount       float64 // _fi_count: bytes acked with delay < 1 µs in a row
	fastInc       bool    // _increase: fast increase stays on while delay < 1 µs
	received      float64 // _received_bytes since the last fulfill
	lastAdj       int64   // _last_adjust_time: advances only when eta is added

	quadrants [numQuadrants]uint64
}

func (c *nscc) init(p NSCCParams, disabled bool) {
	*c = nscc{p: p, disabled: disabled, cwnd: p.MaxWnd}
}

// clamp is htsim's set_cwnd_bounds: [MTU, maxwnd].
func (c *nscc) clamp() {
	if c.cwnd > c.p.MaxWnd {
		c.cwnd = c.p.MaxWnd
	}
	if c.cwnd < c.p.MTU {
		c.cwnd = c.p.MTU
	}
}

// window returns cwnd in bytes.
func (c *nscc) window() int64 { return int64(c.cwnd) }

// onRTT folds a raw RTT sample into base_rtt (its minimum) and recomputes
// BDP and maxwnd from it (update_base_rtt).
func (c *nscc) onRTT(rtt int64) {
	r := float64(rtt)
	if r <= 0 || r >= c.p.BaseRTT {
		return
	}
	c.p.BaseRTT = r
	if !c.p.FixedMaxWnd {
		c.p.BDP = c.p.LinkBps / 8 * r / 1e9
		c.p.MaxWnd = 1.5 * c.p.BDP
		if c.p.MaxWnd < c.p.MTU {
			c.p.MaxWnd = c.p.MTU
		}
		c.clamp()
	}
}

// updateDelay is htsim's update_delay: folds a queueing-delay sample into
// avg_delay. An unmarked sample over target counts as 0.25·base_rtt (the
// delay is not the sender's queue); one over 5·base_rtt uses htsim's fixed
// weight.
func (c *nscc) updateDelay(d float64, skip bool) {
	switch {
	case !skip && d > c.p.Target:
		c.avgDelay += c.p.DelayAlpha * (0.25*c.p.BaseRTT - c.avgDelay)
	case d > 5*c.p.BaseRTT:
		c.avgDelay += largeDelayAlpha * (d - c.avgDelay)
	default:
		c.avgDelay += c.p.DelayAlpha * (d - c.avgDelay)
	}
}

// quickAdapt is htsim's quick_adapt. It reports true, and the caller
// changes nothing more, when a skip (ECN or trim) arrives inside the
// ignore window, or when quick adapt fires: cwnd = achieved bytes of the
// period, and the next in-flight bytes' marks are ignored. The period
// (base_rtt + target) restarts whenever it has elapsed, fired or not.
func (c *nscc) quickAdapt(now int64, isLoss, skip bool, delay float64, inflight float64) (ignored, fired bool) {
	if c.p.DisableQA {
		return false, false
	}
	if c.bytesIgnored < c.bytesToIgnore && skip {
		ignored = true
	} else if now > c.qaEnd {
		if c.qaEnd != 0 && (c.qaTrigger || isLoss || delay > c.p.QAThreshold) &&
			c.achieved < float64(int64(c.p.MaxWnd)>>c.p.QAGate) {
			c.cwnd = max(c.achieved, c.p.MTU)
			c.bytesToIgnore = inflight
			c.bytesIgnored = 0
			c.qaTrigger = false
			fired = true
			c.quadrants[QQuickAdapt]++
		}
		c.achieved = 0
		c.qaEnd = now + int64(c.p.BaseRTT+c.p.Target)
	}
	if ignored || fired {
		c.inc = 0
		c.received = 0
	}
	return ignored, fired
}

// onAck processes one SACK/ACK (htsim's processAck NSCC part and
// updateCwndOnAck_NSCC): acked newly acknowledged bytes, delay the queueing
// delay of its RTT sample (hasDelay false: none, and avg_delay stands in
// for it), ecn the echoed CE mark, inflight the bytes still in flight. It
// returns the quadrant taken.
func (c *nscc) onAck(now int64, acked int64, delay int64, hasDelay, ecn bool, inflight int64) Quadrant {
	if c.disabled {
		return QNone
	}
	a := float64(acked)
	c.achieved += a
	c.received += a
	c.bytesIgnored += a
	d := c.avgDelay
	if hasDelay {
		d = float64(delay)
		c.updateDelay(d, ecn)
	}
	if ignored, fired := c.quickAdapt(now, false, ecn, d, float64(inflight)); fired {
		return QQuickAdapt
	} else if ignored {
		c.quadrants[QIgnored]++
		return QIgnored
	}
	q := c.quadrant(now, a, d, ecn)
	c.clamp()
	if c.received > c.p.AdjBytes || float64(now-c.lastAdj) > c.p.AdjPeriod {
		c.fulfill(now)
	}
	c.clamp()
	c.quadrants[q]++
	return q
}

func (c *nscc) quadrant(now int64, a, d float64, ecn bool) Quadrant {
	switch {
	case !ecn && d >= c.p.Target:
		c.inc += c.p.Fi * a
		return QFairIncrease
	case !ecn:
		if c.fastIncrease(a, d) {
			return QFastIncrease
		}
		c.inc += c.p.Alpha * a * (c.p.Target - d)
		return QProportional
	case d >= c.p.Target:
		c.multiplicativeDecrease(now)
		return QMultiplicative
	default:
		return QNoChange
	}
}

// fastIncrease is htsim's fast_increase (reached only from proportional
// increase): once more than a cwnd was acked with delay < 1 µs, every such
// ACK grows cwnd by fi_scale·acked, until a delay of 1 µs or more.
func (c *nscc) fastIncrease(a, d float64) bool {
	if d < fastIncreaseDelay {
		c.fiCount += a
		if c.fiCount > c.cwnd || c.fastInc {
			c.cwnd += a * c.p.FiScale
			c.fastInc = true
			return true
		}
	} else {
		c.fiCount = 0
	}
	c.fastInc = false
	return false
}

// multiplicativeDecrease is htsim's multiplicative_decrease: it ends fast
// increase even when it does not decrease.
func (c *nscc) multiplicativeDecrease(now int64) {
	c.fastInc = false
	c.fiCount = 0
	avg := c.avgDelay
	if avg > c.p.Target && float64(now-c.lastDec) > c.p.BaseRTT {
		f := 1 - c.p.Gamma*(avg-c.p.Target)/avg
		if f < 1-c.p.MaxMDJump {
			f = 1 - c.p.MaxMDJump
		}
		c.cwnd = max(c.cwnd*f, c.p.MTU)
		c.lastDec = now
	}
}

// fulfill is htsim's fulfill_adjustment: the accumulated increase, and eta
// once the adjust period has elapsed since eta was last added.
func (c *nscc) fulfill(now int64) {
	c.cwnd += c.inc / c.cwnd
	if float64(now-c.lastAdj) >= c.p.AdjPeriod {
		c.cwnd += c.p.Eta
		c.lastAdj = now
	}
	c.inc = 0
	c.received = 0
}

// onTrim reacts to a trim NACK of nacked bytes (updateCwndOnNack_NSCC):
// a delay sample of network_rtt (htsim feeds base_rtt + network_rtt as the
// RTT), the quick-adapt trigger, and unless quick adapt fires or the trim
// falls in the ignore window, cwnd −= the trimmed bytes. inflight excludes
// the trimmed packet (qp.go takes it out first); htsim's in_flight still
// holds it when it sets the ignore window, so it is added back. It
// reports whether quick adapt fired.
func (c *nscc) onTrim(now int64, nacked int64, inflight int64) bool {
	if c.disabled {
		return false
	}
	n := float64(nacked)
	c.bytesIgnored += n
	c.updateDelay(c.p.NetworkRTT, true)
	c.qaTrigger = true
	ignored, fired := c.quickAdapt(now, true, true, 0, float64(inflight)+n)
	if fired || ignored {
		return fired
	}
	c.cwnd -= n
	c.clamp()
	return false
}

// onTimeout reacts to the ACK timeout of a packet of bytes
// (mark_packet_for_retransmission): cwnd shrinks by the packet, to no less
// than one MTU. It sets no quick-adapt trigger.
func (c *nscc) onTimeout(bytes int64) {
	if c.disabled {
		return
	}
	c.cwnd = max(c.cwnd-float64(bytes), c.p.MTU)
}

// onPenalty applies the responder's rcv_cwnd_pen (0..127): the window is
// capped at maxwnd·(128−pen)/128, so 64 halves it and 127 leaves one packet
// per RTT. This is MRC's scale [S4], a deliberate departure from htsim's
// cwnd −= newly_rcvd·(1 − pen/255) on a 0–255 scale.
func (c *nscc) onPenalty(pen uint8) {
	if c.disabled || pen == 0 {
		return
	}
	if pen > 127 {
		pen = 127
	}
	limit := c.p.MaxWnd * float64(128-int(pen)) / 128
	if pen == 127 {
		limit = c.p.MTU
	}
	if c.cwnd > limit {
		c.cwnd = limit
		c.clamp()
	}
}
