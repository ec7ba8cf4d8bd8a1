package mrc

// The QP's counters and the getters that report them.

import "github.com/vcluster/vcluster/verbs"

// stats is every counter of a QP, each kept once. Stats, MRCStats and
// ResponderStats are views of it; the gauges they add (cwnd, EV counts,
// SRTT, NSCC's constants, immediates held) are read when they are called,
// so those fields stay zero here. RTTSamples, LastRTT and MinRTT are kept
// in QPStats only (MRCStats repeats them).
type stats struct {
	verbs.QPStats  // the counters common to the transports (Stats)
	MRCStats       // MRC's own (MRCStats)
	ResponderStats // the responder's resource bounds and EV judgement (ResponderStats)
}

// MRCStats are MRC-specific counters and gauges (QP.MRCStats).
type MRCStats struct {
	// EV pool: EVs per state and in the active sets.
	EVGood, EVSkip, EVAssumedBad, EVDenied, EVActive int
	EVTransitions                                    uint64
	EVChangesDropped                                 uint64 // EV changes not kept: PollEVChanges fell behind (MaxEVChanges)

	TrimNacksReceived        uint64 // requester: NACK TRIMMED
	TrimLastHopNacksReceived uint64 // requester: NACK TRIMMED_LASTHOP
	OtherNacksReceived       uint64 // requester: NO_BITMAP … PSN_OOR_WINDOW
	UnexpEventsReceived      uint64
	AckNaksReceived          uint64 // requester: AETH NAKs (remote access/op errors)

	TrimRetransmits    uint64 // retransmissions caused by trim NACKs
	FastRetransmits    uint64 // … by the fast-loss rule (LossDetection) or the tail-loss probe's cut
	LossRecoveries     uint64 // loss-recovery episodes entered (LossOOO)
	TimeoutRetransmits uint64 // … by ACK timeouts
	NackRetransmits    uint64 // … by other NACKs
	PlaneDownRetx      uint64 // … by SetPlaneStatus(down)

	ProbesSent, ProbeReplies uint64
	TailLossProbes           uint64 // tail-loss probes sent (TLPFactor)

	SACKsSent, NACKsSent, AcksSent uint64 // responder
	OutOfWindow                    uint64 // responder: PSNs beyond the window
	Malformed                      uint64 // packets that failed to decode or were misaddressed
	CtrlDropped                    uint64 // control packets dropped (queue full)

	RTTSamples uint64
	LastRTT    int64
	MinRTT     int64
	SRTT       int64 // smoothed RTT (EWMA 1/8), which the tail-loss probe waits on
	CwndBytes  int64
	MaxWnd     int64
	BaseRTT    int64
	Quadrants  [numQuadrants]uint64 // NSCC decisions, indexed by Quadrant
}

// Stats returns the QP's counters.
func (q *QP) Stats() verbs.QPStats {
	s := q.stats.QPStats
	s.CwndBytes = q.cc.window()
	return s
}

// MRCStats returns MRC-specific counters and gauges.
func (q *QP) MRCStats() MRCStats {
	s := q.stats.MRCStats
	c, act := q.evs.counts()
	s.EVGood, s.EVSkip, s.EVAssumedBad, s.EVDenied, s.EVActive = c[EVGood], c[EVSkip], c[EVAssumedBad], c[EVDenied], act
	s.EVTransitions = q.evs.transitions
	s.EVChangesDropped = q.evs.changesDropped
	s.RTTSamples = q.stats.QPStats.RTTSamples
	s.LastRTT, s.MinRTT, s.SRTT = q.stats.QPStats.LastRTT, q.stats.QPStats.MinRTT, q.srtt
	s.CwndBytes = q.cc.window()
	s.MaxWnd = int64(q.cc.p.MaxWnd)
	s.BaseRTT = int64(q.cc.p.BaseRTT)
	s.Quadrants = q.cc.quadrants
	return s
}

// NSCC returns the QP's current NSCC constants (base_rtt and maxwnd follow
// the measured minimum RTT).
func (q *QP) NSCC() NSCCParams { return q.cc.p }

// ResponderStats count what the responder's resource bounds and EV
// judgement (ResponderConfig) generated.
type ResponderStats struct {
	NoBitmapNacks    uint64 // NACK NO_BITMAP sent: PSN beyond the bitmap
	NoPktBufferNacks uint64 // NACK NO_PKT_BUFFER sent: out-of-order packets at PacketBuffers
	NoResourceNacks  uint64 // NACK NO_RESOURCE sent: immediates at ImmSlots
	AlwaysSkips      uint64 // SACKs that said M = ALWAYS_SKIP
	ImmHeld          int    // gauge: immediate slots in use
}

// ResponderStats returns the responder's resource and judgement counters.
func (q *QP) ResponderStats() ResponderStats {
	s := q.stats.ResponderStats
	s.ImmHeld = q.rsp.immHeld
	return s
}
