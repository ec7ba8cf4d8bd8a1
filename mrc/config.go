package mrc

import (
	"fmt"
	"math"
	"time"

	"github.com/vcluster/vcluster/verbs"
)

// Config is one MRC QP's configuration. DefaultConfig documents every
// default; Validate names the first bad field.
type Config struct {
	// --- spraying and EV management ---

	// Planes is the number of NIC ports / fabric planes (1..16). EVs carry
	// the plane in bits 0..3.
	Planes int
	// PathsPerPlane is the number of explicit path choices per plane (the
	// T1 count of a Clos under uSID forwarding, EV bits 4..13, at most
	// MaxPathChoices). With
	// PathsPerPlane > 0 EVs are structured: plane + path choice, so each EV
	// names one path (and an ASSUMED_BAD EV one bad path); when a plane has
	// more EVs than paths, EVs of the same path differ in their flow-label
	// bits. 0 means ECMP mode: the choice and label bits are random entropy.
	PathsPerPlane int
	// EVsPerQP is the size of the QP's EV pool (128..256), split as equally
	// as possible across planes.
	EVsPerQP int
	// ActiveSetSize is how many EVs are sprayed over at once, split across
	// planes; the rest of each plane's pool is its backup. 0 (the default)
	// derives it: 2 BDP in packets (LinkBps × BaseRTT / PMTU), capped at 100
	// (more brings little) and at EVsPerQP, at least one per plane — 100
	// for 400 Gb/s and 10 µs.
	ActiveSetSize int
	// EVMinActive is the floor of usable (GOOD or SKIP) EVs: an EV that
	// would go ASSUMED_BAD below it goes to SKIP instead.
	EVMinActive int
	// ReshuffleInterval (ns) is how often a plane's pseudo-random scan order
	// is reshuffled (checked at each rotation of its active set).
	ReshuffleInterval int64
	// SkipDuration (ns) is the minimum time an EV stays in SKIP; it returns
	// to GOOD at the first rotation of its plane's active set after that. 0:
	// the next rotation.
	SkipDuration int64
	// ProbeInterval (ns) is how often each ASSUMED_BAD EV is probed.
	ProbeInterval int64
	// EVLossThreshold is the number of consecutive silent losses detected by
	// the fast-loss rule (not timeouts) after which an EV goes ASSUMED_BAD.
	// A timeout marks the EV at once, as the spec says.
	EVLossThreshold int

	// --- reliability ---

	// PMTU is the payload bytes per packet (256..4096).
	PMTU int
	// MPR is the maximum PSN range offered to the peer, in units of 128
	// PSNs (1..255). It bounds both the receive window and what the
	// requester sends beyond cack. Default 1 unit (128 PSNs = 512 KiB), the
	// spec's. The requester follows the MPR of the latest SACK (Dynamic
	// MPR), never beyond the value negotiated at Connect. At 400 Gb/s and
	// 10 µs one unit (≈ 1.05 BDP) caps a QP below line rate: that is the
	// protocol's behaviour (docs/transports.md has the numbers); 4 units
	// leave room for NSCC's maxwnd (1.5 BDP) plus repair while a hole is
	// outstanding.
	MPR int
	// MaxWImm bounds the WriteImm operations in flight (the value offered
	// to the peer and the default limit toward it). Default 16.
	MaxWImm int
	// SackThresholdBytes: the responder sends a SACK once this many bytes
	// arrived since the last one.
	SackThresholdBytes int
	// Timeout is the local ACK timeout exponent: RTO = 1.024 µs × 2^Timeout
	// (0..24; the spec gives only this formula). Default 5 = 32.768 µs,
	// about 3 RTTs of a 10 µs fabric. The cluster always sets RTO instead,
	// from the path (cluster.DefaultRTO).
	Timeout int
	// RTO, when > 0, overrides Timeout with a retransmission timeout in ns.
	RTO int64
	// RetryLinear (0..7) and RetryExp (0..25) are the retry limits: a
	// packet's timer is the base RTO for its first RetryLinear timeouts,
	// then doubles per timeout (a retransmission's timer starts from the
	// base RTO; the backoff follows that packet's own attempts). RetryExp 25
	// means retry forever. Defaults 7 and 5: the QP fails
	// (StatusRetryExceeded) at the 13th retry its RetryScope counts.
	RetryLinear int
	RetryExp    int
	// RetryScope is what counts ACK timeouts toward the limit (the
	// retry-counting NACKs NO_BITMAP, NO_PKT_BUFFER, NO_RESOURCE and
	// PSN_OOR_WINDOW count toward the refused packet's own limit under
	// either, restarting when cack moves past it). RetryConnection (the default, the spec's): one counter per
	// QP, reset on forward progress — a PSN newly acknowledged, by the
	// cumulative ack or the SACK bitmap (the spec text is silent on the
	// reset; RoCE/IB reset theirs on progress) — so 13 timeouts without
	// progress fail the QP, however many packets they belong to. (Reset on
	// cumulative progress only, a packet sprayed onto a dead plane or a
	// burst of losses under reordering fails a QP whose other paths work.) RetryPacket: each packet counts its own, and
	// a packet fails the QP at its 13th timeout, 8 + 2 + 4 + 8 + 16 + 32 =
	// 70 RTOs after it was first sent. Under either, a packet found lost
	// keeps its clock running while it waits for a retransmission it
	// cannot get (no plane, no EV), and a QP with work, nothing outstanding
	// and no path runs the same schedule itself: when every path is gone
	// the QP fails, it does not wait forever.
	RetryScope RetryScope
	// LossDetection selects the fast-loss rule: LossOOO (the default, [I]
	// SLEEK as in htsim's runSleek) or LossPerHole (vcluster's earlier
	// per-packet rule). See the package documentation.
	LossDetection LossDetection
	// SleekFactor and SleekMinPackets parametrise the fast-loss threshold
	// max(SleekMinPackets, min(SleekFactor·cwnd, maxwnd)) packets: under
	// LossOOO, the responder's out-of-order count (CC_STATE) reaching it
	// starts loss recovery; under LossPerHole, an unacknowledged packet is
	// lost once that many packets sent after it have been acknowledged.
	SleekFactor     float64
	SleekMinPackets int
	// TLPFactor arms the tail-loss probe: when data is in flight, nothing
	// waits for retransmission, and for TLPFactor × the smoothed RTT (the
	// base RTT before the first sample) no data was sent and nothing new
	// acknowledged, the last unacknowledged packet is sent again — once per
	// such silence; its acknowledgement marks every packet sent before it
	// and still missing as lost. It repairs losses too close to the end of
	// a message for the fast-loss rule in about 3 RTTs instead of an RTO.
	// Default 2; 0 turns the probe off; at most 64.
	TLPFactor float64
	// TrimReaction enables the requester's reaction to TRIMMED NACKs (EV →
	// SKIP and NSCC's trim decrease); retransmission happens regardless.
	TrimReaction bool
	// CtrlQueue is the capacity of the queue of control packets waiting for
	// Send (a power of two); beyond it control packets are dropped.
	CtrlQueue int

	// --- NSCC ---

	// LinkBps is the NIC's aggregate rate across planes (e.g. 4×100G).
	LinkBps int64
	// BaseRTT is the fabric's unloaded RTT in ns (NSCC base_rtt; the
	// measured minimum replaces it when lower).
	BaseRTT int64
	// Trimming says the fabric trims: NSCC's target delay is 0.75 RTT with
	// trimming, 1 RTT without.
	Trimming bool
	// DisableCC turns congestion control off (cwnd stays at maxwnd).
	DisableCC bool
	// NSCC overrides the derived NSCC constants; zero fields are derived.
	NSCC NSCCConfig
	// Responder bounds the responder's resources (see ResponderConfig).
	Responder ResponderConfig
}

