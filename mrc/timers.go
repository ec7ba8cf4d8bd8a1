package mrc

// The requester's clocks: per-transmission ACK timers, the stall clock,
// the tail-loss probe and EV probes, as Deadline announces and Tick runs
// them.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// noteStall starts the QP's retry clock when it has work, nothing
// outstanding (no packet timer can run) and no path to send on: no plane
// that is up on both sides with a usable EV in its active set. A QP whose
// every path is gone thus fails after the same retry schedule as a packet
// that is never acknowledged, instead of waiting forever.
func (q *QP) noteStall(now int64) {
	if q.stallAt != 0 || !q.busy() || ib.PSNDiff(q.sndNxt, q.cack) != 1 || q.evs.anyPath() {
		return
	}
	q.stallAt = now + q.timeoutFor(q.stallN)
}

// timeoutFor returns the ACK timeout of a transmission after attempts
// timeouts: the base RTO for the linear retries, then doubling.
func (q *QP) timeoutFor(attempts uint8) int64 {
	k := int(attempts) - q.cfg.RetryLinear
	if k <= 0 {
		return q.rto
	}
	return q.rto << uint(min(k, 20))
}

// timerLive reports whether a timer still counts: its PSN is unacknowledged
// and has not been sent again since, whether that transmission is in flight
// or was found lost and waits for retransmission. A waiting packet's clock
// keeps running, so one that cannot be retransmitted (no plane, no EV)
// still reaches its retry limit.
func (q *QP) timerLive(t *timerEnt) bool {
	r := &q.recs[t.psn&q.recMask]
	return r.seq == t.seq && r.state.outstanding()
}

// Deadline returns the earliest time the QP needs Tick: the first live
// per-packet ACK timer, or the next probe of an ASSUMED_BAD EV while the
// requester has work.
func (q *QP) Deadline() (int64, bool) {
	if q.state != verbs.QPReady {
		return 0, false
	}
	for len(q.timers) > 0 && !q.timerLive(&q.timers[0]) {
		q.timers.pop()
	}
	at, ok := int64(0), false
	if len(q.timers) > 0 {
		at, ok = q.timers[0].at, true
	}
	if q.evs.nBad > 0 && q.busy() && (!ok || q.evs.nextProbeAt < at) {
		at, ok = q.evs.nextProbeAt, true
	}
	if q.stallAt != 0 && (!ok || q.stallAt < at) {
		at, ok = q.stallAt, true
	}
	if tlp, due := q.tlpAt(); due && (!ok || tlp < at) {
		at, ok = tlp, true
	}
	return at, ok
}

// tlpAt returns when the tail-loss probe fires, if it is armed: TLPFactor
// × the smoothed RTT (the base RTT before the first sample) after the last
// data transmission or new acknowledgement, while data is in flight,
// nothing waits for retransmission, and this silence period has had no
// probe yet. It always precedes the RTO in practice (2 RTTs against an RTO
// of many); a timer due first wins (Tick runs timers first).
func (q *QP) tlpAt() (int64, bool) {
	if q.cfg.TLPFactor <= 0 || q.tlpFired || q.inflight <= 0 || q.rtxQ.Len() > 0 {
		return 0, false
	}
	rtt := q.srtt
	if rtt <= 0 {
		rtt = int64(q.cc.p.BaseRTT)
	}
	return q.lastProgress + int64(q.cfg.TLPFactor*float64(rtt)), true
}

// tailLossProbe queues the last unacknowledged transmission in flight for
// retransmission (on another EV, as every retransmission), once per
// silence period. Its SACK either acknowledges it — then every earlier
// transmission still missing is lost (tlpCut) — or, if the original had
// arrived, shows what did.
func (q *QP) tailLossProbe() {
	q.tlpFired = true
	for p := ib.PSNAdd(q.sndNxt, -1); ib.PSNDiff(p, q.cack) > 0; p = ib.PSNAdd(p, -1) {
		r := &q.recs[p&q.recMask]
		if r.state == sendInFlight {
			q.lose(p, r)
			r.timedOut = false
			q.tlpPending, q.tlpPSN = true, p
			q.stats.TailLossProbes++
			return
		}
	}
}

