package roce

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/verbs"
)

// Reliability modes.
const (
	GoBackN = "gbn" // InfiniBand RC: in-order responder, NAK-sequence-error, go-back-N
	IRN     = "irn" // IRN: out-of-order placement, 1-block SACK NACKs, selective repeat, BDP-FC
)

// Congestion control modes.
const (
	CCDCQCN  = "dcqcn"
	CCTimely = "timely"
	CCNone   = "none"
)

// Config is one QP's transport configuration. Every duration is in
// nanoseconds and every rate in bits per second. Start from DefaultConfig
// and change fields; Validate names the first bad field.
type Config struct {
	// Plane is the NIC port (plane) the QP uses: EV bits 0..3.
	Plane int
	// SrcPort is the QP's fixed UDP source port; its low 4 bits are
	// replaced by Plane (the EV layout keeps the plane there) and its bits
	// 14..15 are set, so a port below 49152 is raised into 49152..65535.
	// 0 derives a port in 49152..65535 from the QPN and seed.
	SrcPort uint16
	// FlowLabel is the IPv6 flow label (EV bits 16..31); 0 derives one
	// from the QPN and seed.
	FlowLabel uint16
	// PMTU is the path MTU: the payload bytes of a full packet (256, 512,
	// 1024, 2048 or 4096).
	PMTU int
	// LineRateBps is the NIC port rate: the initial and maximum sending
	// rate.
	LineRateBps int64
	// WireOverhead is the bytes a packet occupies on the wire beyond its
	// UDP payload; pacing counts them so that "line rate" equals the
	// port's rate. Default 86: Ethernet 14 + IPv6 40 + UDP 8 + FCS 4 +
	// preamble and IFG 20.
	WireOverhead int

	// Reliability is GoBackN or IRN.
	Reliability string
	// TimeoutNs is the go-back-N local ACK timeout (IRN uses RTOLowNs and
	// RTOHighNs instead).
	TimeoutNs int64
	// RetryCount is how many retries (timeouts, or NAK-sequence errors
	// without progress) the requester makes before it completes the
	// oldest request with RETRY_EXCEEDED and moves to ERROR (IB: 0..7).
	RetryCount int
	// AckEvery is the responder's ACK coalescing: it acknowledges every
	// AckEvery in-order packets, and at once any packet with AckReq set
	// (the requester sets it on the last packet of every message).
	AckEvery int
	// MaxOutstandingPSNs bounds the requester's unacknowledged PSNs (IB:
	// below 2^23).
	MaxOutstandingPSNs int

	IRN IRNConfig

	// CC is CCDCQCN, CCTimely or CCNone (line rate). The responder's
	// notification point (CNP generation) runs when CC is CCDCQCN.
	CC     string
	DCQCN  DCQCNConfig
	Timely TimelyConfig
}

// IRNConfig holds IRN's knobs (Mittal et al., SIGCOMM 2018).
type IRNConfig struct {
	RTOLowNs      int64 // timeout when at most RTOLowPackets are in flight (paper: 100 µs)
	RTOHighNs     int64 // timeout otherwise (paper: 320 µs)
	RTOLowPackets int   // paper: N = 3
	// BDPFC caps the packets in flight (snd_max − snd_una) at BDPBytes /
	// PMTU: new packets wait; retransmissions do not.
	BDPFC    bool
	BDPBytes int64 // 0: LineRateBps × 20 µs
	// NackIntervalNs rate-limits repeated NACKs for an out-of-order PSN
	// already NACKed (ConWeave ns-3: 4 µs).
	NackIntervalNs int64
	// OOOWindow is the responder's out-of-order bitmap, in packets; later
	// packets are dropped. 0: 2 × BDP packets (at least 256).
	OOOWindow int
	// LostRetxDetect retransmits a retransmission again once a packet
	// first sent after it is SACKed (a RoCE flow is pinned to one path,
	// so that proves the retransmission lost) instead of waiting for the
	// RTO. An addition to IRN; set false for the paper's behaviour.
	LostRetxDetect bool
}

