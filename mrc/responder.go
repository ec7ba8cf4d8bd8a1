package mrc

// The responder half of a QP: placing data packets, the receive window and
// bitmap, and the SACK/NACK/ACK it queues for sendCtrl.

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// responderState is the responder's resource accounting and per-EV CE
// history (ResponderConfig).
type responderState struct {
	immHeld int // WriteImm last packets placed, not yet completed in order
	// ceTab holds each peer EV's streak of CE-marked arrivals, direct-mapped
	// by a hash of the EV (a colliding EV takes the slot over and starts
	// from 0: at most a delayed judgement); allocated on first use.
	ceTab []ceEnt
	ceAvg int32 // EWMA of the QP's CE-marked arrivals, 1<<16 = all
}

// Responder per-PSN flags (rcvFlags).
const (
	rcvLast uint8 = 1 << iota
	rcvHasImm
	rcvAckReq
)

type ceEnt struct {
	ev     uint32
	streak uint8
	used   bool
}

// ceTabBits sizes ceTab: 512 slots for at most 256 EVs per QP.
const ceTabBits = 9

// resourceNACK applies ResponderConfig's bounds to a new packet d PSNs
// above ePSN (d > 0; the packet at ePSN needs no resource); last says it
// ends a WriteImm. It returns the NACK code when a resource is exhausted.
func (q *QP) resourceNACK(d int, immLast bool) (uint8, bool) {
	r := &q.cfg.Responder
	st := &q.stats.ResponderStats
	switch {
	case r.BitmapPSNs > 0 && d >= r.BitmapPSNs:
		st.NoBitmapNacks++
		return NackNoBitmap, true
	case r.PacketBuffers > 0 && q.rcvAbove >= r.PacketBuffers:
		st.NoPktBufferNacks++
		return NackNoPktBuffer, true
	case immLast && r.ImmSlots > 0 && q.rsp.immHeld >= r.ImmSlots:
		st.NoResourceNacks++
		return NackNoResource, true
	}
	return 0, false
}

// judgeEV updates ev's CE history with one data arrival and returns the
// SACK path feedback for it: m, or ALWAYS_SKIP when ev's last
// AlwaysSkipCEStreak arrivals were CE-marked while fewer than half of the
// QP's recent arrivals were (ResponderConfig). The EWMA starts at "all
// marked", so a QP whose every arrival is marked never judges an EV.
func (q *QP) judgeEV(ev uint32, ce bool, m uint8) uint8 {
	s := &q.rsp
	if s.ceTab == nil {
		s.ceTab = make([]ceEnt, 1<<ceTabBits)
		s.ceAvg = 1 << 16
	}
	var x int32
	if ce {
		x = 1 << 16
	}
	s.ceAvg += (x - s.ceAvg) >> 4
	e := &s.ceTab[(ev*0x9E3779B1)>>(32-ceTabBits)]
	if !e.used || e.ev != ev {
		*e = ceEnt{ev: ev, used: true}
	}
	if !ce {
		e.streak = 0
		return m
	}
	if e.streak < 255 {
		e.streak++
	}
	if int(e.streak) >= q.cfg.Responder.AlwaysSkipCEStreak && s.ceAvg < 1<<15 {
		e.streak = 0
		q.stats.AlwaysSkips++
		return PathAlwaysSkip
	}
	return m
}

func (q *QP) rcvGot(psn uint32) bool {
	i := psn & q.rcvMask
	return q.rcvBitmap[i>>6]&(1<<(i&63)) != 0
}

func (q *QP) queueSACK(psn, ev uint32, m uint8, rtx bool, ts uint16, probe bool) {
	q.sackBytes = 0
	q.pushCtrl(ctrlEnt{kind: ctrlSACK, psn: psn, ev: ev, m: m, rtxEcho: rtx, ts: ts, probeResp: probe})
}

func (q *QP) queueNACK(code uint8, psn, ev uint32, rtx bool, ts uint16) {
	q.pushCtrl(ctrlEnt{kind: ctrlNACK, code: code, psn: psn, ev: ev, rtxEcho: rtx, ts: ts})
}

