package mrc

// The requester's send path: work requests segmented into PSNs, data
// packets and retransmissions chosen under cwnd, MPR and MaxWImm, and
// completions in post order.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

type wrState struct {
	wr       verbs.WorkRequest
	firstPSN uint32
	npkts    uint32
	sent     uint32
	started  bool
	// virt: the local region stores no bytes (checked at Post; regions
	// never change), so sending a packet need not look it up.
	virt  bool
	msn   uint16
	rqmsn uint16
}

type sendRec struct {
	seq uint64
	psn uint32
}

func (q *QP) sendData(now int64, free uint32, buf []byte) (verbs.Tx, bool) {
	if free == 0 || !q.evs.canSend(free) {
		q.noteStall(now)
		return verbs.Tx{}, false
	}
	cwnd := q.cwnd()
	for q.rtxQ.Len() > 0 {
		psn := *q.rtxQ.Front()
		r := &q.recs[psn&q.recMask]
		if !q.inFlightRange(psn) || r.state != sendLost {
			q.rtxQ.Pop() // stale: acknowledged since it was queued
			continue
		}
		if q.inflight > 0 && q.inflight+int64(r.plen) > cwnd {
			return verbs.Tx{}, false
		}
		avoid := -1
		if r.timedOut {
			avoid = int(q.evs.evs[r.ev].plane)
		}
		ev := q.evs.pick(now, free, r.ev, avoid)
		if ev < 0 {
			return verbs.Tx{}, false
		}
		q.rtxQ.Pop()
		return q.emitData(now, psn, r, ev, true, buf), true
	}
	if q.wrCur >= len(q.wrs) || ib.PSNDiff(q.sndNxt, q.cack) > q.sndMPR {
		return verbs.Tx{}, false
	}
	w := &q.wrs[q.wrCur]
	if !w.started && w.wr.Op == verbs.OpWriteImm && q.wimm >= q.maxWImm {
		return verbs.Tx{}, false
	}
	pmtu := uint64(q.cfg.PMTU)
	off := uint64(w.sent) * pmtu
	plen := min(pmtu, w.wr.Length-min(off, w.wr.Length))
	if q.inflight > 0 && q.inflight+int64(plen) > cwnd {
		return verbs.Tx{}, false
	}
	ev := q.evs.pick(now, free, -1, -1)
	if ev < 0 {
		q.noteStall(now)
		return verbs.Tx{}, false
	}
	if !w.started {
		w.started = true
		w.firstPSN = q.sndNxt
		w.npkts = uint32(max(1, (w.wr.Length+pmtu-1)/pmtu))
		w.msn = q.msn
		q.msn++
		if w.wr.Op == verbs.OpWriteImm {
			w.rqmsn = q.rqmsn
			q.rqmsn++
			q.wimm++
		}
	}
	psn := q.sndNxt
	q.sndNxt = ib.PSNAdd(psn, 1)
	r := &q.recs[psn&q.recMask]
	*r = pktRec{wr: q.wrBase + uint64(q.wrCur), off: uint32(off), plen: uint32(plen)}
	w.sent++
	if w.sent == w.npkts {
		q.wrCur++
	}
	return q.emitData(now, psn, r, ev, false, buf), true
}