// DCQCNConfig holds the reaction point (sender) and notification point
// (receiver) parameters of DCQCN. Both the paper's event model and the
// ConnectX / HPCC ns-3 timer model are expressed by these knobs:
//
//   - AlphaPeriodic false (paper): every CNP cuts the rate at once and
//     updates α = (1−g)α + g; α decays as (1−g)α each AlphaIntervalNs
//     without a CNP.
//   - AlphaPeriodic true (HPCC ns-3 / ConnectX): α is updated every
//     AlphaIntervalNs (up if a CNP arrived in the interval, down
//     otherwise), and the rate is cut at most once per DecreaseIntervalNs.
type DCQCNConfig struct {
	G                  float64 // α gain g
	InitialAlpha       float64 // α before (and, in the timer model, at) the first CNP
	AlphaPeriodic      bool
	AlphaIntervalNs    int64 // τ′ (paper) or the α update period (timer model)
	DecreaseIntervalNs int64 // 0: cut on every CNP (paper); >0: periodic decrease check
	IncreaseTimerNs    int64 // T: the rate-increase timer
	ByteCounter        int64 // B: bytes per byte-counter increase event; 0 disables it
	F                  int   // fast-recovery steps
	RAIBps             int64 // additive increase step
	RHAIBps            int64 // hyper increase step
	MinRateBps         int64
	// ClampTargetRate: on a cut, RT = RC always. false (HPCC CLAMP=0):
	// skip RT = RC when the cut comes before any increase step (stage 0).
	// The paper always clamps.
	ClampTargetRate bool
	// RateOnFirstCNP multiplies the rate at the first CNP (timer model;
	// ConnectX rate_to_set_on_first_cnp; 1 = unchanged, the first
	// periodic decrease then halves it since α = 1).
	RateOnFirstCNP float64
	// CNPIntervalNs: the notification point sends at most one CNP per QP
	// per interval (paper τ = 50 µs; ConnectX min_time_between_cnps 4 µs).
	CNPIntervalNs int64
}

// TimelyConfig holds TIMELY's parameters (Mittal et al., SIGCOMM 2015).
type TimelyConfig struct {
	TLowNs       int64   // below: additive increase regardless of gradient (paper 50 µs)
	THighNs      int64   // above: multiplicative decrease (paper 500 µs)
	MinRTTNs     int64   // normalises the gradient (paper 20 µs)
	EWMAAlpha    float64 // weight of a new RTT difference (paper 0.875)
	Beta         float64 // multiplicative decrease factor (paper 0.8)
	DeltaBps     int64   // additive step δ (paper 10 Mb/s)
	HAIThreshold int     // consecutive non-positive gradients before HAI (paper 5)
	HAIFactor    int     // HAI multiplies δ by this (paper N = 5)
	MinRateBps   int64
	// HPCCStages counts increases as HPCC's ns-3 does (m_incStage): every
	// increase, below T_low too, is a stage, any decrease resets the
	// count, and an increase after HAIThreshold stages adds HAIFactor·δ.
	// false (paper): only non-positive gradients in [T_low, T_high]
	// count, and the HAIThreshold-th of them is the first HAI step.
	HPCCStages bool
}

// DefaultLineRate is DefaultConfig's line rate.
const DefaultLineRate = 100_000_000_000

// DefaultConfig returns a RoCEv2 RC QP at 100 Gb/s: go-back-N, PMTU 4096,
// 524 µs local ACK timeout (IB exponent 7: 4.096 µs × 2^7), 7 retries,
// ACK every 4 packets, DCQCN with the HPCC ns-3 / ConnectX timer preset.
func DefaultConfig() Config {
	c := Config{
		PMTU:               4096,
		LineRateBps:        DefaultLineRate,
		WireOverhead:       86,
		Reliability:        GoBackN,
		TimeoutNs:          4096 << 7,
		RetryCount:         7,
		AckEvery:           4,
		MaxOutstandingPSNs: 1<<23 - 1,
		IRN: IRNConfig{
			RTOLowNs:       100_000,
			RTOHighNs:      320_000,
			RTOLowPackets:  3,
			BDPFC:          true,
			NackIntervalNs: 4_000,
			LostRetxDetect: true,
		},
		CC: CCDCQCN,
	}
	c.DCQCN = DCQCNHPCC(c.LineRateBps)
	c.Timely = TimelyHPCC(c.LineRateBps)
	return c
}

