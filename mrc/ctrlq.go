package mrc

// The queue of control packets (SACK, ACK, NACK, probe) waiting for Send,
// and their encoding when Send takes them.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// ctrl kinds.
const (
	ctrlSACK uint8 = iota
	ctrlAck
	ctrlAckNak
	ctrlNACK
	ctrlProbe
)

type ctrlEnt struct {
	kind      uint8
	m         uint8
	code      uint8
	probeResp bool
	rtxEcho   bool
	ts        uint16
	seq       uint16
	psn       uint32
	ev        uint32
}

// pushCtrl queues a control packet, or drops and counts it when the queue
// holds CtrlQueue already (a power of two ≥ 16, Validate: the ring grows
// to exactly that).
func (q *QP) pushCtrl(e ctrlEnt) {
	if q.ctrl.Len() >= q.cfg.CtrlQueue {
		q.ms.CtrlDropped++
		return
	}
	q.ctrl.Push(e)
}

func (q *QP) sendCtrl(now int64, buf []byte) (verbs.Tx, bool) {
	e := q.ctrl.Pop()
	cack := ib.PSNAdd(q.ePSN, -1)
	bth := BTH{PKey: DefaultPKey, DestQP: q.remote.QPN, PSN: cack}
	var n int
	switch e.kind {
	case ctrlSACK:
		s := SETH{M: e.m, ProbeResp: e.probeResp, RtxEcho: e.rtxEcho, EV: e.ev, CackPSN: cack,
			MPR: uint8(q.rcvWin / 128)}
		ao := ib.PSNDiff(e.psn, cack)
		s.AckOffset = int16(max(-1<<15, min(1<<15-1, ao)))
		off := 1
		if o := ib.PSNDiff(e.psn, q.ePSN); o > 47 {
			off = o - 46
		}
		s.SackOffset = uint16(off)
		s.Bitmap = q.sackBits(ib.PSNAdd(cack, off))
		c := CCState{TSEcho: e.ts, OOOCount: uint16(min(q.rcount, 0x7fff)), RcvCwndPen: q.rcvPen,
			RcvdBytes: uint32(q.rcvdBytes>>8) & ib.PSNMask}
		n, _ = EncodeSACK(buf, bth, &s, &c)
		q.ms.SACKsSent++
	case ctrlAck:
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: AckSyndrome, MSN: q.rmsn})
		q.ms.AcksSent++
	case ctrlAckNak:
		bth.PSN = e.psn
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: e.code, MSN: q.rmsn})
		q.ms.AcksSent++
	case ctrlNACK:
		bth.PSN = e.psn
		n, _ = EncodeNACK(buf, bth, &NETH{Code: e.code, RtxEcho: e.rtxEcho, TSEcho: e.ts, EV: e.ev, PSN: e.psn})
		q.ms.NACKsSent++
	case ctrlProbe:
		bth.PSN = ib.PSNAdd(q.sndNxt, -1)
		n, _ = EncodeProbe(buf, bth, PETH{EV: e.ev, Seq: e.seq, TS: uint16(now >> 7)})
		q.ms.ProbesSent++
	}
	q.stats.ControlPacketsSent++
	return verbs.Tx{Len: n, WireLen: n, DstHost: q.remote.Host, EV: e.ev, DSCP: verbs.DSCPControl}, true
}
