package mprdma

import (
	"errors"
	"fmt"
)

// Scheme is a QP's loss recovery: the three transport kinds.
type Scheme uint8

const (
	// SchemeMPRDMA is MP-RDMA's: a hole the receiver judges lost, or a
	// packet beyond the bitmap, makes a NAK and the sender goes back N.
	SchemeMPRDMA Scheme = iota
	// SchemeRandom retransmits only a lost PSN (a selective NAK), on a
	// path drawn at random; a lost retransmission waits for the RTO.
	SchemeRandom
	// SchemeOrderRE detects loss by out-of-order degree with an adaptive
	// threshold, FNACKs the lost PSN, and the sender's FReTx is replicated
	// by the sender's ToR onto the receiver's fast paths; a repair that
	// does not arrive within RepairTimeout falls back to NAK + go-back-N.
	SchemeOrderRE
)

// Kind names, as transport.kind spells them.
const (
	KindMPRDMA  = "mprdma"
	KindRandom  = "random"
	KindOrderRE = "orderre"
)

func (s Scheme) String() string {
	switch s {
	case SchemeMPRDMA:
		return KindMPRDMA
	case SchemeRandom:
		return KindRandom
	case SchemeOrderRE:
		return KindOrderRE
	}
	return fmt.Sprintf("Scheme(%d)", uint8(s))
}

// MaxPaths bounds Config.Paths (path addresses are 16-bit; a QP keeps a
// small per-path table).
const MaxPaths = 64

// MaxBitmapEntries bounds Config.BitmapEntries.
const MaxBitmapEntries = 1 << 16

// Config is one QP's parameters. Counts in packets unless named otherwise;
// times in ns. DefaultConfig documents every default and where it comes
// from; Validate names the first bad field. Fields marked "0: derived" are
// computed by New from BDPPackets (the cluster fills BDPPackets from the
// path's base RTT and the line rate).
type Config struct {
	Scheme Scheme

	// PMTU is the payload bytes per packet (256..4096).
	PMTU int
	// Paths is N, the receiver's path addresses in use (1..MaxPaths).
	// Path i leaves on plane i mod Planes (EV bits 0..3) toward path
	// address i (Tx.DstPath = i+1).
	Paths int
	// Planes is the NIC's ports (1..16).
	Planes int
	// BDPPackets is one bandwidth-delay product in full packets (the line
	// rate × the base RTT / PMTU), ≥ 1: the unit the derived defaults use.
	BDPPackets int
	// BitmapEntries is the responder's receive bitmap (L), 1..MaxBitmapEntries:
	// a packet at or beyond ePSN + L is dropped and NAKed (go-back-N).
	// Default 64, MP-RDMA's.
	BitmapEntries int
	// InitCwnd is the initial congestion window in packets (0: derived, one BDP).
	InitCwnd int
	// MaxCwnd caps the window in packets (0: derived, 2 BDP).
	MaxCwnd int
	// RTO is the sender's retransmission timeout (ns, > 0).
	RTO int64
	// RetryCount is how many timeouts without progress fail the QP (1..7, IB's).
	RetryCount int

	// LossThreshold is the fixed out-of-order degree MP-RDMA and Random
	// take as loss: a hole below rcv_oo_h − LossThreshold is lost (0:
	// derived, BDP/4 but at least 3; MP-RDMA's Δ bound on reordering).
	LossThreshold int

	// --- OrderRE ---

	// LFast is the lag behind rcv_oo_h within which an arrival's path is
	// fast (0: derived, BDP/8 but at least 1).
	LFast int
	// Delta is the margin over the observed out-of-order degree: L_max =
	// ob_max + Delta (0: derived, BDP/10 but at least 1; seed 004 §3.2.2).
	Delta int
	// OMax is the largest out-of-order degree the network produces, used
	// only for the copy count (0: derived, 0.35 BDP; seed 004 §3.2.1:
	// 0.3–0.4 BDP).
	OMax int
	// Copies is A, the FReTx copies the ToR makes (0: derived, 1 +
	// (N−1)·LFast/OMax rounded, within 1..min(N, 3)); 1..15.
	Copies int
	// RepairTimeout is how long the receiver waits for a requested repair
	// before it falls back to NAK + go-back-N (ns, > 0; 0: derived, 2 × RTO).
	RepairTimeout int64
	// DegreeWindow is how many data arrivals one measurement of ob_max
	// spans: ob_max is the largest lag behind rcv_oo_h seen in this window
	// or the one before, so it follows the network up and down within two
	// windows (0: derived, one BDP but at least 8). Before the first
	// window ends ob_max starts at OMax, the network's worst.
	DegreeWindow int

	// BaseRTT is the path's base round-trip time (ns; 0: unknown). The
	// responder uses it only to tell a late original from a repair: a hole
	// judged lost that is filled sooner than BaseRTT after, by a packet not
	// flagged FReTx, cannot be the answer to its request (SpuriousLosses,
	// and a reordering sample for ob_max). 0 turns that test off.
	BaseRTT int64

	// SlowPathLag is the sender's Δ in MP-RDMA's out-of-order aware path
	// selection: an ACK for a packet more than SlowPathLag below the
	// highest one acknowledged marks its path too slow to clock (0:
	// derived, LossThreshold/2 but at least 1, so a lagging path is left
	// before its lag makes the receiver take reordering for loss).
	SlowPathLag int

	// SrcPort and FlowLabel fix the QP's entropy value; 0 derives them
	// from the seed given to New.
	SrcPort   uint16
	FlowLabel uint16
}