// DCQCNSigcomm15 returns the DCQCN paper's event model and defaults (Zhu
// et al., SIGCOMM 2015; PROTOCOLS.md §e, TARGETS T10): every CNP cuts at
// once, g = 1/256, CNP interval τ = 50 µs, α timer τ′ = 55 µs,
// rate-increase timer T = 55 µs, byte counter B = 10 MB, F = 5, R_AI =
// 40 Mb/s. R_HAI is not given there: 400 Mb/s (10 × R_AI, QCN's ratio) is
// this package's assumption, as is MinRate 1 Gb/s (the HPCC ns-3 value).
// This is not HPCC run.py's "dcqcn_paper" (DCQCNHPCCPaper).
func DCQCNSigcomm15() DCQCNConfig {
	return DCQCNConfig{
		G:               1.0 / 256,
		InitialAlpha:    1,
		AlphaIntervalNs: 55_000,
		IncreaseTimerNs: 55_000,
		ByteCounter:     10_000_000,
		F:               5,
		RAIBps:          40_000_000,
		RHAIBps:         400_000_000,
		MinRateBps:      1_000_000_000,
		ClampTargetRate: true,
		RateOnFirstCNP:  1,
		CNPIntervalNs:   50_000,
	}
}

// DCQCNHPCC returns the DCQCN preset of HPCC's ns-3 run.py ("dcqcn";
// PROTOCOLS.md §e), which follows ConnectX firmware: timers only (no byte
// counter), α update 1 µs, decrease check 4 µs, increase timer 300 µs,
// g = 1/256, F = 1, R_AI = 5 Mb/s × bw/25G, R_HAI = 50 Mb/s × bw/25G,
// MinRate 1 Gb/s, CLAMP = 0. The CNP interval (4 µs) is ConnectX's
// min_time_between_cnps, where ns-3 flags every ECN-marked packet's ACK.
// The decrease check limits the cuts to one per 4 µs either way, but not
// α: under sustained marking ns-3's α (updated every 1 µs, up in every
// interval a flagged ACK arrives in) stays near 1, while with a CNP at
// most every 4 µs it settles near g(1−g)³/(1−(1−g)⁴) ≈ 0.25
// (TestDCQCNTimerAlphaCNPGap), so long congestion cuts less deeply here
// than in ns-3. Short episodes start from α = 1 in both.
func DCQCNHPCC(lineRateBps int64) DCQCNConfig {
	return DCQCNConfig{
		G:                  1.0 / 256,
		InitialAlpha:       1,
		AlphaPeriodic:      true,
		AlphaIntervalNs:    1_000,
		DecreaseIntervalNs: 4_000,
		IncreaseTimerNs:    300_000,
		F:                  1,
		RAIBps:             scaleRate(5_000_000, lineRateBps),
		RHAIBps:            scaleRate(50_000_000, lineRateBps),
		MinRateBps:         1_000_000_000,
		RateOnFirstCNP:     1,
		CNPIntervalNs:      4_000,
	}
}

// DCQCNHPCCPaper returns HPCC run.py's "dcqcn_paper": DCQCNHPCC (the same
// timer model, F = 1, scaled R_AI/R_HAI, CLAMP = 0) with the paper's
// timer values: α update 50 µs, decrease check 50 µs, increase timer
// 55 µs.
func DCQCNHPCCPaper(lineRateBps int64) DCQCNConfig {
	d := DCQCNHPCC(lineRateBps)
	d.AlphaIntervalNs, d.DecreaseIntervalNs, d.IncreaseTimerNs = 50_000, 50_000, 55_000
	return d
}

// scaleRate returns step × rate / 25 Gb/s, rounded down: a step given per
// 25G of line rate (HPCC's model) scaled to rate. The product is formed in
// 128 bits: step × rate overflows int64 above 184 Gb/s for a 50 Mb/s step
// (1.845 Tb/s for 5 Mb/s). It is exactly the int64 formula wherever that
// did not overflow; a rate that is not positive (which Validate rejects)
// gives 0.
func scaleRate(step, rate int64) int64 {
	if rate <= 0 || step <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(step), uint64(rate))
	q, _ := bits.Div64(hi, lo, 25_000_000_000) // step ≤ 25G keeps q below 2^63
	return int64(q)
}

