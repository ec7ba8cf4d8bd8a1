package sim_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// Real-time pacing: a schedule of timers over 50 ms of wall time fires in
// order and never early; the lag is reported (the bound is loose because CI
// machines are noisy).
func TestRealtimePacingNeverEarly(t *testing.T) {
	w := wallclock.New()
	l := sim.NewLoop(sim.Options{Wall: w, RealTime: true})
	type firing struct {
		virt sim.Time
		wall int64
	}
	var got []firing
	for i := 0; i < 100; i++ {
		at := sim.Time(i) * 500 * sim.Microsecond // 0 .. 49.5 ms
		l.At(at, func() { got = append(got, firing{l.Now(), w.Now()}) })
	}
	// An external producer injects work while the loop runs.
	injectedAt := make(chan sim.Time, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Inject(func() { injectedAt <- l.Now() })
	}()
	start := l.WallStart()
	l.RunUntil(50 * sim.Millisecond)
	if len(got) != 100 {
		t.Fatalf("%d timers fired, want 100", len(got))
	}
	for i, f := range got {
		if i > 0 && f.virt < got[i-1].virt {
			t.Fatalf("out of order at %d", i)
		}
		if f.wall < start+int64(f.virt) {
			t.Fatalf("timer %d ran %v early", i, time.Duration(start+int64(f.virt)-f.wall))
		}
	}
	lag := l.Lag()
	if lag.Early != 0 {
		t.Fatalf("%d events early", lag.Early)
	}
	if lag.Max > 20*time.Millisecond {
		t.Fatalf("max lag %v", lag.Max)
	}
	select {
	case v := <-injectedAt:
		if v < 19*sim.Millisecond || v > 50*sim.Millisecond {
			t.Fatalf("injected work ran at virtual %v", v)
		}
	default:
		t.Fatal("injected work did not run")
	}
	if elapsed := time.Duration(w.Now() - start); elapsed < 50*time.Millisecond {
		t.Fatalf("50 ms of virtual time took only %v of wall time", elapsed)
	}
	t.Logf("real-time lag over %d events: mean %v, max %v", lag.Events, lag.Mean, lag.Max)
}

// In real-time pacing RunWhile waits on an empty queue for injected work
// and returns once cond turns false; WallTime runs ahead of Now while idle.
func TestRealtimeRunWhileWaitsForInjections(t *testing.T) {
	w := wallclock.New()
	l := sim.NewLoop(sim.Options{Wall: w, RealTime: true})
	var lags int
	l.SetLagObserver(func(time.Duration) { lags++ })
	done := false
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Inject(func() { l.AfterFunc(time.Millisecond, func() { done = true }) })
	}()
	returnsWithin(t, "RunWhile", func() { l.RunWhile(func() bool { return !done }) })
	if !done {
		t.Fatal("RunWhile returned before the injected work ran")
	}
	if l.Now() < sim.Time(21*time.Millisecond) {
		t.Fatalf("the injected timer ran at %v, want ≥ 21ms of wall time", l.Now())
	}
	if lags != 2 {
		t.Fatalf("lag observer saw %d events, want 2 (the injection and its timer)", lags)
	}
	time.Sleep(5 * time.Millisecond)
	if l.WallTime() <= l.Now() {
		t.Fatalf("WallTime %v not ahead of Now %v while idle", l.WallTime(), l.Now())
	}
}

// A real-time RunWhile whose condition another goroutine ends (a lab
// host's driver: work arrived, and an injection woke the loop) returns
// with Now at the wall's time, not at its last event's: what the caller
// schedules next is not due in the past.
func TestRealtimeRunWhileCatchesUp(t *testing.T) {
	w := wallclock.New()
	l := sim.NewLoop(sim.Options{Wall: w, RealTime: true})
	var work atomic.Bool
	go func() {
		time.Sleep(30 * time.Millisecond)
		work.Store(true)
		l.Inject(func() {}) // wakes the loop
	}()
	l.RunWhile(func() bool { return !work.Load() })
	if l.Now() < sim.Time(30*time.Millisecond) {
		t.Fatalf("Now %v after 30 ms of wall time: the loop did not catch up", l.Now())
	}
	fired := sim.Time(0)
	start := l.Now()
	l.AfterFunc(10*time.Millisecond, func() { fired = l.Now() })
	t0 := time.Now()
	l.RunUntil(start + sim.Time(10*time.Millisecond))
	if fired == 0 || time.Since(t0) < 9*time.Millisecond {
		t.Fatalf("a 10 ms timer scheduled after the catch-up fired after %v of wall time (virtual %v)", time.Since(t0), fired)
	}
}
