package mprdma

import "github.com/vcluster/vcluster/verbs"

// maxBackoff bounds the retransmission timer's doubling: RTO·2^5 at most.
const maxBackoff = 5

// rtoTimer is the requester's retransmission timer. It runs exactly while
// data is outstanding in READY (an invariant). Unlike roce's, it restarts
// only on progress (the cumulative ack moving), not on every response:
// per-packet ACKs keep coming while one hole stays open, and a hole whose
// repair was lost must still time out. Each timeout without progress
// doubles it (TCP's backoff, RFC 6298 §5.5, capped at 2^maxBackoff);
// progress resets it to cfg.RTO.
type rtoTimer struct {
	on      bool
	at      int64 // deadline; valid when on
	from    int64 // when it was (re)started
	backoff uint  // timeouts since the last progress, capped
}

// arm (re)starts the timer at now, or stops it when nothing is
// outstanding.
func (r *requester) arm(now int64) {
	if r.una == r.max {
		r.rto.on = false
		return
	}
	r.rto.on, r.rto.from, r.rto.at = true, now, now+r.cfg.RTO<<r.rto.backoff
}

// progress is the cumulative ack moving: the backoff resets and the timer
// restarts.
func (r *requester) progress(now int64) {
	r.rto.backoff = 0
	r.arm(now)
}

func (r *requester) deadline() (int64, bool) { return r.rto.at, r.rto.on }

// tick runs the retransmission timer. A timeout with RetryCount retries
// spent fails the oldest WR with RETRY_EXCEEDED; otherwise MP-RDMA goes
// back N from the cumulative ack, and Random and OrderRE retransmit
// selectively every packet neither acknowledged nor sent since the timer
// started (it has been outstanding a whole timeout), una always among them.
func (r *requester) tick(now int64) {
	if !r.rto.on || now < r.rto.at {
		return
	}
	r.rto.on = false
	if r.una == r.max {
		return
	}
	q := r.q
	q.stats.Timeouts++
	if r.retries >= r.cfg.RetryCount {
		q.fail(verbs.StatusRetryExceeded, r.una)
		return
	}
	r.retries++
	if r.cfg.Scheme == SchemeMPRDMA {
		r.goBack(now, r.una)
	} else {
		for s := r.una; s < r.max; s++ {
			p := r.rec(s)
			if p.flags&pkSacked == 0 && (s == r.una || p.sent <= r.rto.from) {
				r.lose(s)
			}
		}
	}
	r.rto.backoff = min(r.rto.backoff+1, maxBackoff)
	r.arm(now)
}
