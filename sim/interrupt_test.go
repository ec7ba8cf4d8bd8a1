package sim_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// chain is an endless chain of events: each schedules the next one 1 ns
// later, so a run only ends when something stops it.
type chain struct {
	l     *sim.Loop
	ran   atomic.Uint64 // events run (read by the interrupting goroutine)
	after atomic.Uint64 // events that started with the interrupt already set
}

func (c *chain) OnEvent(arg uint64) {
	if sim.Interrupted() {
		c.after.Add(1)
	}
	c.ran.Add(1)
	c.l.Post(c.l.Now()+1, c, arg)
}

// interruptAfter calls sim.Interrupt from another goroutine once n events
// of the chains ran.
func interruptAfter(n uint64, cs ...*chain) {
	go func() {
		for {
			var total uint64
			for _, c := range cs {
				total += c.ran.Load()
			}
			if total >= n {
				sim.Interrupt()
				return
			}
			runtime.Gosched()
		}
	}()
}

// returnsWithin fails the test if run does not return within a generous
// wall-clock bound (an interrupt that is ignored hangs forever).
func returnsWithin(t *testing.T, what string, run func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { run(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return after Interrupt", what)
	}
}

func TestInterruptStopsLoop(t *testing.T) {
	runs := map[string]func(l *sim.Loop){
		"Run":       func(l *sim.Loop) { l.Run() },
		"RunUntil":  func(l *sim.Loop) { l.RunUntil(sim.MaxTime - 1) },
		"RunFor":    func(l *sim.Loop) { l.RunFor(time.Hour) },
		"RunBefore": func(l *sim.Loop) { l.RunBefore(sim.MaxTime) },
		"RunWhile": func(l *sim.Loop) {
			if l.RunWhile(func() bool { return true }) {
				t.Errorf("RunWhile reports cond false after an interrupt")
			}
		},
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			defer sim.ResetInterrupt()
			l := sim.NewLoop(sim.Options{Seed: 1})
			c := &chain{l: l}
			l.Post(0, c, 0)
			interruptAfter(10000, c)
			returnsWithin(t, name, func() { run(l) })
			if !sim.Interrupted() {
				t.Fatal("Interrupted() is false after Interrupt")
			}
			if a := c.after.Load(); a > 1 {
				t.Fatalf("%d events started after the interrupt; at most the one running may", a)
			}
			// Nothing was lost: the chain's next event is still queued, and
			// the clock stayed at the last event run (not at RunUntil's limit).
			if l.Pending() != 1 {
				t.Fatalf("%d events pending after the interrupt, want 1", l.Pending())
			}
			if l.Now() != sim.Time(c.ran.Load()-1) {
				t.Fatalf("clock at %d after %d events 1 ns apart", l.Now(), c.ran.Load())
			}
			// While interrupted, a run returns at once.
			n := l.Executed()
			l.RunFor(time.Millisecond)
			if l.Executed() != n {
				t.Fatalf("a run started while interrupted ran %d events", l.Executed()-n)
			}
			// After ResetInterrupt the same loop runs on.
			sim.ResetInterrupt()
			l.RunFor(100)
			if l.Executed() <= n {
				t.Fatal("loop does not run after ResetInterrupt")
			}
		})
	}
}

func TestInterruptStopsParallel(t *testing.T) {
	for _, workers := range []int{1, 2} {
		defer sim.ResetInterrupt()
		var cs []*chain
		var loops []*sim.Loop
		for range 3 {
			l := sim.NewLoop(sim.Options{Seed: 1})
			c := &chain{l: l}
			l.Post(0, c, 0)
			cs, loops = append(cs, c), append(loops, l)
		}
		p, err := sim.NewParallel(loops, 1000, nil)
		if err != nil {
			t.Fatal(err)
		}
		// A global event chain too: between windows the coordinator must
		// see the interrupt as well.
		var tick func()
		tick = func() { p.AfterFunc(500, tick) }
		p.At(0, tick)
		interruptAfter(30000, cs...)
		returnsWithin(t, "Parallel.Run", func() { p.Run(workers) })
		for i, c := range cs {
			if a := c.after.Load(); a > 1 {
				t.Fatalf("workers=%d: partition %d ran %d events after the interrupt", workers, i, a)
			}
		}
		sim.ResetInterrupt()
	}
}

// blockingWall is a wall clock that never advances: a real-time loop
// waiting for its next event sleeps until woken.
type blockingWall struct{}

func (blockingWall) Now() int64 { return 0 }
func (blockingWall) SleepUntil(_ int64, wake <-chan struct{}) {
	if wake != nil {
		<-wake
	}
}

// A real-time loop asleep until its next event's wall time is woken by
// Interrupt and returns.
func TestInterruptWakesRealtime(t *testing.T) {
	defer sim.ResetInterrupt()
	l := sim.NewLoop(sim.Options{Wall: blockingWall{}, RealTime: true})
	fired := false
	l.At(sim.Second, func() { fired = true })
	go func() {
		time.Sleep(20 * time.Millisecond) // let the loop fall asleep
		sim.Interrupt()
	}()
	returnsWithin(t, "real-time RunUntil", func() { l.RunUntil(2 * sim.Second) })
	if fired {
		t.Fatal("the event ran before its wall time")
	}
	if l.Now() != 0 {
		t.Fatalf("clock moved to %d on interrupt", l.Now())
	}
}