// DCQCNAggressive returns base made more aggressive, for T6's "more" and
// "most aggressive" settings (which the paper does not spell out: these
// are this package's choices, a geometric progression): level 1 makes g
// 4× larger and recovery 2× slower (increase timer ×2, R_AI and R_HAI
// /2); level 2 makes g 16× larger and recovery 4× slower. A larger g keeps
// α high, so each cut is deeper. Level 0 (or less) returns base.
func DCQCNAggressive(base DCQCNConfig, level int) DCQCNConfig {
	if level <= 0 {
		return base
	}
	gf, slow := 4.0, int64(2)
	if level >= 2 {
		gf, slow = 16, 4
	}
	base.G = min(1, base.G*gf)
	base.IncreaseTimerNs *= slow
	base.RAIBps /= slow
	base.RHAIBps /= slow
	return base
}

// TimelySigcomm15 returns TIMELY's parameters from the paper (Mittal et
// al., SIGCOMM 2015, measured on 10G NICs): T_low 50 µs, T_high 500 µs,
// minRTT 20 µs, EWMA α 0.875, β 0.8, δ 10 Mb/s, HAI (5δ) from the 5th
// consecutive non-positive gradient; MinRate 1 Gb/s (HPCC ns-3). δ is not
// scaled with the line rate. The paper updates once per completion event;
// this package once per RTT.
func TimelySigcomm15() TimelyConfig {
	return TimelyConfig{
		TLowNs:       50_000,
		THighNs:      500_000,
		MinRTTNs:     20_000,
		EWMAAlpha:    0.875,
		Beta:         0.8,
		DeltaBps:     10_000_000,
		HAIThreshold: 5,
		HAIFactor:    5,
		MinRateBps:   1_000_000_000,
	}
}

// TimelyHPCC returns TIMELY as HPCC's ns-3 runs it (run.py "timely",
// rdma-hw.cc UpdateRateTimely): the paper's T_low 50 µs, T_high 500 µs,
// minRTT 20 µs, α 0.875 and β 0.8 (rdma-hw.cc defaults, which run.py does
// not scale), δ = RATE_AI = bw Mb/s per Gb/s of line rate (rate/1000),
// HAI = RATE_HAI = 5·bw Mb/s (5δ), MinRate 1 Gb/s, and its stage count:
// every increase counts (below T_low too), any decrease resets it, and
// the 6th increase in a row on is HAI (m_incStage ≥ 5).
func TimelyHPCC(lineRateBps int64) TimelyConfig {
	t := TimelySigcomm15()
	t.DeltaBps = max(lineRateBps/1000, 1)
	t.HPCCStages = true
	return t
}

// Presets lists the names SetPreset accepts; each is named after its
// source.
func Presets() []string {
	return []string{"dcqcn_hpcc", "dcqcn_hpcc_paper", "dcqcn_sigcomm15", "dcqcn_hpcc_g4_slow2", "dcqcn_hpcc_g16_slow4",
		"timely_hpcc", "timely_sigcomm15", "none"}
}

// RenamedPresets maps each preset name that was given up to what the
// name meant and where that is now. They are refused rather than kept as
// aliases: "dcqcn_paper" was the DCQCN paper's event model, which HPCC's
// run.py "dcqcn_paper" (a different preset) is not, so a result under the
// old name could be mistaken for the other.
func RenamedPresets() map[string]string {
	return map[string]string{
		"dcqcn_paper":           `was the DCQCN paper's event model, now "dcqcn_sigcomm15"; HPCC run.py's "dcqcn_paper" is "dcqcn_hpcc_paper"`,
		"dcqcn_aggressive":      `is now "dcqcn_hpcc_g4_slow2" (dcqcn_hpcc with g ×4, recovery 2× slower)`,
		"dcqcn_most_aggressive": `is now "dcqcn_hpcc_g16_slow4" (dcqcn_hpcc with g ×16, recovery 4× slower)`,
		"timely":                `was the TIMELY paper's values, now "timely_sigcomm15"; HPCC's line-rate-scaled TIMELY is "timely_hpcc"`,
	}
}