func (q *QP) emitData(now int64, psn uint32, r *pktRec, ev int32, rtx bool, buf []byte) verbs.Tx {
	w := q.wrAt(r.wr)
	pmtu := uint32(q.cfg.PMTU)
	idx := r.off / pmtu
	first, last := idx == 0, idx == w.npkts-1
	imm := w.wr.Op == verbs.OpWriteImm
	var op uint8
	switch {
	case first && last && imm:
		op = OpWriteOnlyImm
	case first && last:
		op = OpWriteOnly
	case last && imm:
		op = OpWriteLastImm
	case last:
		op = OpWriteLast
	case first:
		op = OpWriteFirst
	default:
		op = OpWriteMiddle
	}
	r.ev = ev
	r.sendTime = now
	q.stallAt, q.stallN = 0, 0
	q.lastProgress = now
	if !rtx {
		q.tlpFired = false // new data: a new tail to watch
	}
	q.txSeq++
	r.seq = q.txSeq
	if rtx && q.tlpPending && psn == q.tlpPSN {
		q.tlpPending, q.tlpSeq = false, r.seq
	}
	r.tx++
	q.setState(psn, r, sendInFlight)
	// AckReq: on the last packet of a message, and whenever this packet
	// closes the window (cwnd or MPR), so the responder never sits on
	// unacknowledged data below its byte threshold.
	ar := last || q.inflight+int64(q.cfg.PMTU) > q.cwnd() || ib.PSNDiff(psn, q.cack) >= q.sndMPR
	h := DataHeader{
		BTH:   BTH{Opcode: op, PKey: DefaultPKey, DestQP: q.remote.QPN, AckReq: ar, Rtx: rtx, TS: true, PSN: psn},
		METH:  METH{RQMSN: w.rqmsn, MSN: w.msn},
		TSETH: TSETH{TS: uint16(now >> 7)},
		RETH:  RETH{VA: w.wr.RemoteVA + uint64(r.off), RKey: w.wr.RemoteKey, DMALen: uint32(w.wr.Length)},
		Imm:   w.wr.Imm,
	}
	hl, _ := h.Encode(buf)
	n := hl
	if !w.virt { // an elided payload has nothing to copy: no lookup
		if src, err := q.mem.Bytes(w.wr.LocalKey, w.wr.LocalVA+uint64(r.off), uint64(r.plen)); err == nil && src != nil {
			n += copy(buf[hl:], src)
			putICRC(buf[n:])
			n += ICRCLen
		}
	}
	q.order.Push(sendRec{seq: r.seq, psn: psn})
	q.timers.push(timerEnt{at: now + q.timeoutFor(r.attempts), seq: r.seq, psn: psn})
	dscp := uint8(verbs.DSCPTrimmable)
	if rtx {
		dscp = verbs.DSCPTrimmableRetx
		q.stats.Retransmissions++
	} else {
		q.stats.DataPacketsSent++
	}
	return verbs.Tx{Len: n, WireLen: hl + int(r.plen) + ICRCLen, DstHost: q.remote.Host,
		EV: q.evs.evs[ev].ev, DSCP: dscp, ECT: true}
}

// completeWRs completes, in post order, the WRs whose every PSN is
// cumulatively acknowledged.
func (q *QP) completeWRs() {
	for q.wrHead < q.wrCur {
		w := &q.wrs[q.wrHead]
		if ib.PSNDiff(q.cack, ib.PSNAdd(w.firstPSN, int(w.npkts)-1)) < 0 {
			break
		}
		q.comps = append(q.comps, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op,
			Status: verbs.StatusOK, Bytes: w.wr.Length})
		q.stats.BytesCompleted += w.wr.Length
		if w.wr.Op == verbs.OpWriteImm {
			q.wimm--
		}
		q.wrHead++
	}
	if q.wrHead >= 256 && 2*q.wrHead >= len(q.wrs) {
		n := copy(q.wrs, q.wrs[q.wrHead:])
		clear(q.wrs[n:])
		q.wrs = q.wrs[:n]
		q.wrBase += uint64(q.wrHead)
		q.wrCur -= q.wrHead
		q.wrHead = 0
	}
}

// fail moves the QP to ERROR: WR failing completes with status, every
// other outstanding WR with StatusFlushed, in post order.
func (q *QP) fail(status verbs.Status, failing uint64) {
	if q.state == verbs.QPError {
		return
	}
	q.state = verbs.QPError
	q.err = failError(status, q.cfg.RetryLinear+q.cfg.RetryExp+1)
	for k := q.wrHead; k < len(q.wrs); k++ {
		w := &q.wrs[k]
		st := verbs.StatusFlushed
		if q.wrBase+uint64(k) == failing {
			st = status
		}
		q.comps = append(q.comps, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: st})
	}
	q.wrBase += uint64(len(q.wrs))
	q.wrs = q.wrs[:0]
	q.wrHead, q.wrCur = 0, 0
	q.rtxQ.Clear()
	q.order.Clear()
	q.timers = q.timers[:0]
	q.stallAt = 0
	q.ctrl.Clear()
	q.inflight = 0
}
