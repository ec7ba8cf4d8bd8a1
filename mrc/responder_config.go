package mrc

import "fmt"

// ResponderConfig bounds the responder's resources and sets its EV
// judgement. The zero value is "unbounded, no judgement": no NO_BITMAP,
// NO_PKT_BUFFER or NO_RESOURCE NACK and no ALWAYS_SKIP is ever generated.
//
// The model (a packet is checked in this order once it is known to be new
// and inside the window [ePSN, ePSN + MPR)):
//
//   - BitmapPSNs: the receive bitmap has BitmapPSNs bits from ePSN on. A new
//     PSN at least BitmapPSNs above ePSN has no bit to record it: NACK
//     NO_BITMAP, the packet is dropped.
//   - PacketBuffers: a packet that arrives above ePSN (out of order) keeps a
//     per-packet record (message end, AckReq, immediate) until ePSN passes it
//     and its message completes in order. At most PacketBuffers such packets
//     are held: one more is NACKed NO_PKT_BUFFER and dropped.
//   - ImmSlots: the last packet of a WriteImm holds an immediate-data slot
//     (its RecvImm completion) from its arrival until it completes in order.
//     At most ImmSlots are held: a WriteImm last packet that needs one more
//     is NACKed NO_RESOURCE and dropped.
//
// The packet at ePSN needs none of them (it completes at once and frees
// what waits behind it), so the responder always accepts the packet that
// repairs its oldest hole and no bound can deadlock the QP.
//
// AlwaysSkipCEStreak turns on the responder's ALWAYS_SKIP judgement (the
// spec leaves the criterion to the implementation): an EV whose last
// AlwaysSkipCEStreak data arrivals were all CE-marked, while fewer than
// half of the QP's recent arrivals (EWMA, weight 1/16) were, is judged
// bad — its path, not the destination, is congested — and the SACK of
// that arrival says M = ALWAYS_SKIP instead of SKIP_ONCE; the requester
// takes the EV to ASSUMED_BAD. Default 0 (off): the judgement is not the
// spec's but vcluster's, and it takes an EV out for a probe interval on
// congestion, which MRC otherwise answers with SKIP_ONCE.
type ResponderConfig struct {
	BitmapPSNs         int // 0 (the whole window) or 1..32640
	PacketBuffers      int // 0 (unbounded) or 1..32640
	ImmSlots           int // 0 (unbounded) or 1..65536
	AlwaysSkipCEStreak int // 0 (off) or 1..255
}

// maxWindowPSNs is the largest receive window: MPR 255 units of 128 PSNs.
const maxWindowPSNs = 255 * 128

// validate reports the first invalid field of r.
func (r *ResponderConfig) validate() error {
	bad := func(field, why string) error { return fmt.Errorf("mrc: Config.Responder.%s %s", field, why) }
	switch {
	case r.BitmapPSNs < 0 || r.BitmapPSNs > maxWindowPSNs:
		return bad("BitmapPSNs", fmt.Sprintf("must be 0 (the whole window) or 1..%d (MPR 255 × 128 PSNs)", maxWindowPSNs))
	case r.PacketBuffers < 0 || r.PacketBuffers > maxWindowPSNs:
		return bad("PacketBuffers", fmt.Sprintf("must be 0 (unbounded) or 1..%d (MPR 255 × 128 PSNs)", maxWindowPSNs))
	case r.ImmSlots < 0 || r.ImmSlots > 1<<16:
		return bad("ImmSlots", "must be 0 (unbounded) or 1..65536")
	case r.AlwaysSkipCEStreak < 0 || r.AlwaysSkipCEStreak > 255:
		return bad("AlwaysSkipCEStreak", "must be 0 (off) or 1..255")
	}
	return nil
}

// ResponderSettings is package mrc's ResponderConfig: running out of a
// resource draws the NACK the spec names for it; 0 leaves it unbounded.
type ResponderSettings struct {
	// BitmapPSNs is the receive bitmap's reach from ePSN (NO_BITMAP
	// beyond it): 0 or 1..32640.
	BitmapPSNs int `mapstructure:"bitmapPSNs" yaml:"bitmapPSNs" json:"bitmapPSNs"`
	// PacketBuffers is the out-of-order packets held until they complete
	// in order (NO_PKT_BUFFER beyond it): 0 or 1..32640.
	PacketBuffers int `mapstructure:"packetBuffers" yaml:"packetBuffers" json:"packetBuffers"`
	// ImmSlots is the WriteImm completions held until in order
	// (NO_RESOURCE beyond it): 0 or 1..65536.
	ImmSlots int `mapstructure:"immSlots" yaml:"immSlots" json:"immSlots"`
	// AlwaysSkipCEStreak turns on the responder's ALWAYS_SKIP judgement: an
	// EV whose last N arrivals were all CE-marked while most of the QP's
	// were not: 0 (off) or 1..255.
	AlwaysSkipCEStreak int `mapstructure:"alwaysSkipCEStreak" yaml:"alwaysSkipCEStreak" json:"alwaysSkipCEStreak"`
}

// Config is the ResponderConfig the settings give.
func (r ResponderSettings) Config() ResponderConfig {
	return ResponderConfig{BitmapPSNs: r.BitmapPSNs, PacketBuffers: r.PacketBuffers, ImmSlots: r.ImmSlots, AlwaysSkipCEStreak: r.AlwaysSkipCEStreak}
}
