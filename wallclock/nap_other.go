//go:build !linux

package wallclock

import "time"

// fineNap is nil off Linux: SleepUntil uses Go timers throughout.
var fineNap func(time.Duration)