// NSCCConfig holds the NSCC constants under the names of mrc_ctl.h /
// htsim. A zero field means "derived from LinkBps and BaseRTT" (see
// DefaultConfig); set a field to override it.
type NSCCConfig struct {
	DisableQA             bool
	AdjustBytesThreshold  int64   // fulfill after this many bytes acked (default 8 MTU)
	AdjustPeriodThreshold int64   // … or after this many ns (default BaseRTT)
	BaseRTT               int64   // ns; overrides Config.BaseRTT
	Eta                   float64 // bytes added per adjust period (0.15·MSS·a)
	Fi                    float64 // fair-increase gain (5·MSS·a)
	FiScale               float64 // fast-increase gain (0.25·a)
	Gamma                 float64 // multiplicative-decrease gain (0.8)
	MaxMDJump             float64 // largest fraction one decrease removes (0.5)
	MaxCwnd               int64   // bytes; overrides maxwnd = 1.5·BDP
	QAGate                int     // quick adapt fires if achieved < maxwnd >> QAGate (3)
	QAThreshold           int64   // ns of queueing delay that triggers quick adapt (4·target)
	TargetDelay           int64   // ns (0.75·BaseRTT with trimming, else BaseRTT)
	Alpha                 float64 // proportional-increase gain (4·MSS·a·b/target)
	DelayAlpha            float64 // avg_delay EWMA weight (0.0125)
}

