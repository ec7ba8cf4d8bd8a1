// Package wallclock is the one place vcluster reads the wall clock: it
// implements sim.WallClock for real-time pacing, progress rates and
// benchmarks. Simulated packages never import it.
package wallclock

import "time"

// Clock is the process's monotonic wall clock.
type Clock struct{ base time.Time }

// New returns a wall clock whose zero is now.
func New() *Clock { return &Clock{base: time.Now()} }

// Now returns monotonic nanoseconds since New.
func (c *Clock) Now() int64 { return int64(time.Since(c.base)) }

// SleepUntil blocks until Now() ≥ deadline or wake is signalled.
func (c *Clock) SleepUntil(deadline int64, wake <-chan struct{}) {
	d := time.Duration(deadline - c.Now())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wake:
	}
}
