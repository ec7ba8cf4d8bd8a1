package roce

import (
	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/internal/ring"
)

// irn is IRN's selective repeat (Mittal et al., "Revisiting Network
// Support for RDMA", SIGCOMM 2018, §3): the responder places out-of-order
// packets and NACKs each with the cumulative ack and its own PSN (a
// 1-block SACK); the requester resends only un-SACKed packets, in one
// recovery episode at a time, and caps new data at the BDP (BDP-FC). It
// owns the requester's recovery state and the responder's out-of-order
// bitmaps.
type irn struct {
	q *QP

	// --- requester ---
	recovery    bool   // in loss recovery (entered on the first NACK or a timeout)
	recoverySeq uint64 // recovery_seq: snd_max at entry; recovery ends when sndUna passes it
	retxScan    uint64 // next candidate for retransmission
	retxLimit   uint64 // candidates lie below it (highest SACK + 1, or snd_max on timeout)
	// lost holds retransmissions found lost again (LostRetxDetect), to be
	// resent before anything else.
	lost ring.Ring[uint64]
	// retxLog holds retransmissions in send order with snd_max when each
	// went: marks are non-decreasing (an invariant), so one SACK above a
	// mark proves every earlier one lost.
	retxLog ring.Ring[retxRec]
	bdpPkts uint64 // BDP-FC: the cap on sndMax − sndUna (0: off)

	// --- responder ---
	// rxBits has a bit per sequence in the out-of-order window received
	// ahead of ePSN; rxLast the subset that are the last packet of their
	// message (an invariant: rxLast ⊆ rxBits, and ePSN's own bit is
	// clear).
	rxBits []uint64
	rxLast []uint64
	rxMask uint64   // window − 1 (the window is a power of two)
	ooo    int      // bits set in rxBits
	nackAt int64    // when the last NACK went (the repeat-NACK limit)
	imms   []immRec // WriteImm completions waiting for their message, by seq
}

// retxRec is an IRN retransmission and snd_max at the time it was sent.
type retxRec struct{ seq, mark uint64 }

// immRec is an IRN WriteImm whose last packet arrived before the message
// was complete.
type immRec struct {
	seq uint64
	imm uint32
	n   uint32
}

func newIRN(q *QP) *irn {
	w := q.cfg.oooWindow()
	r := &irn{
		q:      q,
		rxBits: make([]uint64, w/64),
		rxLast: make([]uint64, w/64),
		rxMask: uint64(w - 1),
		imms:   make([]immRec, 0, 16),
	}
	if q.cfg.IRN.BDPFC {
		r.bdpPkts = uint64(q.cfg.bdpPackets())
	}
	return r
}

// next: lost retransmissions first, then the recovery scan, then new data
// (under BDP-FC and MaxOutstandingPSNs).
func (r *irn) next() (seq uint64, wr int, retx, ok bool) {
	q := r.q
	for r.lost.Len() > 0 {
		s := *r.lost.Front()
		if s >= q.sndUna && !q.pkt(s).state.sacked() {
			return s, q.wrs.find(s), true, true
		}
		r.lost.Pop()
	}
	if r.recovery || r.retxScan < r.retxLimit {
		if r.retxScan < q.sndUna {
			r.retxScan = q.sndUna
		}
		for r.retxScan < r.retxLimit && q.pkt(r.retxScan).state.sacked() {
			r.retxScan++
		}
		if r.retxScan < r.retxLimit {
			return r.retxScan, q.wrs.find(r.retxScan), true, true
		}
	}
	if q.sndMax >= q.nextSeq {
		return 0, 0, false, false
	}
	if r.bdpPkts > 0 && q.sndMax-q.sndUna >= r.bdpPkts {
		return 0, 0, false, false
	}
	if q.sndMax-q.sndUna >= uint64(q.cfg.MaxOutstandingPSNs) {
		return 0, 0, false, false
	}
	return q.sndMax, q.wrs.seek(q.sndMax), false, true
}

func (r *irn) sent(seq uint64, resend bool) {
	if resend && r.q.cfg.IRN.LostRetxDetect {
		r.retxLog.Push(retxRec{seq: seq, mark: r.q.sndMax})
	}
	if seq == r.retxScan {
		r.retxScan++
	} else if r.lost.Len() > 0 && *r.lost.Front() == seq {
		r.lost.Pop()
	}
}

func (r *irn) acked(seq uint64) {
	if r.recovery && seq >= r.recoverySeq {
		r.recovery = false
	}
}

// timedOut: enter recovery; everything outstanding and not SACKed is
// lost.
func (r *irn) timedOut() {
	q := r.q
	if !r.recovery {
		r.recovery, r.recoverySeq = true, q.sndMax
	}
	r.retxScan, r.retxLimit = q.sndUna, q.sndMax
	r.lost.Clear()
	r.retxLog.Clear()
}

// rto is RTO_low with at most RTOLowPackets in flight, else RTO_high.
func (r *irn) rto() int64 {
	q := r.q
	if q.sndMax-q.sndUna <= uint64(q.cfg.IRN.RTOLowPackets) {
		return q.cfg.IRN.RTOLowNs
	}
	return q.cfg.IRN.RTOHighNs
}

