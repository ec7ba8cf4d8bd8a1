package mrc

// The requester's loss detection and retry accounting: NACKs, the
// fast-loss rule (LossOOO's SLEEK, LossPerHole), and the retry limit.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// lose takes a PSN's current transmission out of flight and queues it for
// retransmission.
func (q *QP) lose(psn uint32, r *pktRec) {
	if r.state != sendLost {
		q.setState(psn, r, sendLost)
	}
}

// sleekThreshold is the fast-loss threshold in packets.
//
// It is also capped at 3/4 of the PSN window the peer allows (MPR): the
// requester never sends beyond cack + MPR, so neither the out-of-order
// count nor the packets sent after a hole can exceed the window, and
// htsim's threshold (1.5·cwnd up to maxwnd, from a transport with no PSN
// window) would never be reached once the window is below maxwnd — at the
// spec's one unit (128 PSNs) on a 400G NIC, every loss would wait for the
// tail-loss probe or the RTO ([I], issue #16).
func (q *QP) sleekThreshold() uint64 {
	mtu := float64(q.cfg.PMTU)
	t := min(q.cfg.SleekFactor*q.cc.cwnd, q.cc.p.MaxWnd) / mtu
	t = min(t, float64(3*q.sndMPR/4))
	return uint64(max(float64(q.cfg.SleekMinPackets), t))
}

// detectLoss walks the transmissions in send order: one is lost once an
// acknowledged tail-loss probe was sent after it (tlpCut) or, under
// LossPerHole ([I], SLEEK-like, per hole), once transmissions sent ≥
// threshold after it have been acknowledged. Under LossOOO the walk only
// drops settled transmissions (and applies tlpCut); sleek finds losses.
func (q *QP) detectLoss(now int64) {
	perHole := q.cfg.LossDetection == LossPerHole
	var thr uint64
	if perHole {
		thr = q.sleekThreshold()
	}
	for q.order.Len() > 0 {
		f := q.order.Front()
		r := &q.recs[f.psn&q.recMask]
		settled := r.state != sendInFlight || r.seq != f.seq || !q.inFlightRange(f.psn)
		if !settled && f.seq >= q.tlpCut && (!perHole || f.seq+thr > q.hiAcked) {
			return
		}
		psn := q.order.Pop().psn
		if !settled {
			q.fastLose(now, psn, r, true)
		}
	}
}

// fastLose retransmits a packet the fast-loss rule (or the tail-loss
// probe's cut) found lost. With penalize, such a silent loss counts
// against its EV (EVLossThreshold consecutive ones → ASSUMED_BAD).
func (q *QP) fastLose(now int64, psn uint32, r *pktRec, penalize bool) {
	q.lose(psn, r)
	r.timedOut = false
	q.stats.FastRetransmits++
	if penalize {
		q.evs.silentLoss(r.ev, now)
	}
}

// sleek is the spec's fast-loss rule ([I], htsim's runSleek), run on every
// SACK with its out-of-order count and its cumulative ack (cack): when the
// count reaches the threshold the QP enters loss recovery until the QP's
// cumulative ack reaches the highest PSN sent so far; while it lasts, every
// SACK retransmits the unacknowledged PSNs in [cack+1, min(that end,
// cack+1 + cwnd in packets)) not retransmitted yet in this recovery.
//
// The range is anchored at the SACK's own cumulative ack, as htsim anchors
// runSleek's at the ACK's cum_ack: the out-of-order count describes the
// PSNs above that ack. A SACK overtaken by a later one (SACKs are sprayed
// too) carries an older cack; read from the QP's newer cack instead, its
// range would reach PSNs sent after that SACK left the responder, still in
// flight, and resend them.
func (q *QP) sleek(now int64, ooo int, cack uint32) {
	if q.recovery && ib.PSNDiff(q.cack, q.recEnd) >= -1 {
		q.recovery = false
	}
	if !q.recovery {
		if uint64(ooo) < q.sleekThreshold() || q.rtxQ.Len() > 0 {
			return
		}
		q.recovery, q.recEnd, q.rtxNext = true, q.sndNxt, ib.PSNAdd(q.cack, 1)
		q.stats.LossRecoveries++
	}
	from := ib.PSNAdd(q.cack, 1)
	if ib.PSNDiff(q.rtxNext, from) > 0 {
		from = q.rtxNext
	}
	// cack ≤ q.cack: rcvSACK applied it first.
	end := ib.PSNAdd(cack, 1+int(q.cwnd()/int64(q.cfg.PMTU)))
	if ib.PSNDiff(q.recEnd, end) < 0 {
		end = q.recEnd
	}
	for p := from; ib.PSNDiff(p, end) < 0; p = ib.PSNAdd(p, 1) {
		r := &q.recs[p&q.recMask]
		q.rtxNext = ib.PSNAdd(p, 1)
		if r.state == sendInFlight {
			// Recovery resends every unacknowledged PSN in range, also
			// those merely still in flight (htsim's runSleek does not
			// penalise paths at all). Only a packet a later transmission
			// overtook (sent before the newest acknowledged one) is a
			// likely loss on its EV's path.
			q.fastLose(now, p, r, r.seq < q.hiAcked)
		}
	}
}

