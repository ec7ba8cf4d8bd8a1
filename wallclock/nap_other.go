//go:build !linux

package wallclock

import "time"

// fineNap is nil off Linux: SleepUntil uses Go timers throughout.
var fineNap func(time.Duration)

// fineSleeper exists only on Linux.
type fineSleeper struct{}

func newFineSleeper() *fineSleeper                                          { return nil }
func (f *fineSleeper) sleep(c *Clock, deadline int64, wake <-chan struct{}) {}
func (f *fineSleeper) wake()                                                {}
func (f *fineSleeper) closeWith(c *Clock)                                   {}
