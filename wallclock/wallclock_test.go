package wallclock

import (
	"runtime"
	"testing"
	"time"
)

// A short sleep ends close to its deadline: a Go timer alone wakes about
// a millisecond late, which real-time pacing of microsecond-spaced
// frames cannot afford. The bound is loose (a loaded CI machine), the
// median of 50 sleeps of 200 µs.
func TestShortSleepIsPrecise(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fine sleeps are Linux's (nanosleep); elsewhere Go timers")
	}
	c := New()
	var late []time.Duration
	for range 50 {
		d := c.Now() + int64(200*time.Microsecond)
		c.SleepUntil(d, nil)
		late = append(late, time.Duration(c.Now()-d))
	}
	med := median(late)
	if med < 0 || med > 500*time.Microsecond {
		t.Fatalf("median lateness %v over 50 sleeps of 200 µs, want ≤ 500 µs", med)
	}
	t.Logf("median lateness of a 200 µs sleep: %v", med)
}

// A wake ends a sleep early, short or long.
func TestSleepWakes(t *testing.T) {
	c := New()
	for _, d := range []time.Duration{time.Millisecond, time.Second} {
		wake := make(chan struct{}, 1)
		wake <- struct{}{}
		t0 := time.Now()
		c.SleepUntil(c.Now()+int64(d), wake)
		if el := time.Since(t0); el > 100*time.Millisecond && d == time.Second || el > d+100*time.Millisecond {
			t.Fatalf("a woken %v sleep took %v", d, el)
		}
	}
}

func median(xs []time.Duration) time.Duration {
	s := append([]time.Duration(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