// SetPreset sets the congestion control to a named preset (Presets),
// using the configured LineRateBps for rate-dependent values:
// "dcqcn_hpcc" (DCQCNHPCC, the default), "dcqcn_hpcc_paper"
// (DCQCNHPCCPaper), "dcqcn_sigcomm15" (DCQCNSigcomm15),
// "dcqcn_hpcc_g4_slow2" and "dcqcn_hpcc_g16_slow4" (DCQCNAggressive
// levels 1 and 2 of dcqcn_hpcc), "timely_hpcc" (TimelyHPCC),
// "timely_sigcomm15" (TimelySigcomm15), "none". A renamed preset
// (RenamedPresets) is refused with its new name.
func (c *Config) SetPreset(name string) error {
	switch name {
	case "dcqcn_hpcc":
		c.CC, c.DCQCN = CCDCQCN, DCQCNHPCC(c.LineRateBps)
	case "dcqcn_hpcc_paper":
		c.CC, c.DCQCN = CCDCQCN, DCQCNHPCCPaper(c.LineRateBps)
	case "dcqcn_sigcomm15":
		c.CC, c.DCQCN = CCDCQCN, DCQCNSigcomm15()
	case "dcqcn_hpcc_g4_slow2":
		c.CC, c.DCQCN = CCDCQCN, DCQCNAggressive(DCQCNHPCC(c.LineRateBps), 1)
	case "dcqcn_hpcc_g16_slow4":
		c.CC, c.DCQCN = CCDCQCN, DCQCNAggressive(DCQCNHPCC(c.LineRateBps), 2)
	case "timely_hpcc":
		c.CC, c.Timely = CCTimely, TimelyHPCC(c.LineRateBps)
	case "timely_sigcomm15":
		c.CC, c.Timely = CCTimely, TimelySigcomm15()
	case "none":
		c.CC = CCNone
	default:
		if why, ok := RenamedPresets()[name]; ok {
			return &ConfigError{Field: "preset", Reason: fmt.Sprintf("%q %s (have %v)", name, why, Presets())}
		}
		return &ConfigError{Field: "preset", Reason: fmt.Sprintf("unknown preset %q (have %v)", name, Presets())}
	}
	return nil
}

// ConfigError is a Validate failure naming the field.
type ConfigError struct {
	Field, Reason string
}

func (e *ConfigError) Error() string { return "roce: config " + e.Field + ": " + e.Reason }

// BDPBytes returns the BDP-FC limit in bytes (IRN.BDPBytes or its default).
func (c *Config) BDPBytes() int64 {
	if c.IRN.BDPBytes > 0 {
		return c.IRN.BDPBytes
	}
	return c.LineRateBps / 8 * 20 / 1_000_000 // 20 µs
}

func (c *Config) bdpPackets() int {
	n := int((c.BDPBytes() + int64(c.PMTU) - 1) / int64(c.PMTU))
	return max(n, 1)
}

func (c *Config) oooWindow() int {
	w := c.IRN.OOOWindow
	if w <= 0 {
		w = max(2*c.bdpPackets(), 256)
	}
	// a power of two
	p := 64
	for p < w {
		p <<= 1
	}
	return p
}

