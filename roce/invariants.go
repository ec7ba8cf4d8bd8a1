package roce

import (
	"fmt"
	"math/bits"

	"github.com/vcluster/vcluster/verbs"
)

// debugInvariants makes every entry into a QP (Post, Send, Receive, Tick,
// Deadline, PollCompletions, Stats) start with checkInvariants, which so
// checks the state every step left behind, at the next call. The
// package's tests turn it on (invariants_test.go); production pays one
// branch per call. (Checking on the way out instead, with a deferred call
// or a wrapper, cost 2% of a packet's instructions.)
var debugInvariants = false

// checkInvariants panics if the QP's state contradicts itself. Each check
// restates an invariant documented next to the state it is about.
func (q *QP) checkInvariants() {
	bad := func(f string, a ...any) {
		panic(fmt.Sprintf("roce: QP %#x invariant: %s", q.qpn, fmt.Sprintf(f, a...)))
	}
	// Sequence space: acknowledged ≤ sent ≤ posted; one record per
	// outstanding packet.
	if !(q.sndUna <= q.sndMax && q.sndMax <= q.nextSeq) {
		bad("sndUna %d ≤ sndMax %d ≤ nextSeq %d", q.sndUna, q.sndMax, q.nextSeq)
	}
	if q.sndMax-q.sndUna > uint64(len(q.pk.buf)) {
		bad("%d packet records for %d outstanding", len(q.pk.buf), q.sndMax-q.sndUna)
	}
	if q.sndMax-q.sndUna > uint64(q.cfg.MaxOutstandingPSNs) {
		bad("%d outstanding > MaxOutstandingPSNs", q.sndMax-q.sndUna)
	}
	// WRs: the oldest is not complete; they are contiguous; the cursor
	// is inside.
	if q.state == verbs.QPReady {
		if n := q.wrs.Len(); n > 0 {
			if q.wrs.Front().end() <= q.sndUna {
				bad("WR [%d,%d) complete but queued (sndUna %d)", q.wrs.Front().first, q.wrs.Front().end(), q.sndUna)
			}
			if q.wrs.At(n-1).end() != q.nextSeq {
				bad("newest WR ends at %d, nextSeq %d", q.wrs.At(n-1).end(), q.nextSeq)
			}
			if q.wrs.cur < 0 || q.wrs.cur >= n {
				bad("WR cursor %d of %d", q.wrs.cur, n)
			}
		} else if q.sndUna != q.nextSeq {
			bad("no WR queued but sndUna %d ≠ nextSeq %d", q.sndUna, q.nextSeq)
		}
		// The retransmission timer runs exactly while data is outstanding.
		if q.rto.on != (q.sndUna < q.sndMax) {
			bad("timer on %v with %d outstanding", q.rto.on, q.sndMax-q.sndUna)
		}
	} else if q.wrs.Len() != 0 || q.rto.on {
		bad("%v with %d WRs queued, timer %v", q.state, q.wrs.Len(), q.rto.on)
	}
	if q.ctrl.Len() > ctrlQueueMax {
		bad("%d control packets queued", q.ctrl.Len())
	}
	switch r := q.rel.(type) {
	case *gbn:
		if !(q.sndUna <= r.sndNxt && r.sndNxt <= q.sndMax) {
			bad("gbn: sndUna %d ≤ sndNxt %d ≤ sndMax %d", q.sndUna, r.sndNxt, q.sndMax)
		}
		if r.curOn && r.curOff > r.curLen {
			bad("gbn: placed %d of a %d-byte message", r.curOff, r.curLen)
		}
	case *irn:
		r.checkInvariants(bad)
	}
}

func (r *irn) checkInvariants(bad func(string, ...any)) {
	q := r.q
	if r.bdpPkts > 0 && q.sndMax-q.sndUna > r.bdpPkts {
		bad("irn: %d in flight over BDP-FC's %d", q.sndMax-q.sndUna, r.bdpPkts)
	}
	if r.retxLimit > q.sndMax {
		bad("irn: retxLimit %d past sndMax %d", r.retxLimit, q.sndMax)
	}
	if r.recovery && r.recoverySeq > q.sndMax {
		bad("irn: recoverySeq %d past sndMax %d", r.recoverySeq, q.sndMax)
	}
	var prev uint64
	for i := 0; i < r.retxLog.Len(); i++ {
		x := r.retxLog.At(i)
		if x.mark < prev || x.seq >= x.mark {
			bad("irn: retxLog[%d] = %+v after mark %d", i, *x, prev)
		}
		prev = x.mark
	}
	for i := 0; i < r.lost.Len(); i++ {
		if s := *r.lost.At(i); s >= q.sndMax {
			bad("irn: lost %d not sent", s)
		}
	}
	n := 0
	for i, w := range r.rxBits {
		n += bits.OnesCount64(w)
		if r.rxLast[i]&^w != 0 {
			bad("irn: rxLast word %d has bits %#x not in rxBits", i, r.rxLast[i]&^w)
		}
	}
	if n != r.ooo {
		bad("irn: %d bits held, ooo %d", n, r.ooo)
	}
	if e := q.ePSN; r.rxBits[(e&r.rxMask)>>6]&(1<<(e&63)) != 0 {
		bad("irn: ePSN %d held out of order", e)
	}
	for i, x := range r.imms {
		if x.seq < q.ePSN || i > 0 && r.imms[i-1].seq > x.seq {
			bad("irn: imms[%d].seq %d (ePSN %d) out of order", i, x.seq, q.ePSN)
		}
	}
}
