package roce

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// This file is Receive and the responder's common part: the DCQCN
// notification point, duplicates and ACK coalescing. Placing new packets
// (in order only, or out of order) is rel's.

// Receive implements verbs.Transport.
func (q *QP) Receive(now int64, rx *verbs.Rx) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady {
		return
	}
	if rx.Trimmed {
		q.stats.TrimmedReceived++
		return
	}
	p := &q.pktHdr
	if p.Decode(rx.Data, max(rx.WireLen, len(rx.Data)), q.rethEvery) != nil || p.DestQP != q.qpn {
		return
	}
	switch p.Opcode {
	case OpAck:
		q.recvAck(now, p)
	case OpCNP:
		q.stats.CNPsReceived++
		q.cc.onCNP(now)
	default:
		q.recvData(now, p, rx.CE)
	}
}

func (q *QP) recvData(now int64, p *Packet, ce bool) {
	if ce {
		q.stats.ECNMarksReceived++
		if q.notifyCE && (!q.cnpAny || now-q.lastCNP >= q.cfg.DCQCN.CNPIntervalNs) {
			q.cnpAny, q.lastCNP = true, now
			q.queueCtrl(ctrlPkt{op: OpCNP})
		}
	}
	d := ib.PSNDiff(p.PSN, q.rpsnOf(q.ePSN))
	if d < 0 {
		// Duplicate: acknowledge (IB C9-110).
		q.stats.DuplicatesReceived++
		if q.ePSN > 0 {
			q.countAck(p.AckReq || q.rel.holding())
		}
		return
	}
	q.rel.receive(now, p, uint64(d))
}

// countAck counts an acknowledgeable packet: the ACK is due at once, or
// after AckEvery of them.
func (q *QP) countAck(now bool) {
	q.unacked++
	if now || q.unacked >= q.cfg.AckEvery {
		q.ackDue = true
	}
}

// completeMessage counts a message whose last packet is in order (MSN).
func (q *QP) completeMessage() { q.msn = ib.PSNAdd(q.msn, 1) }

// recvImm completes a WRITE with Immediate at the responder.
func (q *QP) recvImm(bytes uint64, imm uint32) {
	q.cqe = append(q.cqe, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm, Status: verbs.StatusOK, Bytes: bytes, Imm: imm})
}

// place copies a packet's stored payload into memory (nothing for a
// virtual region or an elided payload) and counts it.
func (q *QP) place(key uint32, va uint64, p *Packet) {
	n := p.PayloadLen
	q.stats.BytesPlaced += uint64(n)
	if n == 0 || p.Elided() {
		return
	}
	if dst, err := q.mem.Bytes(key, va, uint64(n)); err == nil && dst != nil {
		copy(dst, p.Payload)
	}
}
