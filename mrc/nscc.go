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
	QNone           Quadrant = iota // no delay sample: no window decision
	QFairIncrease                   // no ECN, delay ≥ target
	QProportional                   // no ECN, delay < target
	QFastIncrease                   // no ECN, delay < 1 µs for more than a cwnd
	QMultiplicative                 // ECN, delay ≥ target (decrease if due)
	QNoChange                       // ECN, delay < target: only the EV is penalised
	QQuickAdapt                     // quick adapt fired
	numQuadrants
)

type nscc struct {
	p        NSCCParams
	disabled bool

	cwnd     float64
	inc      float64 // pending increase (bytes²), applied at fulfill
	avgDelay float64

	lastMD      int64
	mdValid     bool
	qaEnd       int64
	achieved    float64
	qaTrigger   bool
	ignoreBytes float64
	fastBytes   float64
	adjBytes    float64
	lastAdj     int64
	lastEta     int64
	started     bool

	quadrants [numQuadrants]uint64
}

func (c *nscc) init(p NSCCParams, disabled bool) {
	*c = nscc{p: p, disabled: disabled, cwnd: p.MaxWnd}
}

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

func (c *nscc) start(now int64) {
	if !c.started {
		c.started = true
		c.qaEnd = now + int64(c.p.BaseRTT+c.p.Target)
		c.lastAdj, c.lastEta = now, now
	}
}

// onRTT folds a raw RTT sample into base_rtt (its minimum) and recomputes
// BDP and maxwnd from it.
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

// quickAdapt runs the once-per-(base_rtt+target) quick-adapt check and
// reports whether it fired.
func (c *nscc) quickAdapt(now int64, delay float64, inflight int64) bool {
	if c.p.DisableQA || now < c.qaEnd {
		return false
	}
	fired := false
	if (c.qaTrigger || delay > c.p.QAThreshold) && c.achieved < float64(int64(c.p.MaxWnd)>>c.p.QAGate) {
		c.cwnd = c.achieved
		c.clamp()
		c.ignoreBytes = float64(inflight)
		c.inc = 0
		fired = true
		c.quadrants[QQuickAdapt]++
	}
	c.qaTrigger = false
	c.achieved = 0
	c.qaEnd = now + int64(c.p.BaseRTT+c.p.Target)
	return fired
}

// onAck processes one SACK/ACK: acked newly acknowledged bytes, delay the
// queueing delay of its RTT sample (hasDelay false: none), ecn the echoed
// CE mark. It returns the quadrant taken.
func (c *nscc) onAck(now int64, acked int64, delay int64, hasDelay, ecn bool, inflight int64) Quadrant {
	if c.disabled {
		return QNone
	}
	c.start(now)
	a := float64(acked)
	c.achieved += a
	d := float64(delay)
	if !hasDelay {
		d = 0
	}
	q := QNone
	if c.quickAdapt(now, d, inflight) {
		q = QQuickAdapt
	} else {
		if c.ignoreBytes > 0 {
			c.ignoreBytes -= a
			ecn = false
		}
		if hasDelay {
			q = c.quadrant(now, a, d, ecn)
		} else if ecn {
			q = QNoChange
		}
	}
	c.fulfill(now, a)
	c.quadrants[q]++
	return q
}

func (c *nscc) updateAvg(sample float64) {
	c.avgDelay += c.p.DelayAlpha * (sample - c.avgDelay)
}

func (c *nscc) quadrant(now int64, a, d float64, ecn bool) Quadrant {
	sample := d
	if !ecn && d > c.p.Target {
		sample = 0.25 * c.p.BaseRTT
	}
	c.updateAvg(sample)
	if !ecn && d < fastIncreaseDelay {
		c.fastBytes += a
	} else {
		c.fastBytes = 0
	}
	switch {
	case !ecn && d >= c.p.Target:
		c.inc += c.p.Fi * a
		return QFairIncrease
	case !ecn:
		if c.fastBytes > c.cwnd {
			c.cwnd += a * c.p.FiScale
			c.clamp()
			return QFastIncrease
		}
		c.inc += c.p.Alpha * a * (c.p.Target - d)
		return QProportional
	case d >= c.p.Target:
		if (!c.mdValid || float64(now-c.lastMD) >= c.p.BaseRTT) && c.avgDelay > c.p.Target {
			f := 1 - c.p.Gamma*(c.avgDelay-c.p.Target)/c.avgDelay
			if f < 1-c.p.MaxMDJump {
				f = 1 - c.p.MaxMDJump
			}
			c.cwnd *= f
			c.clamp()
			c.lastMD, c.mdValid = now, true
		}
		return QMultiplicative
	default:
		return QNoChange
	}
}

// fulfill applies the accumulated increase every AdjBytes acked or every
// AdjPeriod, adding eta once per period.
func (c *nscc) fulfill(now int64, a float64) {
	c.adjBytes += a
	if c.adjBytes < c.p.AdjBytes && float64(now-c.lastAdj) < c.p.AdjPeriod {
		return
	}
	if c.cwnd > 0 {
		c.cwnd += c.inc / c.cwnd
	}
	c.inc = 0
	c.adjBytes = 0
	c.lastAdj = now
	if float64(now-c.lastEta) >= c.p.AdjPeriod {
		c.cwnd += c.p.Eta
		c.lastEta = now
	}
	c.clamp()
}

// onTrim reacts to a trim NACK of nacked bytes: a delay sample of base_rtt
// + network_rtt, the quick-adapt trigger, and unless quick adapt fires a
// decrease by the trimmed bytes. It reports whether quick adapt fired.
func (c *nscc) onTrim(now int64, nacked int64, inflight int64) bool {
	if c.disabled {
		return false
	}
	c.start(now)
	c.updateAvg(c.p.BaseRTT + c.p.NetworkRTT)
	c.qaTrigger = true
	if c.quickAdapt(now, 0, inflight) {
		return true
	}
	c.cwnd -= float64(nacked)
	c.clamp()
	return false
}

// onTimeout reacts to an ACK timeout of a packet of bytes.
func (c *nscc) onTimeout(bytes int64) {}

// onLoss sets the quick-adapt trigger (timeout or fast-loss detection).
func (c *nscc) onLoss() { c.qaTrigger = true }

// onPenalty applies the responder's rcv_cwnd_pen (0..127): the window is
// capped at maxwnd·(128−pen)/128, so 64 halves it and 127 leaves one packet
// per RTT.
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
