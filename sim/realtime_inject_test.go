package sim_test

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// An injection that arrives while the loop sleeps toward a far event runs
// at once, not at that event's time (the queue's floor must not move to
// the far event before it is due).
func TestRealtimeInjectionNotHeldByAFarTimer(t *testing.T) {
	w := wallclock.New()
	l := sim.NewLoop(sim.Options{Wall: w, RealTime: true})
	l.AfterFunc(time.Hour, func() {})
	var ranAt sim.Time
	ran := false
	go func() {
		time.Sleep(20 * time.Millisecond)
		l.Inject(func() { ranAt, ran = l.Now(), true })
	}()
	returnsWithin(t, "RunWhile", func() { l.RunWhile(func() bool { return !ran }) })
	if ranAt > sim.Time(10*time.Second) {
		t.Fatalf("the injection ran at virtual %v: held back by the timer an hour away", time.Duration(ranAt))
	}
}
