package mprdma

import (
	"fmt"

	"github.com/vcluster/vcluster/verbs"
)

// debugInvariants makes every entry into a QP (Post, Send, Receive, Tick,
// Deadline, PollCompletions) start with checkInvariants, so the state
// every step left behind is checked at the next call. The package's tests
// turn it on; production pays one branch per call.
var debugInvariants = false

// checkInvariants panics if the QP's state contradicts itself. Each check
// restates an invariant documented next to the state it is about.
func (q *QP) checkInvariants() {
	bad := func(f string, a ...any) {
		panic(fmt.Sprintf("mprdma: QP %#x invariant: %s", q.qpn, fmt.Sprintf(f, a...)))
	}
	r := &q.req
	if !(r.una <= r.nxt && r.nxt <= r.max && r.max <= r.next) {
		bad("una %d ≤ nxt %d ≤ max %d ≤ next %d", r.una, r.nxt, r.max, r.next)
	}
	if r.max-r.una > uint64(len(r.recs)) {
		bad("%d outstanding, %d records", r.max-r.una, len(r.recs))
	}
	flying := 0
	for s := r.una; s < r.max; s++ {
		if r.rec(s).flags&pkFlying != 0 {
			flying++
		}
	}
	if flying != r.pipe {
		bad("pipe %d, %d records in flight", r.pipe, flying)
	}
	if r.win.cwnd < 1 || r.win.cwnd > r.win.max {
		bad("cwnd %v outside [1, %v]", r.win.cwnd, r.win.max)
	}
	if r.win.clocked.Len() > int(r.win.max) {
		bad("%d clocked credits over MaxCwnd", r.win.clocked.Len())
	}
	for i := 0; i < r.retx.Len(); i++ {
		s := *r.retx.At(i)
		if s >= r.max {
			bad("retransmission of %d queued, never sent (max %d)", s, r.max)
		}
		if s >= r.una && r.rec(s).flags&pkQueued == 0 {
			bad("retransmission of %d queued without its mark", s)
		}
	}
	if q.state == verbs.QPReady {
		if n := r.wrs.Len(); n > 0 {
			if r.wrs.Front().end() <= r.una {
				bad("WR [%d,%d) complete but queued (una %d)", r.wrs.Front().first, r.wrs.Front().end(), r.una)
			}
			if r.wrs.At(n-1).end() != r.next {
				bad("newest WR ends at %d, next %d", r.wrs.At(n-1).end(), r.next)
			}
		} else if r.una != r.next {
			bad("no WR queued but una %d ≠ next %d", r.una, r.next)
		}
		if r.rto.on != (r.una < r.max) {
			bad("timer on %v with %d outstanding", r.rto.on, r.max-r.una)
		}
	} else if r.wrs.Len() != 0 || r.rto.on {
		bad("%v with %d WRs queued, timer %v", q.state, r.wrs.Len(), r.rto.on)
	}
	if err := q.resp.check(); err != nil {
		bad("responder: %v", err)
	}
}