// Validate checks every field and returns a *ConfigError naming the first
// bad one.
func (c *Config) Validate() error {
	bad := func(f, r string, a ...any) error { return &ConfigError{Field: f, Reason: fmt.Sprintf(r, a...)} }
	switch {
	case c.Plane < 0 || c.Plane > 15:
		return bad("Plane", "%d outside 0..15", c.Plane)
	case !slices.Contains([]int{256, 512, 1024, 2048, 4096}, c.PMTU):
		return bad("PMTU", "%d is not 256, 512, 1024, 2048 or 4096", c.PMTU)
	case c.LineRateBps <= 0:
		return bad("LineRateBps", "must be positive")
	case c.WireOverhead < 0:
		return bad("WireOverhead", "must not be negative")
	case c.Reliability != GoBackN && c.Reliability != IRN:
		return bad("Reliability", "%q is not %q or %q", c.Reliability, GoBackN, IRN)
	case c.TimeoutNs <= 0:
		return bad("TimeoutNs", "must be positive")
	case c.RetryCount < 0 || c.RetryCount > 7:
		return bad("RetryCount", "%d outside 0..7", c.RetryCount)
	case c.AckEvery < 1:
		return bad("AckEvery", "must be at least 1")
	case c.MaxOutstandingPSNs < 1 || c.MaxOutstandingPSNs >= 1<<23:
		return bad("MaxOutstandingPSNs", "%d outside 1..2^23-1", c.MaxOutstandingPSNs)
	}
	if c.Reliability == IRN {
		i := &c.IRN
		switch {
		case i.RTOLowNs <= 0:
			return bad("IRN.RTOLowNs", "must be positive")
		case i.RTOHighNs < i.RTOLowNs:
			return bad("IRN.RTOHighNs", "must be at least RTOLowNs")
		case i.RTOLowPackets < 0:
			return bad("IRN.RTOLowPackets", "must not be negative")
		case i.BDPBytes < 0:
			return bad("IRN.BDPBytes", "must not be negative")
		case i.BDPFC && c.BDPBytes() < int64(c.PMTU):
			return bad("IRN.BDPBytes", "%d below one PMTU", c.BDPBytes())
		case i.NackIntervalNs < 0:
			return bad("IRN.NackIntervalNs", "must not be negative")
		case i.OOOWindow < 0 || i.OOOWindow > 1<<22:
			return bad("IRN.OOOWindow", "%d outside 0..2^22", i.OOOWindow)
		}
	}
	switch c.CC {
	case CCDCQCN:
		d := &c.DCQCN
		switch {
		case !(d.G > 0 && d.G <= 1):
			return bad("DCQCN.G", "%v outside (0, 1]", d.G)
		case !(d.InitialAlpha >= 0 && d.InitialAlpha <= 1):
			return bad("DCQCN.InitialAlpha", "%v outside [0, 1]", d.InitialAlpha)
		case d.AlphaIntervalNs <= 0:
			return bad("DCQCN.AlphaIntervalNs", "must be positive")
		case d.DecreaseIntervalNs < 0:
			return bad("DCQCN.DecreaseIntervalNs", "must not be negative")
		case d.AlphaPeriodic && d.DecreaseIntervalNs == 0:
			return bad("DCQCN.DecreaseIntervalNs", "must be positive when AlphaPeriodic")
		case d.IncreaseTimerNs <= 0:
			return bad("DCQCN.IncreaseTimerNs", "must be positive")
		case d.ByteCounter < 0:
			return bad("DCQCN.ByteCounter", "must not be negative")
		case d.F < 0:
			return bad("DCQCN.F", "must not be negative")
		case d.RAIBps < 0:
			return bad("DCQCN.RAIBps", "must not be negative")
		case d.RHAIBps < 0:
			return bad("DCQCN.RHAIBps", "must not be negative")
		case d.MinRateBps <= 0 || d.MinRateBps > c.LineRateBps:
			return bad("DCQCN.MinRateBps", "%d outside (0, LineRateBps]", d.MinRateBps)
		case !(d.RateOnFirstCNP > 0 && d.RateOnFirstCNP <= 1):
			return bad("DCQCN.RateOnFirstCNP", "%v outside (0, 1]", d.RateOnFirstCNP)
		case d.CNPIntervalNs < 0:
			return bad("DCQCN.CNPIntervalNs", "must not be negative")
		}
	case CCTimely:
		t := &c.Timely
		switch {
		case t.TLowNs <= 0:
			return bad("Timely.TLowNs", "must be positive")
		case t.THighNs <= t.TLowNs:
			return bad("Timely.THighNs", "must exceed TLowNs")
		case t.MinRTTNs <= 0:
			return bad("Timely.MinRTTNs", "must be positive")
		case !(t.EWMAAlpha > 0 && t.EWMAAlpha <= 1):
			return bad("Timely.EWMAAlpha", "%v outside (0, 1]", t.EWMAAlpha)
		case !(t.Beta > 0 && t.Beta <= 1):
			return bad("Timely.Beta", "%v outside (0, 1]", t.Beta)
		case t.DeltaBps <= 0:
			return bad("Timely.DeltaBps", "must be positive")
		case t.HAIThreshold < 1:
			return bad("Timely.HAIThreshold", "must be at least 1")
		case t.HAIFactor < 1:
			return bad("Timely.HAIFactor", "must be at least 1")
		case t.MinRateBps <= 0 || t.MinRateBps > c.LineRateBps:
			return bad("Timely.MinRateBps", "%d outside (0, LineRateBps]", t.MinRateBps)
		}
	case CCNone:
	default:
		return bad("CC", "%q is not %q, %q or %q", c.CC, CCDCQCN, CCTimely, CCNone)
	}
	return nil
}

