package roce

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// ctrlPkt is a queued control packet: a NAK, an IRN NACK, an ACK ahead of
// an error NAK, or a CNP.
type ctrlPkt struct {
	op       uint8 // OpAck or OpCNP
	syndrome uint8 // AETH syndrome (OpAck)
	psn, msn uint32
}

// ctrlQueueMax bounds the control queue: past it a control packet is
// dropped (only the requester's knowledge of SACKs suffers; the timers
// recover the rest).
const ctrlQueueMax = 64

// queueCtrl queues c for the next Send, ahead of everything else.
func (q *QP) queueCtrl(c ctrlPkt) {
	if q.ctrl.Len() == ctrlQueueMax {
		return
	}
	q.ctrl.Push(c)
}

// ackPkt is the ACK for everything below ePSN: its PSN is ePSN−1's.
func (q *QP) ackPkt() ctrlPkt {
	return ctrlPkt{op: OpAck, syndrome: SyndromeACK | CreditsInvalid, psn: q.rpsnOf(q.ePSN - 1), msn: q.msn}
}

// nak queues a NAK with code and the PSN of seq.
func (q *QP) nak(code uint8, seq uint64, msn uint32) {
	q.queueCtrl(ctrlPkt{op: OpAck, syndrome: SyndromeNAK | code, psn: q.rpsnOf(seq), msn: msn})
}

// sendCtrl encodes c into buf. Control packets are not ECN-capable and
// use DSCPControl.
func (q *QP) sendCtrl(buf []byte, c ctrlPkt) (verbs.Tx, bool) {
	h := &q.hdrWrite
	*h = Header{BTH: ib.BTH{Opcode: c.op, PKey: DefaultPKey, DestQP: q.peer.QPN, PSN: c.psn}}
	if c.op == OpCNP {
		h.BECN = true
		h.PSN = 0
		q.stats.CNPsSent++
	} else {
		h.AETH = AETH{Syndrome: c.syndrome, MSN: c.msn}
	}
	stored, wire, err := Encode(buf, h, q.rethEvery, nil, 0)
	if err != nil {
		panic("roce: Send buffer shorter than verbs.MaxTxBytes")
	}
	q.stats.ControlPacketsSent++
	return verbs.Tx{Len: stored, WireLen: wire, DstHost: q.peer.Host, EV: q.ev, DSCP: verbs.DSCPControl}, true
}
