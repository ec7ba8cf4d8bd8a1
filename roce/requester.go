package roce

import (
	"math"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// This file is the requester: Send (control packets first, then paced
// data) and what answers it, ACKs and NAKs. Which packet goes next and
// how losses are repaired is rel's; the rate is cc's.

// pkt returns the record of outstanding sequence seq (sndUna ≤ seq <
// sndMax).
func (q *QP) pkt(seq uint64) *pktInfo { return q.pk.at(seq) }

// Send implements verbs.Transport.
func (q *QP) Send(now int64, freePlanes uint32, buf []byte) (verbs.Tx, bool) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.ctrl.Len() > 0 {
		return q.sendCtrl(buf, q.ctrl.Pop())
	}
	if q.state != verbs.QPReady {
		return verbs.Tx{}, false
	}
	if q.ackDue {
		q.ackDue = false
		q.unacked = 0
		return q.sendCtrl(buf, q.ackPkt())
	}
	if freePlanes&(1<<uint(q.cfg.Plane)) == 0 {
		// The port is full: the engine asks again when it drains, so no
		// pacing deadline (a stale one would wake the QP for nothing, at
		// the same instant, forever).
		q.paceWait = false
		return verbs.Tx{}, false
	}
	seq, wi, retx, ok := q.rel.next()
	if !ok {
		q.paceWait = false
		return verbs.Tx{}, false
	}
	// Pacing at the current rate, in picoseconds: the deadline is rounded
	// up to the ns, but a packet sent within that ns starts at its exact
	// time, so the fraction carries to the next gap instead of being lost
	// on every packet (which cost 3.7% of 1.6T with 4 KB packets). A
	// packet sent later than that (idle, or waiting for the port) starts
	// at now: no credit is banked.
	nowPs := now * 1000
	startPs := nowPs
	if q.sentAny {
		at := q.lastSendPs + int64(math.Round(float64(q.lastBits)*1e12/q.cc.rate(now)))
		if nowPs < at {
			q.paceWait = true
			q.paceAt = (at + 999) / 1000
			return verbs.Tx{}, false
		}
		if nowPs-at < 1000 {
			startPs = at
		}
	}
	q.paceWait = false
	tx := q.buildData(now, seq, wi, buf)
	if retx {
		q.stats.Retransmissions++
	} else {
		q.stats.DataPacketsSent++
	}
	q.lastSendPs, q.lastBits, q.sentAny = startPs, int64(tx.WireLen+q.cfg.WireOverhead)*8, true
	q.cc.onSent(tx.WireLen)
	if !q.rto.on {
		q.armRTO(now)
	} else if q.rtoVaries {
		// IRN: RTO_low or RTO_high by what is in flight now.
		q.rto.at = q.rto.from + q.rel.rto()
	}
	return tx, true
}

// buildData encodes data packet seq, of WR wi, into buf and advances the
// send state.
func (q *QP) buildData(now int64, seq uint64, wi int, buf []byte) verbs.Tx {
	w := q.wrs.At(wi)
	idx := seq - w.first
	mtu := uint64(q.cfg.PMTU)
	off := idx * mtu
	n := min(mtu, w.wr.Length-off)
	if w.wr.Length == 0 {
		n = 0
	}
	last := idx == w.n-1
	imm := w.wr.Op == verbs.OpWriteImm
	h := &q.hdrWrite
	*h = Header{BTH: ib.BTH{PKey: DefaultPKey, DestQP: q.peer.QPN, PSN: q.psnOf(seq)}}
	switch {
	case w.n == 1 && imm:
		h.Opcode = OpWriteOnlyImm
	case w.n == 1:
		h.Opcode = OpWriteOnly
	case idx == 0:
		h.Opcode = OpWriteFirst
	case last && imm:
		h.Opcode = OpWriteLastImm
	case last:
		h.Opcode = OpWriteLast
	default:
		h.Opcode = OpWriteMiddle
	}
	h.AckReq = last
	h.RETH = RETH{VA: w.wr.RemoteVA + off, RKey: w.wr.RemoteKey, DMALen: uint32(w.wr.Length)}
	if idx == 0 {
		h.RETH.VA = w.wr.RemoteVA
	}
	if last && imm {
		h.Imm = w.wr.Imm
	}
	var payload []byte
	if n > 0 {
		payload, _ = q.mem.Bytes(w.wr.LocalKey, w.wr.LocalVA+off, n)
	}
	stored, wire, err := Encode(buf, h, q.rethEvery, payload, int(n))
	if err != nil {
		panic("roce: Send buffer shorter than verbs.MaxTxBytes")
	}
	// Advance the send state.
	resend := seq != q.sndMax
	if resend {
		p := q.pkt(seq)
		p.state = p.state.next(evResend)
	} else {
		if q.pk.full(q.sndUna, seq) {
			q.pk.grow(q.sndUna, seq)
		}
		*q.pkt(seq) = pktInfo{sent: now}
		q.sndMax++
	}
	q.rel.sent(seq, resend)
	return verbs.Tx{Len: stored, WireLen: wire, DstHost: q.peer.Host, EV: q.ev, DSCP: verbs.DSCPRoCE, ECT: true}
}