// RetryScope says what the retry limit counts (Config.RetryScope).
type RetryScope string

const (
	// RetryConnection: one counter of ACK timeouts per QP (the spec's),
	// reset whenever a PSN is newly acknowledged.
	RetryConnection RetryScope = "connection"
	// RetryPacket: each packet's own timeouts.
	RetryPacket RetryScope = "packet"
)

// LossDetection names the fast-loss rule (Config.LossDetection).
type LossDetection string

const (
	// LossOOO is SLEEK as the spec digest and htsim define it: when the
	// out-of-order count in a SACK's CC_STATE reaches the threshold, enter
	// loss recovery and retransmit the unacknowledged PSNs from cack up to
	// one cwnd.
	LossOOO LossDetection = "ooo"
	// LossPerHole: a packet is lost once packets sent threshold later were
	// acknowledged (vcluster's earlier rule).
	LossPerHole LossDetection = "per-hole"
)

// DefaultConfig returns the defaults: 4 planes of a 400 Gb/s NIC, 10 µs
// base RTT, ECMP-mode EVs (PathsPerPlane 0), 128 EVs with an active set of
// min(2 BDP, 100) packets and a floor of 8, reshuffle every 100 µs,
// next-rotation SKIP, probes of ASSUMED_BAD EVs every 500 µs, PMTU 4096,
// MPR 1 unit, MaxWImm 16, SACK every 16 KiB, RTO 32.768 µs (Timeout 5),
// retries 7 linear + 5 exponential counted per connection, SLEEK on the
// out-of-order count with a threshold of 1.5·cwnd and a 5-packet minimum, tail-loss probe after 2 smoothed RTTs, trim reaction on, NSCC
// constants derived (see ResolveNSCC).
//
// MaxWImm 16 is a responder-resource default: with 64 KiB or larger
// WriteImm chunks it covers several BDPs; workloads of many small
// WriteImms on long-RTT paths need more (Little's law: MaxWImm ≥ RTT ×
// WriteImm rate).

func DefaultConfig() Config {
	return Config{
		Planes:             4,
		PathsPerPlane:      0,
		EVsPerQP:           128,
		ActiveSetSize:      0,
		EVMinActive:        8,
		ReshuffleInterval:  100_000,
		SkipDuration:       0,
		ProbeInterval:      500_000,
		EVLossThreshold:    2,
		PMTU:               4096,
		MPR:                1,
		MaxWImm:            16,
		SackThresholdBytes: 16 << 10,
		Timeout:            5,
		RetryLinear:        7,
		RetryExp:           5,
		RetryScope:         RetryConnection,
		LossDetection:      LossOOO,
		SleekFactor:        1.5,
		SleekMinPackets:    5,
		TLPFactor:          2,
		TrimReaction:       true,
		CtrlQueue:          1024,
		LinkBps:            400e9,
		BaseRTT:            10_000,
		Trimming:           true,
	}
}