// Tick runs the timers due at now: packet timeouts (retransmission,
// EV → ASSUMED_BAD, retry accounting) and probes.
func (q *QP) Tick(now int64) {
	if q.state != verbs.QPReady {
		return
	}
	q.evs.clock = now
	for len(q.timers) > 0 && q.timers[0].at <= now && q.state == verbs.QPReady {
		t := q.timers.pop()
		if !q.timerLive(&t) {
			continue
		}
		q.timeout(now, t.psn, &q.recs[t.psn&q.recMask])
	}
	if q.state == verbs.QPReady && q.stallAt != 0 && now >= q.stallAt {
		q.stallTimeout(now)
	}
	if at, due := q.tlpAt(); due && q.state == verbs.QPReady && now >= at {
		q.tailLossProbe()
	}
	if q.state == verbs.QPReady && q.evs.nBad > 0 && q.busy() && now >= q.evs.nextProbeAt {
		q.probe(now)
	}
	if debugInvariants {
		q.assertInvariants()
	}
}

// timeout handles a packet's timer: its transmission was not acknowledged
// within the timeout. A packet still in flight is presumed lost on a failed
// path and queued for retransmission; one already waiting for
// retransmission (found lost earlier, or with no plane or EV to go on)
// only counts the timeout. Either way its clock is re-armed for the next
// attempt, so the retry limit fires even if it is never sent again.
func (q *QP) timeout(now int64, psn uint32, r *pktRec) {
	if r.state == sendHeld || r.state == sendLost && q.evs.anyPath() {
		// No transmission of it is outstanding, so this is no ACK timeout:
		// a held packet (refused for a resource) is withheld by this side —
		// its timer releases it, while the hole that holds the resource has
		// its own timer, which counts; a queued one was found lost already
		// and waits only for cwnd (htsim keeps no timer for a packet in its
		// retransmission queue). Check again one RTO later; with no path
		// left a queued packet counts, so the QP still fails when every
		// path is gone.
		q.lose(psn, r)
		q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
		return
	}
	q.stats.Timeouts++
	if q.countRetry(&r.attempts) {
		q.fail(verbs.StatusRetryExceeded, r.wr)
		return
	}
	if r.state == sendInFlight {
		q.evs.markBad(r.ev, now, CauseTimeout) // silent timeout: the path is presumed failed
		q.lose(psn, r)
		r.timedOut = true
		q.stats.TimeoutRetransmits++
		q.cc.onTimeout(int64(r.plen)) // htsim: one packet off cwnd, no quick-adapt trigger
	}
	q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
}

// stallTimeout runs the QP's own retry clock (noteStall): a timeout with
// still no path counts toward the retry limit of the first waiting work
// request; a path that came back stops the clock (Send follows Tick).
func (q *QP) stallTimeout(now int64) {
	if q.evs.anyPath() || !q.busy() || ib.PSNDiff(q.sndNxt, q.cack) != 1 {
		q.stallAt, q.stallN = 0, 0
		return
	}
	q.stats.Timeouts++
	if q.countRetry(&q.stallN) {
		q.fail(verbs.StatusRetryExceeded, q.wrBase+uint64(q.wrHead))
		return
	}
	q.stallAt = now + q.timeoutFor(q.stallN)
}

// probe queues a reliability probe on every ASSUMED_BAD EV that is due.
func (q *QP) probe(now int64) {
	for k := range q.evs.evs {
		e := &q.evs.evs[k]
		if e.state != EVAssumedBad || e.nextProbe > now {
			continue
		}
		e.nextProbe = now + q.evs.probeIvl
		if !q.evs.planes[e.plane].up {
			continue
		}
		e.probeSeq++
		q.pushCtrl(ctrlEnt{kind: ctrlProbe, ev: e.ev, seq: e.probeSeq})
	}
	q.evs.recomputeProbe()
}