// DefaultConfig returns MP-RDMA's defaults for one plane and one path; the
// cluster sets Paths, Planes, BDPPackets and RTO from the fabric.
func DefaultConfig() Config {
	return Config{
		Scheme:        SchemeMPRDMA,
		PMTU:          4096,
		Paths:         1,
		Planes:        1,
		BDPPackets:    16,
		BitmapEntries: 64,
		RTO:           100_000,
		RetryCount:    7,
	}
}

// ErrConfig wraps every Validate error.
var ErrConfig = errors.New("mprdma: invalid config")

// Validate reports the first field out of range, naming it and the range.
func (c *Config) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return fmt.Errorf("%w: %s = %v, allowed %s", ErrConfig, field, v, allowed)
	}
	switch {
	case c.Scheme > SchemeOrderRE:
		return bad("Scheme", c.Scheme, "mprdma, random or orderre")
	case c.PMTU < 256 || c.PMTU > 4096:
		return bad("PMTU", c.PMTU, "256..4096")
	case c.Paths < 1 || c.Paths > MaxPaths:
		return bad("Paths", c.Paths, fmt.Sprintf("1..%d", MaxPaths))
	case c.Planes < 1 || c.Planes > 16:
		return bad("Planes", c.Planes, "1..16")
	case c.BDPPackets < 1:
		return bad("BDPPackets", c.BDPPackets, "≥ 1")
	case c.BitmapEntries < 1 || c.BitmapEntries > MaxBitmapEntries:
		return bad("BitmapEntries", c.BitmapEntries, fmt.Sprintf("1..%d", MaxBitmapEntries))
	case c.InitCwnd < 0:
		return bad("InitCwnd", c.InitCwnd, "≥ 0 (0: one BDP)")
	case c.MaxCwnd < 0:
		return bad("MaxCwnd", c.MaxCwnd, "≥ 0 (0: two BDP)")
	case c.RTO <= 0:
		return bad("RTO", c.RTO, "> 0 ns")
	case c.RetryCount < 1 || c.RetryCount > 7:
		return bad("RetryCount", c.RetryCount, "1..7")
	case c.LossThreshold < 0:
		return bad("LossThreshold", c.LossThreshold, "≥ 0 (0: derived)")
	case c.LFast < 0:
		return bad("LFast", c.LFast, "≥ 0 (0: derived)")
	case c.Delta < 0:
		return bad("Delta", c.Delta, "≥ 0 (0: derived)")
	case c.OMax < 0:
		return bad("OMax", c.OMax, "≥ 0 (0: derived)")
	case c.Copies < 0 || c.Copies > 15:
		return bad("Copies", c.Copies, "0..15 (0: derived)")
	case c.RepairTimeout < 0:
		return bad("RepairTimeout", c.RepairTimeout, "≥ 0 ns (0: derived)")
	case c.DegreeWindow < 0:
		return bad("DegreeWindow", c.DegreeWindow, "≥ 0 (0: derived)")
	case c.BaseRTT < 0:
		return bad("BaseRTT", c.BaseRTT, "≥ 0 ns (0: unknown)")
	case c.SlowPathLag < 0:
		return bad("SlowPathLag", c.SlowPathLag, "≥ 0 (0: derived)")
	}
	return nil
}

// Derived returns c with every "0: derived" field filled in (New uses it;
// tests and the experiment report read the values it chose).
func (c Config) Derived() Config {
	bdp := c.BDPPackets
	if c.InitCwnd == 0 {
		c.InitCwnd = bdp
	}
	if c.MaxCwnd == 0 {
		c.MaxCwnd = 2 * bdp
	}
	if c.LossThreshold == 0 {
		c.LossThreshold = max(bdp/4, 3)
	}
	if c.LFast == 0 {
		c.LFast = max(bdp/8, 1)
	}
	if c.Delta == 0 {
		c.Delta = max(bdp/10, 1)
	}
	if c.OMax == 0 {
		c.OMax = max(bdp*35/100, 1)
	}
	if c.Copies == 0 {
		a := 1 + float64(c.Paths-1)*float64(c.LFast)/float64(c.OMax)
		c.Copies = min(max(int(a+0.5), 1), min(c.Paths, 3))
	}
	if c.RepairTimeout == 0 {
		c.RepairTimeout = 2 * c.RTO
	}
	if c.DegreeWindow == 0 {
		c.DegreeWindow = max(bdp, 8)
	}
	if c.SlowPathLag == 0 {
		c.SlowPathLag = max(c.LossThreshold/2, 1)
	}
	return c
}