// Validate reports the first invalid field.
func (c *Config) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("mrc: Config.%s %s", field, why) }
	switch {
	case c.Planes < 1 || c.Planes > 16:
		return bad("Planes", "must be 1..16")
	case c.PathsPerPlane < 0 || c.PathsPerPlane > MaxPathChoices:
		return bad("PathsPerPlane", fmt.Sprintf("must be 0..%d (EV bits 4..13)", MaxPathChoices))
	case c.EVsPerQP < 128 || c.EVsPerQP > 256:
		return bad("EVsPerQP", "must be 128..256")
	case c.ActiveSetSize != 0 && (c.ActiveSetSize < c.Planes || c.ActiveSetSize > c.EVsPerQP):
		return bad("ActiveSetSize", "must be 0 (derived) or Planes..EVsPerQP")
	case c.EVMinActive < 1 || c.EVMinActive > c.EVsPerQP:
		return bad("EVMinActive", "must be 1..EVsPerQP")
	case c.ReshuffleInterval < 0:
		return bad("ReshuffleInterval", "must be ≥ 0")
	case c.SkipDuration < 0:
		return bad("SkipDuration", "must be ≥ 0")
	case c.ProbeInterval <= 0:
		return bad("ProbeInterval", "must be > 0")
	case c.EVLossThreshold < 1 || c.EVLossThreshold > 255:
		return bad("EVLossThreshold", "must be 1..255")
	case c.PMTU < MinPMTU || c.PMTU > MaxPMTU:
		return bad("PMTU", "must be 256..4096")
	case c.MPR < 1 || c.MPR > 255:
		return bad("MPR", "must be 1..255 (units of 128 PSNs)")
	case c.MaxWImm < 1 || c.MaxWImm > 1<<16:
		return bad("MaxWImm", "must be 1..65536")
	case c.SackThresholdBytes < 1:
		return bad("SackThresholdBytes", "must be > 0")
	case c.Timeout < 0 || c.Timeout > 24:
		return bad("Timeout", "must be 0..24")
	case c.RTO < 0:
		return bad("RTO", "must be ≥ 0")
	case c.RetryLinear < 0 || c.RetryLinear > 7:
		return bad("RetryLinear", "must be 0..7")
	case c.RetryExp < 0 || c.RetryExp > 25:
		return bad("RetryExp", "must be 0..25 (25 = infinite)")
	case c.RetryScope != RetryConnection && c.RetryScope != RetryPacket:
		return bad("RetryScope", fmt.Sprintf("is %q, must be %q or %q", c.RetryScope, RetryConnection, RetryPacket))
	case c.LossDetection != LossOOO && c.LossDetection != LossPerHole:
		return bad("LossDetection", fmt.Sprintf("is %q, must be %q or %q", c.LossDetection, LossOOO, LossPerHole))
	case !(c.SleekFactor > 0) || math.IsInf(c.SleekFactor, 1):
		return bad("SleekFactor", "must be a finite number > 0")
	case c.SleekMinPackets < 1:
		return bad("SleekMinPackets", "must be ≥ 1")
	case !(c.TLPFactor >= 0 && c.TLPFactor <= 64): // NaN fails too
		return bad("TLPFactor", "must be in [0, 64] (0: no tail-loss probe)")
	case c.CtrlQueue < 16 || c.CtrlQueue&(c.CtrlQueue-1) != 0:
		return bad("CtrlQueue", "must be a power of two ≥ 16")
	case c.LinkBps <= 0:
		return bad("LinkBps", "must be > 0")
	case c.BaseRTT <= 0 && c.NSCC.BaseRTT <= 0:
		return bad("BaseRTT", "must be > 0")
	}
	if err := c.Responder.validate(); err != nil {
		return err
	}
	n := &c.NSCC
	switch {
	case n.AdjustBytesThreshold < 0:
		return bad("NSCC.AdjustBytesThreshold", "must be ≥ 0")
	case n.AdjustPeriodThreshold < 0:
		return bad("NSCC.AdjustPeriodThreshold", "must be ≥ 0")
	case n.BaseRTT < 0:
		return bad("NSCC.BaseRTT", "must be ≥ 0")
	case !finiteNonNeg(n.Eta), !finiteNonNeg(n.Fi), !finiteNonNeg(n.FiScale), !finiteNonNeg(n.Alpha):
		return bad("NSCC gains (Eta, Fi, FiScale, Alpha)", "must be finite and ≥ 0")
	case !(n.Gamma >= 0 && n.Gamma <= 1): // NaN fails too
		return bad("NSCC.Gamma", "must be 0..1")
	case !(n.MaxMDJump >= 0 && n.MaxMDJump < 1):
		return bad("NSCC.MaxMDJump", "must be in [0, 1)")
	case n.MaxCwnd < 0:
		return bad("NSCC.MaxCwnd", "must be ≥ 0")
	case n.QAGate < 0 || n.QAGate > 16:
		return bad("NSCC.QAGate", "must be 0..16")
	case n.QAThreshold < 0:
		return bad("NSCC.QAThreshold", "must be ≥ 0")
	case n.TargetDelay < 0:
		return bad("NSCC.TargetDelay", "must be ≥ 0")
	case !(n.DelayAlpha >= 0 && n.DelayAlpha <= 1):
		return bad("NSCC.DelayAlpha", "must be 0..1")
	}
	return nil
}

