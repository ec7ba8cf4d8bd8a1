package roce

import "github.com/vcluster/vcluster/verbs"

// rtoTimer is the requester's retransmission timer (IB's local ACK
// timer). It runs exactly while data is outstanding in READY (an
// invariant): armed by the first send, restarted by every response,
// stopped when everything is acknowledged.
type rtoTimer struct {
	on   bool
	at   int64 // deadline; valid when on
	from int64 // when it was (re)started: IRN moves at with the flight size
}

// Deadline implements verbs.Transport: the earlier of the retransmission
// timer and the pacing deadline.
func (q *QP) Deadline() (int64, bool) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady {
		return 0, false
	}
	t, ok := int64(0), false
	if q.rto.on {
		t, ok = q.rto.at, true
	}
	if q.paceWait && (!ok || q.paceAt < t) {
		t, ok = q.paceAt, true
	}
	return t, ok
}

// Tick implements verbs.Transport: the retransmission timer.
func (q *QP) Tick(now int64) {
	if debugInvariants {
		q.checkInvariants()
	}
	if q.state != verbs.QPReady || !q.rto.on || now < q.rto.at {
		return
	}
	q.rto.on = false
	if q.sndUna == q.sndMax {
		return
	}
	q.stats.Timeouts++
	if q.retries >= q.cfg.RetryCount {
		q.fail(verbs.StatusRetryExceeded)
		return
	}
	q.retries++
	q.rel.timedOut()
	q.armRTO(now)
}

// armRTO (re)starts the retransmission timer, or stops it when nothing is
// outstanding. Like an IB requester, the timer restarts on every response
// and detects the absence of responses, not the loss of one packet.
func (q *QP) armRTO(now int64) {
	if q.sndUna == q.sndMax {
		q.rto.on = false
		return
	}
	q.rto.on, q.rto.from, q.rto.at = true, now, now+q.rel.rto()
}