// The run configuration's section transport.roce is Settings: package
// config holds it in TransportConfig and decodes it with its tags, this
// package owns its fields, defaults (SetDefaults) and rules (Validate), and
// the cluster turns it into a Config (cluster.RoCEConfig).

// MaxTimeout bounds transport.roce.timeout.
const MaxTimeout = time.Second

// Settings is the RoCEv2 baseline's knobs.
type Settings struct {
	// Reliability is "gbn" (go-back-N, as RoCE NICs) or "irn" (selective
	// repeat with 1-block SACK NACKs).
	Reliability string `mapstructure:"reliability" yaml:"reliability" json:"reliability"`
	// CC is a congestion-control preset, named after its source:
	// dcqcn_hpcc (HPCC ns-3 run.py "dcqcn"), dcqcn_hpcc_paper (run.py
	// "dcqcn_paper"), dcqcn_sigcomm15 (the DCQCN paper's event model),
	// dcqcn_hpcc_g4_slow2 and dcqcn_hpcc_g16_slow4 (dcqcn_hpcc with g ×4
	// / ×16 and recovery 2× / 4× slower), timely_hpcc (run.py "timely",
	// scaled with the line rate), timely_sigcomm15 (the TIMELY paper's
	// values) or none. The old names dcqcn_paper, dcqcn_aggressive,
	// dcqcn_most_aggressive and timely are refused with their successors.
	CC string `mapstructure:"cc" yaml:"cc" json:"cc"`
	// Timeout overrides the go-back-N local ACK timeout; "" keeps the
	// default.
	Timeout string `mapstructure:"timeout" yaml:"timeout" json:"timeout"`
	// RetryCount is the retries before the QP errors: 0..7.
	RetryCount int `mapstructure:"retryCount" yaml:"retryCount" json:"retryCount"`
	// IRNBDPFactor sets IRN's BDP flow-control cap in bandwidth-delay
	// products of the fabric (base RTT plus the responder's ACK
	// coalescing): 1, the IRN paper's, by default; 2 gives the sender room
	// for the second RTT a hole takes to repair; 0 turns BDP-FC off.
	IRNBDPFactor float64 `mapstructure:"irnBDPFactor" yaml:"irnBDPFactor" json:"irnBDPFactor"`
}

// SetDefaults sets the documented defaults: go-back-N, dcqcn_hpcc, the
// package's timeout, 7 retries, one BDP of IRN flow control.
func (s *Settings) SetDefaults() {
	*s = Settings{Reliability: GoBackN, CC: "dcqcn_hpcc", RetryCount: 7, IRNBDPFactor: 1}
}

// Validate checks every field, reporting to check (paths relative to the
// section). A renamed preset (RenamedPresets) is refused with what it
// meant and its successor, so an old name never silently means another.
func (s *Settings) Validate(check verbs.SectionChecker) {
	check.OneOf("reliability", s.Reliability, GoBackN, IRN)
	cc := s.CC
	if why, renamed := RenamedPresets()[cc]; renamed {
		check.Invalid("cc", fmt.Sprintf("%q is no longer a preset name: it %s; must be one of %s", cc, why, quoteAll(Presets())), cc)
		cc = Presets()[0] // reported; the rule is still recorded below
	}
	check.OneOf("cc", cc, Presets()...)
	check.OptionalDuration("timeout", s.Timeout, MaxTimeout)
	check.Note("timeout", `or "": package roce's default`)
	check.IntRange("retryCount", s.RetryCount, 0, 7)
	f := s.IRNBDPFactor
	check.Float("irnBDPFactor", f, "{0} ∪ [0.25, 16]", f == 0 || f >= 0.25 && f <= 16, "must be 0 (BDP-FC off) or in [0.25, 16]")
	check.Note("irnBDPFactor", "0 turns IRN's BDP-FC off; 1 is the IRN paper's cap")
	check.Unit("irnBDPFactor", "BDPs")
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}