// finiteNonNeg reports whether x is a number in [0, +Inf).
func finiteNonNeg(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }

// activeSetSize resolves ActiveSetSize.
func (c *Config) activeSetSize() int {
	if c.ActiveSetSize > 0 {
		return c.ActiveSetSize
	}
	rtt := c.BaseRTT
	if c.NSCC.BaseRTT > 0 {
		rtt = c.NSCC.BaseRTT
	}
	n := int(2 * float64(c.LinkBps) / 8 * float64(rtt) / 1e9 / float64(c.PMTU))
	return max(c.Planes, min(n, 100, c.EVsPerQP))
}

// rto returns the base retransmission timeout in ns.
func (c *Config) rto() int64 {
	if c.RTO > 0 {
		return c.RTO
	}
	return 1024 << uint(c.Timeout)
}

// Bounds of the run configuration's MRC section (Settings).
const (
	MinPMTU = 256  // smallest payload of a full data packet
	MaxPMTU = 4096 // largest
	// PacketOverhead is what a full MRC data packet adds to its payload
	// inside the IPv6 MTU: IPv6 40, UDP 8, BTH+METH+TSETH+RETH 36, ICRC 4.
	PacketOverhead = 40 + 8 + BTHLen + METHLen + TSETHLen + RETHLen + ICRCLen
	// MaxRTO bounds transport.mrc.rto.
	MaxRTO = time.Second
)

// The run configuration's section transport.mrc is Settings: package
// config holds it in TransportConfig and decodes it with its tags, this
// package owns its fields, defaults (SetDefaults) and rules (Validate), and
// the cluster turns it into a Config (cluster.MRCConfig).

// Settings is the MRC knobs a run usually sets; everything else keeps
// package mrc's defaults (docs/config.md).
type Settings struct {
	// EVsPerQP is the entropy values per QP, split across planes: 128..256.
	EVsPerQP int `mapstructure:"evsPerQP" yaml:"evsPerQP" json:"evsPerQP"`
	// MPRUnits is the receive window in units of 128 PSNs: 1..64.
	MPRUnits int `mapstructure:"mprUnits" yaml:"mprUnits" json:"mprUnits"`
	// MaxWImm bounds WriteImm operations in flight: 1..1024.
	MaxWImm int `mapstructure:"maxWImm" yaml:"maxWImm" json:"maxWImm"`
	// PMTU is the payload bytes of a full data packet: 256..4096, and the
	// packet (IPv6 + UDP + MRC headers + PMTU + ICRC, 88 bytes + PMTU) must
	// fit fabric.mtu.
	PMTU int `mapstructure:"pmtu" yaml:"pmtu" json:"pmtu"`
	// RTO overrides the local ACK timeout; "" derives it from the fabric
	// (base RTT + a full buffer's drain at every queue of the longest
	// path, capped at 2 ms: cluster.DefaultRTO).
	RTO string `mapstructure:"rto" yaml:"rto" json:"rto"`
	// TLPFactor is the silence, in smoothed RTTs, after which a QP with
	// data in flight and nothing else to send probes with its last
	// unacknowledged packet (tail-loss probe): 0 (off) or 0.5..64.
	TLPFactor float64 `mapstructure:"tlpFactor" yaml:"tlpFactor" json:"tlpFactor"`
	// NSCC turns the congestion control on (false: window = maxwnd).
	NSCC bool `mapstructure:"nscc" yaml:"nscc" json:"nscc"`
	// RetryScope is what the retry limit counts: "connection" (the spec's:
	// one counter of ACK timeouts per QP, reset when a PSN is newly
	// acknowledged) or "packet" (each packet's own timeouts).
	RetryScope string `mapstructure:"retryScope" yaml:"retryScope" json:"retryScope"`
	// LossDetection is the fast-loss rule: "ooo" (the spec digest's SLEEK on
	// the responder's out-of-order count) or "per-hole" (vcluster's earlier
	// rule: a hole is lost once enough later packets were acknowledged).
	LossDetection string `mapstructure:"lossDetection" yaml:"lossDetection" json:"lossDetection"`
	// Responder bounds the responder's resources (0 = unbounded).
	Responder ResponderSettings `mapstructure:"responder" yaml:"responder" json:"responder"`
}