// ackTo acknowledges every sequence below seq (which lies in
// [sndUna, sndMax]) and completes the WRs it covers. It reports progress.
func (q *QP) ackTo(seq uint64) bool {
	if seq <= q.sndUna {
		return false
	}
	q.sndUna = seq
	q.rel.acked(seq)
	q.retries = 0
	for q.wrs.Len() > 0 {
		w := q.wrs.Front()
		if w.end() > seq {
			break
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: verbs.StatusOK, Bytes: w.wr.Length})
		q.stats.BytesCompleted += w.wr.Length
		q.wrs.pop()
	}
	return true
}

// fail completes the oldest WR with st, flushes the rest and moves the QP
// to ERROR.
func (q *QP) fail(st verbs.Status) {
	if q.wrs.Len() > 0 {
		q.failAt(q.wrs.Front().first, st)
	}
	q.enterError()
}

// failAt completes the WR holding seq with st and every other outstanding
// WR (under IRN, earlier ones may not be fully placed) with FLUSHED, and
// moves the QP to ERROR.
func (q *QP) failAt(seq uint64, st verbs.Status) {
	for i := 0; i < q.wrs.Len(); i++ {
		w := q.wrs.At(i)
		s := verbs.StatusFlushed
		if w.first <= seq && seq < w.end() {
			s = st
		}
		q.cqe = append(q.cqe, verbs.Completion{WRID: w.wr.ID, QPN: q.qpn, Op: w.wr.Op, Status: s})
	}
	q.wrs.clear()
	q.enterError()
}

// recvAck handles an ACKNOWLEDGE packet: an ACK, a NAK-sequence-error (an
// IRN NACK too) or an error NAK.
func (q *QP) recvAck(now int64, p *Packet) {
	// Unwrap the PSN against sndUna.
	d := ib.PSNDiff(p.PSN, q.psnOf(q.sndUna))
	a := p.AETH
	switch {
	case a.IsACK():
		if d < -1 || uint64(d+1) > q.sndMax-q.sndUna {
			return
		}
		seq := q.sndUna + uint64(d+1)
		if q.ackTo(seq) {
			q.rttSample(now, seq)
		}
		q.armRTO(now)
	case a.IsNAK():
		if d < 0 || uint64(d) > q.sndMax-q.sndUna {
			return
		}
		seq := q.sndUna + uint64(d) // the expected PSN (sequence error) or the failing PSN
		q.stats.NacksReceived++
		switch a.Code() {
		case NakPSNSeqError:
			progress := q.ackTo(seq)
			// An IRN NACK's MSN field is the SACKed PSN (doc.go).
			if !q.rel.seqNAK(seq, a.MSN, progress) {
				return
			}
			q.armRTO(now)
		default:
			st := verbs.StatusRemoteOp // invalid request, remote operational error
			if a.Code() == NakRemoteAccess {
				st = verbs.StatusRemoteAccess
			}
			q.rel.errorNAK(seq)
			q.failAt(seq, st)
		}
	}
}

// rttSample takes an RTT sample from an ACK up to ackSeq from its last
// packet's record (Karn: none if it was retransmitted).
func (q *QP) rttSample(now int64, ackSeq uint64) {
	last := q.pkt(ackSeq - 1)
	if last.state.resent() {
		return
	}
	rtt := now - last.sent
	q.stats.RTTSamples++
	q.stats.LastRTT = rtt
	if q.stats.MinRTT == 0 || rtt < q.stats.MinRTT {
		q.stats.MinRTT = rtt
	}
	q.cc.onRTT(rtt, ackSeq, q.sndMax)
}