// rcvData is the responder's handling of a WRITE packet.
func (q *QP) rcvData(now int64, rx *verbs.Rx) {
	b := rx.Data
	m := PathNone
	if rx.CE {
		m = PathSkipOnce
		q.stats.ECNMarksReceived++
	}
	if rx.Trimmed {
		bth, err := DecodeBTH(b)
		if err != nil {
			q.stats.Malformed++
			return
		}
		q.stats.TrimmedReceived++
		var ts uint16
		if bth.TS && len(b) >= BTHLen+METHLen+2 {
			ts = uint16(b[BTHLen+METHLen])<<8 | uint16(b[BTHLen+METHLen+1])
		}
		d := ib.PSNDiff(bth.PSN, q.ePSN)
		switch {
		case d >= q.rcvWin:
			q.stats.OutOfWindow++
			q.queueNACK(NackPSNOutOfWindow, bth.PSN, rx.EV, bth.Rtx, ts)
		case d < 0 || q.rcvGot(bth.PSN):
			q.stats.DuplicatesReceived++
			q.queueSACK(bth.PSN, rx.EV, m, bth.Rtx, ts, false)
		default:
			code := NackTrimmed
			if rx.LastHop {
				code = NackTrimmedLastHop
			}
			q.queueNACK(code, bth.PSN, rx.EV, bth.Rtx, ts)
		}
		return
	}
	var h DataHeader
	hl, err := DecodeData(b, &h)
	if err != nil {
		q.stats.Malformed++
		return
	}
	psn := h.BTH.PSN
	ts := h.TSETH.TS
	if q.cfg.Responder.AlwaysSkipCEStreak > 0 {
		m = q.judgeEV(rx.EV, rx.CE, m)
	}
	plen := rx.WireLen - hl - ICRCLen
	if plen < 0 || plen > q.cfg.PMTU || uint64(plen) > uint64(h.RETH.DMALen) ||
		(plen == 0 && h.RETH.DMALen != 0) {
		q.queueNACK(NackUnexpEvent, psn, rx.EV, h.BTH.Rtx, ts)
		return
	}
	d := ib.PSNDiff(psn, q.ePSN)
	if d < 0 {
		// Below ePSN: Transport ACK plus SACK.
		q.stats.DuplicatesReceived++
		q.pushCtrl(ctrlEnt{kind: ctrlAck, ev: rx.EV})
		q.queueSACK(psn, rx.EV, m, h.BTH.Rtx, ts, false)
		return
	}
	if d >= q.rcvWin {
		q.stats.OutOfWindow++
		q.queueNACK(NackPSNOutOfWindow, psn, rx.EV, h.BTH.Rtx, ts)
		return
	}
	if q.rcvGot(psn) {
		q.stats.DuplicatesReceived++
		q.queueSACK(psn, rx.EV, m, h.BTH.Rtx, ts, false)
		return
	}
	if d > 0 {
		if code, ok := q.resourceNACK(d, HasImm(h.BTH.Opcode)); ok {
			q.queueNACK(code, psn, rx.EV, h.BTH.Rtx, ts)
			return
		}
	}
	var mr *verbs.MR
	if plen > 0 { // a zero-length Write touches no memory: any key goes
		// The last region written, if it is this key's, saves the
		// lookup (regions never change); its bounds are checked alike.
		if mr = q.rxMR; mr == nil || mr.Key != h.RETH.RKey || !mr.Contains(h.RETH.VA, uint64(plen)) {
			if mr, err = q.mem.Lookup(h.RETH.RKey, h.RETH.VA, uint64(plen)); err != nil {
				q.pushCtrl(ctrlEnt{kind: ctrlAckNak, code: NakRemoteAccessError, psn: psn, ev: rx.EV})
				return
			}
			q.rxMR = mr
		}
	}
	if mr != nil && mr.Buf != nil && len(b) >= hl+plen {
		copy(mr.Buf[h.RETH.VA-mr.VA:], b[hl:hl+plen])
	}
	q.stats.BytesPlaced += uint64(plen)
	i := psn & q.rcvMask
	q.rcvBitmap[i>>6] |= 1 << (i & 63)
	var f uint8
	if IsLast(h.BTH.Opcode) {
		f |= rcvLast
	}
	if HasImm(h.BTH.Opcode) {
		f |= rcvHasImm
		q.rsp.immHeld++
		q.rcvImm[i] = h.Imm
		q.rcvLen[i] = h.RETH.DMALen
	}
	if h.BTH.AckReq {
		f |= rcvAckReq
	}
	q.rcvFlags[i] = f
	q.rcvAbove++
	q.sackBytes += rx.WireLen
	q.rcvdBytes += uint64(rx.WireLen)
	arPassed := q.advance()
	if q.sackBytes >= q.cfg.SackThresholdBytes || h.BTH.AckReq || rx.CE || h.BTH.Rtx || arPassed {
		q.queueSACK(psn, rx.EV, m, h.BTH.Rtx, ts, false)
	}
}

// advance moves ePSN over received PSNs, completing WriteImms in order. It
// reports whether it passed a packet that requested an ACK.
func (q *QP) advance() bool {
	ar := false
	for q.rcvGot(q.ePSN) {
		i := q.ePSN & q.rcvMask
		q.rcvBitmap[i>>6] &^= 1 << (i & 63)
		f := q.rcvFlags[i]
		if f&rcvLast != 0 {
			q.rcvMSN = (q.rcvMSN + 1) & ib.PSNMask
		}
		if f&rcvHasImm != 0 {
			q.rsp.immHeld--
			q.comps = append(q.comps, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm,
				Status: verbs.StatusOK, Bytes: uint64(q.rcvLen[i]), Imm: q.rcvImm[i]})
		}
		if f&rcvAckReq != 0 {
			ar = true
		}
		q.rcvFlags[i] = 0
		q.rcvAbove--
		q.ePSN = ib.PSNAdd(q.ePSN, 1)
	}
	return ar
}

func (q *QP) rcvProbe(now int64, rx *verbs.Rx) {
	_, p, err := DecodeProbe(rx.Data)
	if err != nil {
		q.stats.Malformed++
		return
	}
	m := PathNone
	if rx.CE {
		m = PathSkipOnce
	}
	q.queueSACK(ib.PSNAdd(q.ePSN, -1), rx.EV, m, false, p.TS, true)
}

// sackBits returns the 64 receive-bitmap bits from PSN base, masked to the
// window [ePSN, ePSN+rcvWin).
func (q *QP) sackBits(base uint32) uint64 {
	valid := ib.PSNDiff(ib.PSNAdd(q.ePSN, q.rcvWin), base)
	if valid <= 0 {
		return 0
	}
	idx := base & q.rcvMask
	nw := uint32(len(q.rcvBitmap))
	w, sh := idx>>6, idx&63
	v := q.rcvBitmap[w] >> sh
	if sh != 0 {
		v |= q.rcvBitmap[(w+1)&(nw-1)] << (64 - sh)
	}
	if valid < 64 {
		v &= 1<<uint(valid) - 1
	}
	return v
}