// SetDefaults sets the documented defaults: 128 EVs, one MPR unit, 16
// WriteImms, PMTU 4096, NSCC on, tail-loss probe after 2 smoothed RTTs,
// retries per connection, SLEEK fast loss, the responder unbounded.
func (s *Settings) SetDefaults() {
	*s = Settings{EVsPerQP: 128, MPRUnits: 1, MaxWImm: 16, PMTU: 4096, NSCC: true, TLPFactor: 2,
		RetryScope: string(RetryConnection), LossDetection: string(LossOOO)}
}

// Validate checks every field, reporting to check (paths relative to the
// section).
func (s *Settings) Validate(check verbs.SectionChecker) {
	check.IntRange("evsPerQP", s.EVsPerQP, 128, 256)
	check.IntRange("mprUnits", s.MPRUnits, 1, 64)
	check.Unit("mprUnits", "128 PSNs")
	check.IntRange("maxWImm", s.MaxWImm, 1, 1024)
	check.IntRange("pmtu", s.PMTU, MinPMTU, MaxPMTU)
	check.Note("pmtu", fmt.Sprintf("with kind mrc, pmtu + %d (IPv6, UDP, MRC headers, ICRC) ≤ fabric.mtu", PacketOverhead))
	check.Unit("pmtu", "bytes")
	check.OptionalDuration("rto", s.RTO, MaxRTO)
	check.Note("rto", `or "": derived from the fabric (cluster.DefaultRTO)`)
	f := s.TLPFactor
	check.Float("tlpFactor", f, "{0} ∪ [0.5, 64]", f == 0 || f >= 0.5 && f <= 64, "must be 0 (off) or in [0.5, 64]")
	check.Note("tlpFactor", "0 turns the probe off")
	check.Unit("tlpFactor", "smoothed RTTs")
	check.OneOf("retryScope", s.RetryScope, string(RetryConnection), string(RetryPacket))
	check.OneOf("lossDetection", s.LossDetection, string(LossOOO), string(LossPerHole))
	r := s.Responder
	check.IntRangeOrZero("responder.bitmapPSNs", r.BitmapPSNs, 1, 32640)
	check.IntRangeOrZero("responder.packetBuffers", r.PacketBuffers, 1, 32640)
	check.IntRangeOrZero("responder.immSlots", r.ImmSlots, 1, 65536)
	check.IntRangeOrZero("responder.alwaysSkipCEStreak", r.AlwaysSkipCEStreak, 1, 255)
}

// ValidateSelected checks what MRC needs of the rest of the run while it
// is the selected transport: a full data packet fits fabric.mtu (mtu, a
// valid MTU).
func (s *Settings) ValidateSelected(check verbs.SectionChecker, mtu int) {
	if s.PMTU+PacketOverhead > mtu {
		check.Invalid("pmtu", fmt.Sprintf("must be ≤ fabric.mtu − %d (%d): a full MRC packet must fit the MTU",
			PacketOverhead, mtu-PacketOverhead), s.PMTU)
	}
}
