package mrc

// The responder half of a QP: placing data packets, the receive window and
// bitmap, and the SACK/NACK/ACK it queues for sendCtrl.

import "github.com/vcluster/vcluster/verbs"

func (q *QP) rgot(psn uint32) bool {
	i := psn & q.rmask
	return q.rbits[i>>6]&(1<<(i&63)) != 0
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
			q.ms.Malformed++
			return
		}
		q.stats.TrimmedReceived++
		var ts uint16
		if bth.TS && len(b) >= BTHLen+METHLen+2 {
			ts = uint16(b[BTHLen+METHLen])<<8 | uint16(b[BTHLen+METHLen+1])
		}
		d := psnDiff(bth.PSN, q.ePSN)
		switch {
		case d >= q.rcvWin:
			q.ms.OutOfWindow++
			q.queueNACK(NackPSNOutOfWindow, bth.PSN, rx.EV, bth.Rtx, ts)
		case d < 0 || q.rgot(bth.PSN):
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
		q.ms.Malformed++
		return
	}
	psn := h.BTH.PSN
	ts := h.TSETH.TS
	plen := rx.WireLen - hl - ICRCLen
	if plen < 0 || plen > q.cfg.PMTU || uint64(plen) > uint64(h.RETH.DMALen) ||
		(plen == 0 && h.RETH.DMALen != 0) {
		q.queueNACK(NackUnexpEvent, psn, rx.EV, h.BTH.Rtx, ts)
		return
	}
	d := psnDiff(psn, q.ePSN)
	if d < 0 {
		// Below ePSN: Transport ACK plus SACK.
		q.stats.DuplicatesReceived++
		q.pushCtrl(ctrlEnt{kind: ctrlAck, ev: rx.EV})
		q.queueSACK(psn, rx.EV, m, h.BTH.Rtx, ts, false)
		return
	}
	if d >= q.rcvWin {
		q.ms.OutOfWindow++
		q.queueNACK(NackPSNOutOfWindow, psn, rx.EV, h.BTH.Rtx, ts)
		return
	}
	if q.rgot(psn) {
		q.stats.DuplicatesReceived++
		q.queueSACK(psn, rx.EV, m, h.BTH.Rtx, ts, false)
		return
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
	i := psn & q.rmask
	q.rbits[i>>6] |= 1 << (i & 63)
	var f uint8
	if IsLast(h.BTH.Opcode) {
		f |= rfLast
	}
	if HasImm(h.BTH.Opcode) {
		f |= rfImm
		q.rimm[i] = h.Imm
		q.rlen[i] = h.RETH.DMALen
	}
	if h.BTH.AckReq {
		f |= rfAR
	}
	q.rflags[i] = f
	q.rcount++
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
	for q.rgot(q.ePSN) {
		i := q.ePSN & q.rmask
		q.rbits[i>>6] &^= 1 << (i & 63)
		f := q.rflags[i]
		if f&rfLast != 0 {
			q.rmsn = (q.rmsn + 1) & psnMask
		}
		if f&rfImm != 0 {
			q.comps = append(q.comps, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm,
				Status: verbs.StatusOK, Bytes: uint64(q.rlen[i]), Imm: q.rimm[i]})
		}
		if f&rfAR != 0 {
			ar = true
		}
		q.rflags[i] = 0
		q.rcount--
		q.ePSN = psnAdd(q.ePSN, 1)
	}
	return ar
}

func (q *QP) rcvProbe(now int64, rx *verbs.Rx) {
	_, p, err := DecodeProbe(rx.Data)
	if err != nil {
		q.ms.Malformed++
		return
	}
	m := PathNone
	if rx.CE {
		m = PathSkipOnce
	}
	q.queueSACK(psnAdd(q.ePSN, -1), rx.EV, m, false, p.TS, true)
}

// sackBits returns the 64 receive-bitmap bits from PSN base, masked to the
// window [ePSN, ePSN+rcvWin).
func (q *QP) sackBits(base uint32) uint64 {
	valid := psnDiff(psnAdd(q.ePSN, q.rcvWin), base)
	if valid <= 0 {
		return 0
	}
	idx := base & q.rmask
	nw := uint32(len(q.rbits))
	w, sh := idx>>6, idx&63
	v := q.rbits[w] >> sh
	if sh != 0 {
		v |= q.rbits[(w+1)&(nw-1)] << (64 - sh)
	}
	if valid < 64 {
		v &= 1<<uint(valid) - 1
	}
	return v
}
