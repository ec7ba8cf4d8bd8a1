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

// ctrlEnt is one queued control packet: what sendCtrl needs to build it
// when Send takes it (the cumulative ack, bitmap and counters are read
// then, not when it was queued).
type ctrlEnt struct {
	kind      uint8  // ctrlSACK … ctrlProbe
	m         uint8  // SACK path feedback (the spec's M: PathNone, PathSkipOnce, PathAlwaysSkip)
	code      uint8  // NACK code, or the AETH NAK syndrome of ctrlAckNak
	probeResp bool   // SACK answers a probe (the spec's P flag)
	rtxEcho   bool   // the triggering packet had rtx set
	ts        uint16 // the triggering packet's timestamp, echoed
	seq       uint16 // probe sequence number (PETH)
	psn       uint32 // the triggering PSN (SACK ack_offset, NACK nack_psn)
	ev        uint32 // the EV it travels back on: the triggering packet's
}

// pushCtrl queues a control packet, or drops and counts it when the queue
// holds CtrlQueue already (a power of two ≥ 16, Validate: the ring grows
// to exactly that).
func (q *QP) pushCtrl(e ctrlEnt) {
	if q.ctrl.Len() >= q.cfg.CtrlQueue {
		q.stats.CtrlDropped++
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
		c := CCState{TSEcho: e.ts, OOOCount: uint16(min(q.rcvAbove, 0x7fff)), RcvCwndPen: q.rcvPen,
			RcvdBytes: uint32(q.rcvdBytes>>8) & ib.PSNMask}
		n, _ = EncodeSACK(buf, bth, &s, &c)
		q.stats.SACKsSent++
	case ctrlAck:
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: AckSyndrome, MSN: q.rcvMSN})
		q.stats.AcksSent++
	case ctrlAckNak:
		bth.PSN = e.psn
		n, _ = EncodeAck(buf, bth, AETH{Syndrome: e.code, MSN: q.rcvMSN})
		q.stats.AcksSent++
	case ctrlNACK:
		bth.PSN = e.psn
		n, _ = EncodeNACK(buf, bth, &NETH{Code: e.code, RtxEcho: e.rtxEcho, TSEcho: e.ts, EV: e.ev, PSN: e.psn})
		q.stats.NACKsSent++
	case ctrlProbe:
		bth.PSN = ib.PSNAdd(q.sndNxt, -1)
		n, _ = EncodeProbe(buf, bth, PETH{EV: e.ev, Seq: e.seq, TS: uint16(now >> 7)})
		q.stats.ProbesSent++
	}
	q.stats.ControlPacketsSent++
	return verbs.Tx{Len: n, WireLen: n, DstHost: q.remote.Host, EV: e.ev, DSCP: verbs.DSCPControl}, true
}
