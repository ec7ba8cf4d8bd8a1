package mrc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// retrySchedule is when a packet sent at 0 that is never acknowledged
// fails: RetryLinear+1 timeouts at the RTO, then RetryExp more doubling.
func retrySchedule(cfg Config) int64 {
	var sum int64
	rto := cfg.rto()
	for k := 0; k <= cfg.RetryLinear+cfg.RetryExp; k++ {
		sum += rto << uint(max(0, k-cfg.RetryLinear))
	}
	return sum
}

// blackHole runs a's QP with every packet lost (sent and dropped, nothing
// comes back) from now on, firing its timers, until it leaves READY or
// its deadline passes limit or it reports none. It returns the time the QP
// failed (or the last time reached) and the completions.
func blackHole(t *testing.T, a *end, now, limit int64) (int64, []verbs.Completion) {
	t.Helper()
	var comps []verbs.Completion
	for i := 0; i < 100000 && a.q.State() == verbs.QPReady; i++ {
		a.drain(now, 0xf)
		comps = append(comps, a.comps()...)
		dl, ok := a.q.Deadline()
		if !ok {
			t.Fatalf("QP %v with no deadline at %d: it waits forever (stats %+v)", a.q.State(), now, a.q.Stats())
		}
		if dl > limit {
			t.Fatalf("QP still %v at %d, next deadline %d beyond %d: the retry limit never fired (%d timeouts)",
				a.q.State(), now, dl, limit, a.q.Stats().Timeouts)
		}
		now = max(now, dl)
		a.q.Tick(now)
	}
	return now, append(comps, a.comps()...)
}

func checkRetryFailure(t *testing.T, a *end, comps []verbs.Completion, want ...verbs.Completion) {
	t.Helper()
	if a.q.State() != verbs.QPError {
		t.Fatalf("QP %v, want ERROR", a.q.State())
	}
	wantComps(t, comps, want...)
	err := a.q.Err()
	if err == nil {
		t.Fatal("QP in ERROR with no Err")
	}
	n := a.q.cfg.RetryLinear + a.q.cfg.RetryExp + 1
	if got, wantS := err.Error(), fmt.Sprintf("retry limit exceeded after %d timeouts", n); !strings.Contains(got, wantS) {
		t.Fatalf("Err %q, want it to say %q", got, wantS)
	}
}

// packetCfg is smallCfg with the retry limit counted per packet: the
// tests below follow one packet's schedule (the connection-wide counter
// fails these QPs sooner: spec_req_test.go).
func packetCfg() Config {
	c := smallCfg()
	c.RetryScope = RetryPacket
	return c
}

// Structured EVs (one per path) on a connection where nothing ever gets
// through (the peer's NIC is dead): every timeout marks its EV's path bad,
// spares on a bad path are never promoted, so the active sets empty out
// and a timed-out packet has no EV to be retransmitted on. Its retry clock
// must keep running anyway: the QP fails after the full schedule (13
// timeouts with the defaults), not never.
func TestRetryLimitAllPathsDead(t *testing.T) {
	cfg := packetCfg()
	cfg.PathsPerPlane = 4
	cfg.ProbeInterval = 200_000
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 128*pmtu, 0) // enough packets to try every active EV
	a.write(b, 2, verbs.OpWriteImm, 512<<10, pmtu, 7)
	sched := retrySchedule(cfg)
	at, comps := blackHole(t, a, 0, 2*sched)
	checkRetryFailure(t, a, comps,
		verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded},
		verbs.Completion{WRID: 2, QPN: qpnA, Op: verbs.OpWriteImm, Status: verbs.StatusFlushed})
	if at != sched {
		t.Errorf("failed at %d ns, want %d (the first packet's retry schedule)", at, sched)
	}
	if got := a.q.Stats().Timeouts; got < uint64(cfg.RetryLinear+cfg.RetryExp+1) {
		t.Errorf("%d timeouts", got)
	}
}

// Every plane goes down (this side's NIC, or the peer's Port Status
// Update) while packets are in flight: they are taken out of flight to be
// retransmitted elsewhere, but there is no elsewhere. The retry clocks of
// the waiting packets still run out.
func TestRetryLimitAllPlanesDown(t *testing.T) {
	for _, how := range []string{"local", "peer"} {
		t.Run(how, func(t *testing.T) {
			cfg := packetCfg()
			a, b := newPair(t, cfg, 1<<20)
			a.write(b, 1, verbs.OpWrite, 0, 8*pmtu, 0)
			a.drain(0, 0xf)
			if how == "local" {
				for p := 0; p < cfg.Planes; p++ {
					a.q.SetPlaneStatus(p, false)
				}
			} else {
				a.q.ApplyPortStatus(0)
			}
			sched := retrySchedule(cfg)
			at, comps := blackHole(t, a, 1000, 2*sched)
			checkRetryFailure(t, a, comps,
				verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded})
			if at != sched {
				t.Errorf("failed at %d ns, want %d", at, sched)
			}
		})
	}
}

// Work posted while no plane is up has no packet whose timer could run:
// the QP's own retry clock does, and fails it after the same schedule
// (counted from the first attempt to send).
func TestRetryLimitPostedWhileDown(t *testing.T) {
	cfg := smallCfg()
	a, b := newPair(t, cfg, 1<<20)
	for p := 0; p < cfg.Planes; p++ {
		a.q.SetPlaneStatus(p, false)
	}
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	a.write(b, 2, verbs.OpWrite, pmtu, pmtu, 0)
	const t0 = 5000
	sched := retrySchedule(cfg)
	at, comps := blackHole(t, a, t0, t0+2*sched)
	checkRetryFailure(t, a, comps,
		verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded},
		verbs.Completion{WRID: 2, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusFlushed})
	if at != t0+sched {
		t.Errorf("failed at %d ns, want %d", at, t0+sched)
	}
}

// A plane that comes back before the limit resets nothing it should not:
// the transfer completes, the QP stays READY.
func TestRetryClockStopsWhenPathReturns(t *testing.T) {
	cfg := smallCfg()
	a, b := newPair(t, cfg, 1<<20)
	for p := 0; p < cfg.Planes; p++ {
		a.q.SetPlaneStatus(p, false)
	}
	a.write(b, 1, verbs.OpWrite, 0, 4*pmtu, 0)
	now := int64(0)
	a.drain(now, 0xf)
	// Ride out most of the schedule with nothing to send on.
	for i := 0; i < 10; i++ {
		dl, ok := a.q.Deadline()
		if !ok {
			break
		}
		now = dl
		a.q.Tick(now)
		a.drain(now, 0xf)
	}
	if a.q.State() != verbs.QPReady {
		t.Fatal("failed before the limit")
	}
	for p := 0; p < cfg.Planes; p++ {
		a.q.SetPlaneStatus(p, true)
	}
	runUntilIdle(a, b, now, nil)
	if a.q.State() != verbs.QPReady {
		t.Fatal("QP failed after the plane came back")
	}
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusOK, Bytes: 4 * pmtu})
	sameBytes(t, a, b, 0, 4*pmtu)
}
