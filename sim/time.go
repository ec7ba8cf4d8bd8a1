package sim

import (
	"fmt"
	"time"
)

// Time is virtual time in integer nanoseconds since the start of a run.
type Time int64

// Common virtual durations, as Time offsets.
const (
	Nanosecond  Time = 1
	Microsecond Time = 1000
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Add returns t+d for a Go duration d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Duration converts an offset in virtual nanoseconds to a time.Duration.
func (t Time) Duration() time.Duration { return time.Duration(t) }

// Micros returns t in (fractional) microseconds.
func (t Time) Micros() float64 { return float64(t) / 1e3 }

func (t Time) String() string { return fmt.Sprintf("%v", time.Duration(t)) }
