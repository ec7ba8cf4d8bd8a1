package roce

import "github.com/vcluster/vcluster/verbs"

// gbn is go-back-N, the InfiniBand RC rules (IBA vol. 1 §9.7): the
// responder places in-order packets only and NAKs the first gap once; the
// requester rewinds to the NAKed PSN, or to sndUna on a timeout. It owns
// the requester's rewind point and the responder's current message.
type gbn struct {
	q      *QP
	sndNxt uint64 // the next sequence to send: go-back-N rewinds it (sndUna ≤ sndNxt ≤ sndMax)

	// The responder's message being placed: its RETH (from the FIRST or
	// ONLY packet) and the bytes placed so far.
	curOn   bool // a FIRST arrived and its LAST has not
	curKey  uint32
	curVA   uint64
	curLen  uint64
	curOff  uint64
	nakSent bool // a NAK-sequence-error went out for the current ePSN: one per gap
}

// goBack rewinds the requester to seq.
func (g *gbn) goBack(seq uint64) {
	g.sndNxt = seq
	g.q.wrs.cur = g.q.wrs.find(seq)
}

func (g *gbn) next() (seq uint64, wr int, retx, ok bool) {
	q := g.q
	if g.sndNxt >= q.nextSeq {
		return 0, 0, false, false
	}
	if g.sndNxt == q.sndMax && q.sndMax-q.sndUna >= uint64(q.cfg.MaxOutstandingPSNs) {
		return 0, 0, false, false
	}
	return g.sndNxt, q.wrs.seek(g.sndNxt), g.sndNxt < q.sndMax, true
}

func (g *gbn) sent(seq uint64, resend bool) { g.sndNxt = seq + 1 }

func (g *gbn) acked(seq uint64) {
	if g.sndNxt < seq {
		g.sndNxt = seq
		g.q.wrs.cur = g.q.wrs.find(min(seq, g.q.nextSeq-1))
	}
}

func (g *gbn) timedOut() { g.goBack(g.q.sndUna) }

func (g *gbn) rto() int64 { return g.q.cfg.TimeoutNs }

// seqNAK: resend from the expected PSN; a NAK that brings no progress
// counts against RetryCount.
func (g *gbn) seqNAK(seq uint64, _ uint32, progress bool) bool {
	q := g.q
	if q.sndUna < q.sndMax {
		if !progress {
			if q.retries >= q.cfg.RetryCount {
				q.fail(verbs.StatusRetryExceeded)
				return false
			}
			q.retries++
		}
		g.goBack(seq)
	}
	return true
}

// errorNAK: the responder is in order, so everything before the failing
// PSN was placed.
func (g *gbn) errorNAK(seq uint64) { g.q.ackTo(seq) }

func (g *gbn) holding() bool { return false }

func (g *gbn) receive(now int64, p *Packet, d uint64) {
	q := g.q
	if d > 0 {
		// Out of order: drop; NAK once per gap.
		if !g.nakSent {
			g.nakSent = true
			q.nak(NakPSNSeqError, q.ePSN, q.msn)
			q.ackDue, q.unacked = false, 0
		}
		return
	}
	if code, ok := g.place(p); !ok {
		q.nak(code, q.ePSN, q.msn)
		q.enterError()
		return
	}
	q.ePSN++
	g.nakSent = false
	q.countAck(p.AckReq)
}

// place places an in-order WRITE packet; it returns a NAK code on error.
func (g *gbn) place(p *Packet) (uint8, bool) {
	q := g.q
	mtu := q.cfg.PMTU
	n := p.PayloadLen
	op := p.Opcode
	if n > mtu {
		return NakInvalidReq, false
	}
	if op == OpWriteFirst || op == OpWriteOnly || op == OpWriteOnlyImm {
		if g.curOn {
			return NakInvalidReq, false
		}
		r := p.RETH
		if _, err := q.mem.Lookup(r.RKey, r.VA, uint64(r.DMALen)); err != nil {
			return NakRemoteAccess, false
		}
		g.curKey, g.curVA, g.curLen, g.curOff, g.curOn = r.RKey, r.VA, uint64(r.DMALen), 0, true
		if op == OpWriteFirst && n != mtu {
			return NakInvalidReq, false
		}
	} else {
		if !g.curOn {
			return NakInvalidReq, false
		}
		if op == OpWriteMiddle && n != mtu {
			return NakInvalidReq, false
		}
	}
	last := op != OpWriteFirst && op != OpWriteMiddle
	end := g.curOff + uint64(n)
	if end > g.curLen || (last && end != g.curLen) {
		return NakInvalidReq, false
	}
	q.place(g.curKey, g.curVA+g.curOff, p)
	g.curOff = end
	if last {
		g.curOn = false
		q.completeMessage()
		if op == OpWriteLastImm || op == OpWriteOnlyImm {
			q.recvImm(g.curLen, p.Imm)
		}
	}
	return 0, true
}
