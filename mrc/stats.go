package mrc

// The QP's counters and the getters that report them.

import "github.com/vcluster/vcluster/verbs"

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
	s := q.stats
	s.CwndBytes = q.cc.window()
	return s
}

// MRCStats returns MRC-specific counters and gauges.
func (q *QP) MRCStats() MRCStats {
	s := q.ms
	c, act := q.evs.counts()
	s.EVGood, s.EVSkip, s.EVAssumedBad, s.EVDenied, s.EVActive = c[EVGood], c[EVSkip], c[EVAssumedBad], c[EVDenied], act
	s.EVTransitions = q.evs.transitions
	s.EVChangesDropped = q.evs.changesDropped
	s.RTTSamples = q.stats.RTTSamples
	s.LastRTT, s.MinRTT, s.SRTT = q.stats.LastRTT, q.stats.MinRTT, q.srtt
	s.CwndBytes = q.cc.window()
	s.MaxWnd = int64(q.cc.p.MaxWnd)
	s.BaseRTT = int64(q.cc.p.BaseRTT)
	s.Quadrants = q.cc.quadrants
	return s
}

// NSCC returns the QP's current NSCC constants (base_rtt and maxwnd follow
// the measured minimum RTT).
func (q *QP) NSCC() NSCCParams { return q.cc.p }