func (q *QP) rcvNACK(now int64, rx *verbs.Rx) {
	_, n, err := DecodeNACK(rx.Data)
	if err != nil {
		q.stats.Malformed++
		return
	}
	switch n.Code {
	case NackTrimmed:
		q.stats.TrimNacksReceived++
	case NackTrimmedLastHop:
		q.stats.TrimLastHopNacksReceived++
	case NackUnexpEvent:
		q.stats.UnexpEventsReceived++
	default:
		q.stats.OtherNacksReceived++
	}
	q.stats.NacksReceived++
	if !q.inFlightRange(n.PSN) {
		if n.Code == NackUnexpEvent {
			q.fail(verbs.StatusRemoteOp, q.wrBase+uint64(q.wrHead))
		}
		return
	}
	r := &q.recs[n.PSN&q.recMask]
	if r.state == sendFree || r.state == sendAcked {
		return
	}
	evi := q.evs.lookup(n.EV)
	current := r.state == sendInFlight && evi == r.ev // the NACK is about the current transmission
	switch n.Code {
	case NackTrimmed, NackTrimmedLastHop:
		if !current {
			return
		}
		q.lose(n.PSN, r)
		r.timedOut = false
		q.stats.TrimRetransmits++
		if q.cfg.TrimReaction {
			if n.Code == NackTrimmed {
				q.evs.skip(evi, now, CauseTrim)
			}
			q.cc.onTrim(now, int64(r.plen), q.inflight)
		}
	case NackNoBitmap, NackNoPktBuffer, NackNoResource, NackPSNOutOfWindow:
		if !current {
			return
		}
		// These count toward the packet's retry limit (PROTOCOLS.md's NACK
		// table), not the connection's timeout counter: one burst refused by
		// a full bitmap is many NACKs in one RTT, and would otherwise fail
		// the QP before the hole that holds the bitmap is repaired. The
		// count restarts when the cumulative ack moves (the resource is
		// freeing) and does not stretch the packet's ACK timer.
		if r.nacks < 255 {
			r.nacks++
		}
		if q.retryExceeded(int(r.nacks)) {
			q.fail(verbs.StatusRetryExceeded, r.wr)
			return
		}
		r.timedOut = false
		q.stats.NackRetransmits++
		if n.Code == NackPSNOutOfWindow || n.PSN == ib.PSNAdd(q.cack, 1) {
			// Out of window: send again. At cack+1 the packet is itself
			// what the cumulative ack waits for (the SACK that moved cack
			// may have overtaken the NACK): holding it would stall the QP
			// until its timer.
			q.lose(n.PSN, r)
			return
		}
		// A resource NACK: sending again at once is refused again until
		// ePSN moves, so wait for the cumulative ack to move (the packet's
		// timer still runs: no progress for an RTO retransmits it anyway).
		q.setState(n.PSN, r, sendHeld)
	case NackUnexpEvent:
		q.fail(verbs.StatusRemoteOp, r.wr)
	}
}

func (q *QP) retryExceeded(attempts int) bool {
	if q.cfg.RetryExp >= 25 {
		return false
	}
	return attempts > q.cfg.RetryLinear+q.cfg.RetryExp
}

// countRetry counts one ACK timeout against attempts — a packet's, or the
// QP's stall clock's — and, under RetryConnection, against the
// connection's counter. It reports
// whether the limit RetryScope applies is exceeded. attempts alone drives
// the backoff of that packet's next timer.
func (q *QP) countRetry(attempts *uint8) bool {
	if *attempts < 255 {
		*attempts++
	}
	if q.cfg.RetryScope == RetryConnection {
		q.retries++
		return q.retryExceeded(q.retries)
	}
	return q.retryExceeded(int(*attempts))
}
