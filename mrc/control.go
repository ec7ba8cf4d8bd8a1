package mrc

// The controller's and the NIC's commands: plane status, EV and path
// denial, receiver penalty, and the EV views they read.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// PollEVChanges appends the EV state changes since the last call to dst,
// oldest first, and forgets them (at most MaxEVChanges are kept between
// calls; MRCStats.EVChangesDropped counts the rest).
func (q *QP) PollEVChanges(dst []EVChange) []EVChange {
	dst = append(dst, q.evs.changes...)
	q.evs.changes = q.evs.changes[:0]
	return dst
}

// SetPlaneStatus marks this side's NIC port of plane down or up (the NIC
// calls it when the port's link changes). A plane carries data only while
// both this side's port and the peer's (ApplyPortStatus) are up.
func (q *QP) SetPlaneStatus(plane int, up bool) {
	if plane < 0 || plane >= len(q.evs.planes) {
		return
	}
	if up {
		q.localDown &^= 1 << uint(plane)
	} else {
		q.localDown |= 1 << uint(plane)
	}
	q.applyPlane(plane)
	if debugInvariants {
		q.assertInvariants()
	}
}

// ApplyPortStatus applies a peer's Port Status Update: bit p of mask set ⇔
// the peer's plane-p port is up.
func (q *QP) ApplyPortStatus(mask uint32) {
	q.remoteDown = ^mask
	for p := range q.evs.planes {
		q.applyPlane(p)
	}
	if debugInvariants {
		q.assertInvariants()
	}
}

// applyPlane brings plane's usability in line with both sides' port
// status. A plane that goes down carries no more data; packets in flight on
// it are retransmitted elsewhere at once, without penalising their EVs. EV
// states are kept, so the plane resumes as it was.
func (q *QP) applyPlane(plane int) {
	ps := &q.evs.planes[plane]
	up := (q.localDown|q.remoteDown)&(1<<uint(plane)) == 0
	if ps.up == up {
		return
	}
	ps.up = up
	if up || q.state != verbs.QPReady {
		return
	}
	for p := ib.PSNAdd(q.cack, 1); ib.PSNDiff(p, q.sndNxt) < 0; p = ib.PSNAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		if r.state == sendInFlight && int(q.evs.evs[r.ev].plane) == plane {
			q.lose(p, r)
			r.timedOut = false
			q.stats.PlaneDownRetx++
		}
	}
}

// PlaneUp reports whether plane carries data.
func (q *QP) PlaneUp(plane int) bool {
	return plane >= 0 && plane < len(q.evs.planes) && q.evs.planes[plane].up
}

// SetReceiverPenalty sets the rcv_cwnd_pen (0..127) this side returns in
// its SACKs: 64 halves the peer's window, 127 leaves one packet per RTT.
func (q *QP) SetReceiverPenalty(pen uint8) { q.rcvPen = min(pen, 127) }

// EVStates returns every EV of the pool with its plane, path choice and
// state, as a controller sees them (SKIP is reported as such; a controller
// following mrc_ctl.h treats it as GOOD).
func (q *QP) EVStates() []EVInfo {
	out := make([]EVInfo, len(q.evs.evs))
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		out[k] = EVInfo{EV: e.ev, Plane: int(e.plane), Choice: evChoice(e.ev), State: e.state, Active: e.active}
	}
	return out
}

// EVState returns the state of ev.
func (q *QP) EVState(ev uint32) (EVState, error) {
	i := q.evs.lookup(ev)
	if i < 0 {
		return 0, ErrUnknownEV
	}
	return q.evs.evs[i].state, nil
}

// DenyEV forbids ev (controller command): it leaves the active set and is
// not probed. now is not needed: denial has no timer.
func (q *QP) DenyEV(ev uint32) error { return q.commandEV(ev, EVDenied, CauseDeny) }

// AllowEV returns ev to GOOD (controller command), whatever its state.
func (q *QP) AllowEV(ev uint32) error { return q.commandEV(ev, EVGood, CauseAllow) }

// commandEV puts ev in state st for a controller command.
func (q *QP) commandEV(ev uint32, st EVState, cause EVCause) error {
	i := q.evs.lookup(ev)
	if i < 0 {
		return ErrUnknownEV
	}
	q.evs.set(i, st, q.evs.clock, cause)
	if debugInvariants {
		q.assertInvariants()
	}
	return nil
}

// DenyPath denies every EV of plane whose path-choice bits equal choice
// and returns how many.
func (q *QP) DenyPath(plane, choice int) int { return q.pathCmd(plane, choice, EVDenied) }

// AllowPath returns every DENIED EV of plane and choice to GOOD.
func (q *QP) AllowPath(plane, choice int) int { return q.pathCmd(plane, choice, EVGood) }

func (q *QP) pathCmd(plane, choice int, s EVState) int {
	n := 0
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		if int(e.plane) != plane || evChoice(e.ev) != choice {
			continue
		}
		if s == EVGood && e.state != EVDenied {
			continue
		}
		c := CauseDeny
		if s == EVGood {
			c = CauseAllow
		}
		if q.evs.set(int32(k), s, q.evs.clock, c) {
			n++
		}
	}
	if debugInvariants {
		q.assertInvariants()
	}
	return n
}
