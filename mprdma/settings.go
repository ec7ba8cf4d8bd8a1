package mprdma

import (
	"fmt"
	"time"

	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// The run configuration's sections transport.mprdma (Settings, shared by
// the three kinds) and transport.orderre (OrderRESettings, OrderRE's own):
// package config holds them in TransportConfig and decodes them with their
// tags, this package owns their fields, defaults (SetDefaults) and rules
// (Validate), and the cluster turns them into a Config with the fabric's
// facts (cluster.MPRDMAConfig: PMTU, planes, the path count it offers,
// BDPPackets, the derived RTO). Counts are in packets.

// Bounds of the sections.
const (
	// MaxRTO bounds transport.mprdma.rto and transport.orderre.repairTimeout.
	MaxRTO = time.Second
	// MaxWindow bounds the packet counts of the sections (windows and
	// thresholds): the bitmap's own bound, far beyond any BDP of the
	// fabrics vcluster builds.
	MaxWindow = MaxBitmapEntries
)

// Settings is the knobs the three kinds (mprdma, random, orderre) share.
// Zero means "derived" where a field says so: from the fabric (paths, rto)
// or from one BDP in packets (Config.Derived), so one config suits every
// link rate and RTT.
type Settings struct {
	// Paths is N, the receiver's path addresses a QP sprays over: 0 (the
	// default) takes every path the fabric offers (fabric.planes ×
	// fabric.t1PerPlane in a Clos, k/2 in a fat-tree: the path address
	// fixes each multi-member next-hop group's member, so edge and
	// aggregation choices move together), capped at 64; 1..64 and at
	// most what the fabric offers otherwise.
	Paths int `mapstructure:"paths" yaml:"paths" json:"paths"`
	// BitmapEntries is the responder's receive bitmap (L, 1..65536): a
	// packet at or beyond ePSN + L is dropped and NAKed (go-back-N).
	// Default 64, MP-RDMA's fixed small bitmap (seed 004 §4.1).
	BitmapEntries int `mapstructure:"bitmapEntries" yaml:"bitmapEntries" json:"bitmapEntries"`
	// RTO overrides the sender's retransmission timeout; "" derives it
	// from the fabric (base RTT + a full buffer's drain at every queue of
	// the longest path, capped at 2 ms: cluster.DefaultRTO).
	RTO string `mapstructure:"rto" yaml:"rto" json:"rto"`
	// RetryCount is how many timeouts without progress fail the QP:
	// 1..7, default 7 (IB's retry_cnt maximum, as RoCE's).
	RetryCount int `mapstructure:"retryCount" yaml:"retryCount" json:"retryCount"`
	// LossThreshold is the fixed out-of-order degree MP-RDMA and Random
	// take as loss (a hole below rcv_oo_h − lossThreshold is lost): 0 (the
	// default) derives BDP/4, at least 3, the reordering MP-RDMA's
	// out-of-order-aware path selection keeps the fabric within.
	LossThreshold int `mapstructure:"lossThreshold" yaml:"lossThreshold" json:"lossThreshold"`
	// InitCwnd is the initial congestion window: 0 (the default) derives
	// one BDP.
	InitCwnd int `mapstructure:"initCwnd" yaml:"initCwnd" json:"initCwnd"`
	// MaxCwnd caps the congestion window: 0 (the default) derives 2 BDP;
	// set, it must be ≥ initCwnd when that is set.
	MaxCwnd int `mapstructure:"maxCwnd" yaml:"maxCwnd" json:"maxCwnd"`
}

// SetDefaults sets the documented defaults: every path, MP-RDMA's 64-entry
// bitmap, the fabric's RTO, 7 retries, the derived threshold and windows.
func (s *Settings) SetDefaults() {
	*s = Settings{BitmapEntries: 64, RetryCount: 7}
}

// Kinds lists the transport kinds that select this section: the three
// schemes share it (config.SharedSection).
func (s *Settings) Kinds() []string { return []string{KindMPRDMA, KindRandom, KindOrderRE} }

// Validate checks every field, reporting to check (paths relative to the
// section). The bound of paths by the fabric is config's (it knows the
// fabric): see config's MP-RDMA rule.
func (s *Settings) Validate(check verbs.SectionChecker) {
	check.IntRangeOrZero("paths", s.Paths, 1, MaxPaths)
	check.Note("paths", "0: every path the fabric offers, at most 64")
	check.IntRange("bitmapEntries", s.BitmapEntries, 1, MaxBitmapEntries)
	check.OptionalDuration("rto", s.RTO, MaxRTO)
	check.Note("rto", `or "": derived from the fabric (cluster.DefaultRTO)`)
	check.IntRange("retryCount", s.RetryCount, 1, 7)
	check.IntRangeOrZero("lossThreshold", s.LossThreshold, 1, MaxWindow)
	check.Note("lossThreshold", "0: BDP/4, at least 3")
	check.IntRangeOrZero("initCwnd", s.InitCwnd, 1, MaxWindow)
	check.Note("initCwnd", "0: one BDP")
	check.IntRangeOrZero("maxCwnd", s.MaxCwnd, 1, MaxWindow)
	check.Note("maxCwnd", "0: 2 BDP; ≥ initCwnd when both are set")
	if s.MaxCwnd > 0 && s.InitCwnd > s.MaxCwnd && s.InitCwnd <= MaxWindow {
		check.Invalid("maxCwnd", fmt.Sprintf("must be ≥ transport.mprdma.initCwnd (%d)", s.InitCwnd), s.MaxCwnd)
	}
	for _, f := range []string{"bitmapEntries", "lossThreshold", "initCwnd", "maxCwnd"} {
		check.Unit(f, "packets")
	}
}

// OrderRESettings is OrderRE's own knobs (seed 004 §2–3): read only when
// transport.kind is orderre. Zero derives a field from one BDP in packets
// and the path count (Config.Derived).
type OrderRESettings struct {
	// LFast is the lag behind rcv_oo_h within which an arrival's path is
	// judged fast (seed 004 §2.1): 0 (the default) derives BDP/8, at
	// least 1 (seed 004 gives no value; an eighth of a BDP keeps the
	// copy count near 2 with 4 paths, the A = 2 seed 004 §3.2.1 suggests
	// at 1% loss).
	LFast int `mapstructure:"lFast" yaml:"lFast" json:"lFast"`
	// Delta is Δ, the margin over the observed out-of-order degree:
	// L_max = ob_max + Δ (seed 004 §2.3): 0 (the default) derives BDP/10,
	// at least 1 (seed 004 §3.2.2: "about 1/10 BDP").
	Delta int `mapstructure:"delta" yaml:"delta" json:"delta"`
	// OMax is O_MAX, the largest out-of-order degree the network
	// produces, used only for the copy count: 0 (the default) derives
	// 0.35 BDP (seed 004 §3.2.1: 0.3–0.4 BDP).
	OMax int `mapstructure:"oMax" yaml:"oMax" json:"oMax"`
	// Copies is A, the FReTx copies the sender's ToR makes on the fast
	// paths: 0 (the default) derives A = 1 + (N−1)·lFast/oMax rounded,
	// within 1..min(N, 3) (seed 004 §3.2.1: A = 2 or 3 at high loss);
	// 1..15 otherwise (4 bits in the BTH).
	Copies int `mapstructure:"copies" yaml:"copies" json:"copies"`
	// RepairTimeout is how long the receiver waits for a requested repair
	// before it falls back to a NAK and go-back-N (seed 004 §3.3); "" (the
	// default) derives 2 × the RTO.
	RepairTimeout string `mapstructure:"repairTimeout" yaml:"repairTimeout" json:"repairTimeout"`
}

// SetDefaults sets the documented defaults: every field derived.
func (o *OrderRESettings) SetDefaults() { *o = OrderRESettings{} }

// Validate checks every field, reporting to check (paths relative to the
// section).
func (o *OrderRESettings) Validate(check verbs.SectionChecker) {
	check.IntRangeOrZero("lFast", o.LFast, 1, MaxWindow)
	check.Note("lFast", "0: BDP/8, at least 1")
	check.IntRangeOrZero("delta", o.Delta, 1, MaxWindow)
	check.Note("delta", "0: BDP/10, at least 1 (seed 004 §3.2.2)")
	check.IntRangeOrZero("oMax", o.OMax, 1, MaxWindow)
	check.Note("oMax", "0: 0.35 BDP (seed 004 §3.2.1)")
	for _, f := range []string{"lFast", "delta", "oMax"} {
		check.Unit(f, "packets")
	}
	check.IntRangeOrZero("copies", o.Copies, 1, 15)
	check.Note("copies", "0: 1 + (N−1)·lFast/oMax rounded, within 1..min(N, 3)")
	check.OptionalDuration("repairTimeout", o.RepairTimeout, MaxRTO)
	check.Note("repairTimeout", `or "": 2 × the RTO`)
}

// Apply sets c's section fields from s and o (the durations parsed: a
// valid section's always parse) and returns c; the fabric's fields (PMTU,
// Paths when s.Paths is 0, Planes, BDPPackets, RTO when s.RTO is "") are
// the caller's. rto is the RTO to use when s.RTO is "".
func (s Settings) Apply(c Config, o OrderRESettings, rto time.Duration) (Config, error) {
	if s.Paths > 0 {
		c.Paths = s.Paths
	}
	c.BitmapEntries = s.BitmapEntries
	c.RetryCount = s.RetryCount
	c.LossThreshold = s.LossThreshold
	c.InitCwnd, c.MaxCwnd = s.InitCwnd, s.MaxCwnd
	c.LFast, c.Delta, c.OMax, c.Copies = o.LFast, o.Delta, o.OMax, o.Copies
	var err error
	if rto, err = units.DurationOr("transport.mprdma.rto", s.RTO, rto); err != nil {
		return c, err
	}
	c.RTO = int64(rto)
	rt, err := units.DurationOr("transport.orderre.repairTimeout", o.RepairTimeout, 0)
	if err != nil {
		return c, err
	}
	c.RepairTimeout = int64(rt)
	return c, nil
}
