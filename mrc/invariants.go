package mrc

// The QP's invariants as code: sendState's (listed on it, sendstate.go),
// the EV pool's and the responder's, checked after every input when
// debugInvariants is set.

import (
	"fmt"
	"math/bits"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// debugInvariants makes every input check the QP's invariants
// (checkInvariants) and panic on the first that fails. The mrc tests set
// it (TestMain); in production it is false and costs one predictable
// branch per input.
var debugInvariants = false

// assertInvariants panics if an invariant fails; callers test
// debugInvariants first. It stays out of line, so that the test costs the
// callers (Send, Receive, Tick …) one branch and nothing else.
//
//go:noinline
func (q *QP) assertInvariants() {
	if err := q.checkInvariants(); err != nil {
		panic(err)
	}
}

// checkInvariants checks the invariants of sendState, the EV pool's
// (evPool.checkInvariants) and the responder's window. It allocates
// nothing unless one fails, so it can run under the allocation tests.
func (q *QP) checkInvariants() error {
	if q.state != verbs.QPReady {
		return nil
	}
	d := ib.PSNDiff(q.sndNxt, q.cack)
	if d < 1 || d > q.negMPR+1 || q.negMPR > len(q.recs) {
		return fmt.Errorf("mrc invariant: sndNxt %d − cack %d = %d outside [1, MPR %d + 1] (%d records)",
			q.sndNxt, q.cack, d, q.negMPR, len(q.recs))
	}
	var inflight int64
	var held, lost, out int
	for p := ib.PSNAdd(q.cack, 1); p != q.sndNxt; p = ib.PSNAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		switch r.state {
		case sendFree:
			return fmt.Errorf("mrc invariant: PSN %d in (cack %d, sndNxt %d) has no record", p, q.cack, q.sndNxt)
		case sendInFlight:
			inflight += int64(r.plen)
		case sendLost:
			lost++
		case sendHeld:
			held++
		}
		if r.state.outstanding() {
			out++
		}
		if r.tx == 0 {
			return fmt.Errorf("mrc invariant: PSN %d is %v but was never sent", p, r.state)
		}
	}
	if inflight != q.inflight {
		return fmt.Errorf("mrc invariant: inflight %d bytes, records in flight hold %d", q.inflight, inflight)
	}
	if held != q.held {
		return fmt.Errorf("mrc invariant: held %d, %d records held", q.held, held)
	}
	queued := 0
	for i := 0; i < q.rtxQ.Len(); i++ {
		if p := *q.rtxQ.At(i); q.inFlightRange(p) && q.recs[p&q.recMask].state == sendLost {
			queued++
		}
	}
	if queued != lost {
		return fmt.Errorf("mrc invariant: %d lost records, %d live rtxQ entries", lost, queued)
	}
	timers := 0
	for k := range q.timers {
		if q.timerLive(&q.timers[k]) {
			timers++
		}
	}
	if timers != out {
		return fmt.Errorf("mrc invariant: %d outstanding records, %d live timers", out, timers)
	}
	inOrder, inFlightRecs := 0, 0
	for i := 0; i < q.order.Len(); i++ {
		f := q.order.At(i)
		if r := &q.recs[f.psn&q.recMask]; q.inFlightRange(f.psn) && r.state == sendInFlight && r.seq == f.seq {
			inOrder++
		}
	}
	for p := ib.PSNAdd(q.cack, 1); p != q.sndNxt; p = ib.PSNAdd(p, 1) {
		if q.recs[p&q.recMask].state == sendInFlight {
			inFlightRecs++
		}
	}
	if inOrder != inFlightRecs {
		return fmt.Errorf("mrc invariant: %d records in flight, %d in the send order", inFlightRecs, inOrder)
	}
	if err := q.checkResponder(); err != nil {
		return err
	}
	return q.evs.checkInvariants()
}

// checkResponder checks the responder's window: rcvAbove is the number of
// PSNs received above ePSN (bits set in the bitmap), ePSN itself is never
// received (advance moves past it), and immHeld counts the WriteImm last
// packets among them.
func (q *QP) checkResponder() error {
	n, imm := 0, 0
	for i, w := range q.rcvBitmap {
		n += bits.OnesCount64(w)
		for ; w != 0; w &= w - 1 {
			if q.rcvFlags[i<<6+bits.TrailingZeros64(w)]&rcvHasImm != 0 {
				imm++
			}
		}
	}
	if n != q.rcvAbove || q.rcvGot(q.ePSN) {
		return fmt.Errorf("mrc invariant: %d PSNs received above ePSN %d, rcount %d (ePSN received: %v)", n, q.ePSN, q.rcvAbove, q.rcvGot(q.ePSN))
	}
	if imm != q.rsp.immHeld {
		return fmt.Errorf("mrc invariant: %d immediates held, immHeld %d", imm, q.rsp.immHeld)
	}
	return nil
}

// checkInvariants checks the pool's bookkeeping against its EVs (the QP's
// checkInvariants calls it when debugInvariants is set):
//
//   - usable is the number of GOOD or SKIP EVs, nBad of ASSUMED_BAD ones;
//     while there is one, nextProbeAt is no later than its next probe.
//   - A plane's active set lists distinct EVs of that plane, each marked
//     active, each usable (GOOD or SKIP), at most target of them; good
//     counts its GOOD ones; the cursor is within it.
func (p *evPool) checkInvariants() error {
	usable, bad := 0, 0
	for k := range p.evs {
		e := &p.evs[k]
		switch e.state {
		case EVGood, EVSkip:
			usable++
		case EVAssumedBad:
			bad++
			if e.nextProbe < p.nextProbeAt {
				return fmt.Errorf("mrc invariant: EV %#x probes at %d, before the pool's next probe %d", e.ev, e.nextProbe, p.nextProbeAt)
			}
		}
	}
	if usable != p.usable || bad != p.nBad {
		return fmt.Errorf("mrc invariant: %d usable and %d ASSUMED_BAD EVs, counted %d and %d", usable, bad, p.usable, p.nBad)
	}
	for pl := range p.planes {
		ps := &p.planes[pl]
		flagged, good := 0, 0
		for k := ps.first; k < ps.first+ps.n; k++ {
			if p.evs[k].active {
				flagged++
			}
		}
		for _, i := range ps.active {
			e := &p.evs[i]
			if int(i) < ps.first || int(i) >= ps.first+ps.n || !e.active || !usableState(e.state) {
				return fmt.Errorf("mrc invariant: plane %d's active set holds EV %d (%v, active %v)", pl, i, e.state, e.active)
			}
			if e.state == EVGood {
				good++
			}
		}
		if flagged != len(ps.active) || len(ps.active) > ps.target || good != ps.good || ps.cursor > len(ps.active) {
			return fmt.Errorf("mrc invariant: plane %d: %d active EVs (%d marked, target %d), %d GOOD (counted %d), cursor %d",
				pl, len(ps.active), flagged, ps.target, good, ps.good, ps.cursor)
		}
	}
	return nil
}
