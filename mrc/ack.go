package mrc

// The requester's acknowledgement path: SACKs (cumulative ack, bitmap, RTT
// sample, path feedback, NSCC) and Transport ACKs.

import (
	"math/bits"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

func (q *QP) rcvSACK(now int64, rx *verbs.Rx) {
	_, s, c, err := DecodeSACK(rx.Data)
	if err != nil {
		q.stats.Malformed++
		return
	}
	cack := s.CackPSN
	if ib.PSNDiff(cack, ib.PSNAdd(q.sndNxt, -1)) > 0 {
		q.stats.Malformed++ // acknowledges PSNs never sent
		return
	}
	// Dynamic MPR: the responder's current window bounds what is sent
	// beyond cack from now on (never beyond the negotiated one; packets
	// already sent beyond a shrunk window are not recalled). 0 is no
	// window at all and is ignored.
	if s.MPR > 0 {
		q.sndMPR = min(int(s.MPR)*128, q.negMPR)
	}
	evi := q.evs.lookup(s.EV)
	if s.ProbeResp {
		q.stats.ProbeReplies++
		if evi >= 0 {
			q.evs.probeAnswered(evi, s.M == PathSkipOnce, now)
		}
	} else if evi >= 0 {
		q.evs.feedback(evi, s.M, now)
	}
	// RTT sample from the triggering packet, valid (htsim's
	// validateSendTs) when it was sent once and the SACK does not echo
	// rtx, or sent exactly twice and the SACK echoes rtx: then the sample
	// times the transmission that triggered it.
	var delay int64
	hasDelay := false
	if trig := ib.PSNAdd(cack, int(s.AckOffset)); !s.ProbeResp && q.inFlightRange(trig) {
		r := &q.recs[trig&q.recMask]
		if r.state != sendFree && (r.tx == 1 && !s.RtxEcho || r.tx == 2 && s.RtxEcho) {
			rtt := now - r.sendTime
			q.sampleRTT(rtt)
			delay, hasDelay = max(0, rtt-int64(q.cc.p.BaseRTT)), true
		}
	}
	// NSCC's acknowledged bytes are the responder's newly received bytes
	// (CC_STATE received bytes, 256-B units modulo 2^24; htsim's
	// recvd_bytes): a SACK that arrives after a later one adds nothing.
	var rcvd int64
	if d := int32((c.RcvdBytes-q.rcvdUnits)<<8) >> 8; d > 0 {
		rcvd = int64(d) << 8
		q.rcvdUnits = c.RcvdBytes & ib.PSNMask
	}
	newly := q.ackCumulative(cack)
	base := ib.PSNAdd(cack, int(s.SackOffset))
	for bm := s.Bitmap; bm != 0; bm &= bm - 1 {
		p := ib.PSNAdd(base, bits.TrailingZeros64(bm))
		if q.inFlightRange(p) {
			if r := &q.recs[p&q.recMask]; r.state != sendFree && r.state != sendAcked {
				newly += q.ackRec(p, r)
			}
		}
	}
	if newly > 0 {
		q.progress(now)
	}
	// ALWAYS_SKIP is judged on CE-marked arrivals (ResponderConfig), so it
	// echoes a mark too.
	q.cc.onAck(now, rcvd, delay, hasDelay, (s.M == PathSkipOnce || s.M == PathAlwaysSkip) && !s.ProbeResp, q.inflight)
	q.cc.onPenalty(c.RcvCwndPen)
	if q.cfg.LossDetection == LossOOO {
		q.sleek(now, int(c.OOOCount), cack)
	}
	q.detectLoss(now)
	q.completeWRs()
}

// progress notes a new acknowledgement: the silence the tail-loss probe
// waits for starts again, and it may fire again.
func (q *QP) progress(now int64) {
	q.lastProgress = now
	q.tlpFired = false
	q.tlpPending = false // a probe not yet sent is an ordinary retransmission now
}

func (q *QP) sampleRTT(rtt int64) {
	if q.srtt == 0 {
		q.srtt = rtt
	} else {
		q.srtt += (rtt - q.srtt) / 8
	}
	st := &q.stats.QPStats
	st.RTTSamples++
	st.LastRTT = rtt
	if st.MinRTT == 0 || rtt < st.MinRTT {
		st.MinRTT = rtt
	}
	q.cc.onRTT(rtt)
}

// ackCumulative acknowledges every PSN up to cack and frees their records.
func (q *QP) ackCumulative(cack uint32) int64 {
	var newly int64
	for ib.PSNDiff(cack, q.cack) > 0 {
		p := ib.PSNAdd(q.cack, 1)
		r := &q.recs[p&q.recMask]
		if r.state != sendFree && r.state != sendAcked {
			newly += q.ackRec(p, r)
		}
		if r.state != sendFree {
			q.setState(p, r, sendFree)
		}
		q.cack = p
	}
	if q.held > 0 && newly > 0 {
		q.releaseHeld()
	}
	return newly
}

// releaseHeld queues every packet held after a resource NACK for
// retransmission.
func (q *QP) releaseHeld() {
	for p := ib.PSNAdd(q.cack, 1); q.held > 0 && ib.PSNDiff(p, q.sndNxt) < 0; p = ib.PSNAdd(p, 1) {
		if r := &q.recs[p&q.recMask]; r.state == sendHeld {
			r.nacks = 0
			q.lose(p, r)
		}
	}
	q.held = 0
}

// ackRec acknowledges psn's unacknowledged record r and returns its bytes.
func (q *QP) ackRec(psn uint32, r *pktRec) int64 {
	q.setState(psn, r, sendAcked)
	q.retries = 0 // forward progress resets the connection's retry counter
	if q.tlpSeq != 0 && r.seq == q.tlpSeq {
		// The probe got through: whatever was sent before it and is
		// still unacknowledged, after more than TLPFactor RTTs of
		// silence, is lost (detectLoss).
		q.tlpCut, q.tlpSeq = max(q.tlpCut, r.seq), 0
	}
	if r.tx == 1 {
		if r.seq > q.hiAcked {
			q.hiAcked = r.seq
		}
		q.evs.delivered(r.ev)
	}
	return int64(r.plen)
}

func (q *QP) rcvAck(now int64, rx *verbs.Rx) {
	bth, a, err := DecodeAck(rx.Data)
	if err != nil {
		q.stats.Malformed++
		return
	}
	if a.Syndrome>>5 == 0b011 { // AETH NAK
		q.stats.AckNaksReceived++
		wr := q.wrBase + uint64(q.wrHead)
		if q.inFlightRange(bth.PSN) {
			if r := &q.recs[bth.PSN&q.recMask]; r.state != sendFree {
				wr = r.wr
			}
		}
		switch a.Syndrome & 0x1f {
		case NakRemoteAccessError & 0x1f:
			q.fail(verbs.StatusRemoteAccess, wr)
		default:
			q.fail(verbs.StatusRemoteOp, wr)
		}
		return
	}
	if a.Syndrome>>5 != 0 {
		return
	}
	if ib.PSNDiff(bth.PSN, ib.PSNAdd(q.sndNxt, -1)) > 0 {
		q.stats.Malformed++
		return
	}
	// NSCC hears of these bytes through the received-bytes count of the
	// SACK that accompanies every Transport ACK (or a later one).
	if q.ackCumulative(bth.PSN) > 0 {
		q.progress(now)
	}
	q.detectLoss(now)
	q.completeWRs()
}