// seqNAK: record the SACK; the first NACK starts recovery.
func (r *irn) seqNAK(_ uint64, sack uint32, _ bool) bool {
	q := r.q
	r.onSack(sack)
	if !r.recovery && q.sndUna < q.sndMax {
		r.recovery, r.recoverySeq = true, q.sndMax
		r.retxScan = q.sndUna
	}
	return true
}

// errorNAK: the failing PSN is not cumulative under IRN; the responder
// sent an ACK for what was in order before it.
func (r *irn) errorNAK(uint64) {}

// onSack records an IRN NACK's SACKed PSN (carried in the AETH MSN field).
func (r *irn) onSack(psn uint32) {
	q := r.q
	d := ib.PSNDiff(psn, q.psnOf(q.sndUna))
	if d < 0 || uint64(d) >= q.sndMax-q.sndUna {
		return
	}
	s := q.sndUna + uint64(d)
	p := q.pkt(s)
	p.state = p.state.next(evSack)
	if s+1 > r.retxLimit {
		r.retxLimit = s + 1
	}
	// Retransmissions sent before s was first sent are lost if still
	// missing (one path, FIFO).
	for r.retxLog.Len() > 0 {
		x := *r.retxLog.Front()
		if x.mark > s {
			break
		}
		r.retxLog.Pop()
		if x.seq >= q.sndUna && !q.pkt(x.seq).state.sacked() {
			r.lost.Push(x.seq)
		}
	}
}

func (r *irn) holding() bool { return r.ooo > 0 }

// receive handles a packet d ≥ 0 sequences past ePSN.
func (r *irn) receive(now int64, p *Packet, d uint64) {
	q := r.q
	seq := q.ePSN + d
	if d > r.rxMask {
		return // beyond the out-of-order window: drop
	}
	bit := uint64(1) << (seq & 63)
	wi := (seq & r.rxMask) >> 6
	if d > 0 && r.rxBits[wi]&bit != 0 {
		// Duplicate of an out-of-order packet: re-NACK, rate-limited.
		q.stats.DuplicatesReceived++
		if now-r.nackAt >= q.cfg.IRN.NackIntervalNs {
			r.nackAt = now
			q.nak(NakPSNSeqError, q.ePSN, p.PSN)
		}
		return
	}
	code, last, ok := r.place(p)
	if !ok {
		if q.ePSN > 0 {
			// The NAK names the failing PSN, which is not cumulative under
			// IRN: acknowledge what is in order first.
			q.queueCtrl(q.ackPkt())
		}
		q.nak(code, seq, q.msn)
		q.enterError()
		return
	}
	if last && (p.Opcode == OpWriteLastImm || p.Opcode == OpWriteOnlyImm) {
		if d == 0 {
			q.recvImm(uint64(p.RETH.DMALen), p.Imm)
		} else {
			r.addImm(immRec{seq: seq, imm: p.Imm, n: p.RETH.DMALen})
		}
	}
	if d > 0 {
		r.rxBits[wi] |= bit
		if last {
			r.rxLast[wi] |= bit
		}
		r.ooo++
		r.nackAt = now
		q.nak(NakPSNSeqError, q.ePSN, p.PSN)
		q.ackDue, q.unacked = false, 0
		return
	}
	// In order: advance over the packets already held.
	if last {
		q.completeMessage()
	}
	q.ePSN++
	hadOOO := r.ooo > 0
	for r.ooo > 0 {
		s := q.ePSN
		b := uint64(1) << (s & 63)
		w := (s & r.rxMask) >> 6
		if r.rxBits[w]&b == 0 {
			break
		}
		r.rxBits[w] &^= b
		r.ooo--
		if r.rxLast[w]&b != 0 {
			r.rxLast[w] &^= b
			q.completeMessage()
		}
		q.ePSN++
	}
	for len(r.imms) > 0 && r.imms[0].seq < q.ePSN {
		x := r.imms[0]
		q.recvImm(uint64(x.n), x.imm)
		copy(r.imms, r.imms[1:])
		r.imms = r.imms[:len(r.imms)-1]
	}
	// While holes remain (or one was just filled) acknowledge every packet.
	q.countAck(p.AckReq || hadOOO)
}

// addImm inserts x into imms, kept sorted by seq.
func (r *irn) addImm(x immRec) {
	i := len(r.imms)
	r.imms = append(r.imms, x)
	for i > 0 && r.imms[i-1].seq > x.seq {
		r.imms[i] = r.imms[i-1]
		i--
	}
	r.imms[i] = x
}

// place places a WRITE packet by its own RETH (IRN: every packet carries
// one).
func (r *irn) place(p *Packet) (code uint8, last, ok bool) {
	q := r.q
	mtu := q.cfg.PMTU
	n := p.PayloadLen
	op := p.Opcode
	last = op != OpWriteFirst && op != OpWriteMiddle
	if n > mtu || ((op == OpWriteFirst || op == OpWriteMiddle) && n != mtu) {
		return NakInvalidReq, last, false
	}
	rh := p.RETH
	span := uint64(n)
	if op == OpWriteFirst || op == OpWriteOnly || op == OpWriteOnlyImm {
		span = uint64(rh.DMALen)
		if uint64(n) > span {
			return NakInvalidReq, last, false
		}
	}
	if _, err := q.mem.Lookup(rh.RKey, rh.VA, span); err != nil {
		return NakRemoteAccess, last, false
	}
	q.place(rh.RKey, rh.VA, p)
	return 0, last, true
}
