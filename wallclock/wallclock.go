// Package wallclock is the one place vcluster reads the wall clock: it
// implements sim.WallClock for real-time pacing, progress rates and
// benchmarks. Simulated packages never import it.
package wallclock

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the process's monotonic wall clock.
type Clock struct {
	base time.Time
	// fine is made at the first short sleep (most clocks never take one:
	// progress rates, experiments), and its eventfd closed when the
	// Clock is collected. nil after that: short sleeps in fineNap steps.
	fine     atomic.Pointer[fineSleeper]
	fineOnce sync.Once
}

// New returns a wall clock whose zero is now.
func New() *Clock { return &Clock{base: time.Now()} }

// Wake ends a short sleep of SleepUntil in progress early (the loop's
// Inject calls it after signalling its wake channel): a short sleep
// waits in the kernel, where the channel cannot reach it.
func (c *Clock) Wake() {
	if f := c.fine.Load(); f != nil {
		f.wake()
	}
}

// fineSleeper is the clock's, made at its first use.
func (c *Clock) fineSleeper() *fineSleeper {
	c.fineOnce.Do(func() {
		if f := newFineSleeper(); f != nil {
			f.closeWith(c)
			c.fine.Store(f)
		}
	})
	return c.fine.Load()
}

// Now returns monotonic nanoseconds since New.
func (c *Clock) Now() int64 { return int64(time.Since(c.base)) }

// SleepUntil blocks until Now() ≥ deadline or wake is signalled.
//
// A Go timer wakes about a millisecond late on an idle Linux machine (the
// runtime's poller waits in whole milliseconds), which a real-time loop
// pacing frames microseconds apart cannot afford: sleeps shorter than
// fineSleep wait in the kernel (fineSleeper: one ppoll with a
// nanosecond timeout that Wake ends), or, without an eventfd, in
// fineSlice steps of the OS's own sleep (fineNap), checking wake between
// them.
func (c *Clock) SleepUntil(deadline int64, wake <-chan struct{}) {
	d := time.Duration(deadline - c.Now())
	if d <= 0 {
		return
	}
	if d <= fineSleep {
		if f := c.fineSleeper(); f != nil {
			f.sleep(c, deadline, wake)
			return
		}
	}
	if d <= fineSleep && fineNap != nil {
		for {
			select {
			case <-wake:
				return
			default:
			}
			rem := time.Duration(deadline - c.Now())
			if rem <= 0 {
				return
			}
			fineNap(min(rem, fineSlice))
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	}
}

// fineSleep is the longest sleep taken in fine steps, fineSlice the step.
const (
	fineSleep = 2 * time.Millisecond
	fineSlice = 50 * time.Microsecond
)
