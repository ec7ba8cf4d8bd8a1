package wallclock

import (
	"os"
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

// Wake ends a short sleep already waiting in the kernel (the channel
// cannot reach it there), and the wait costs few context switches: the
// old 50 µs nanosleep steps took 40 per 2 ms sleep.
func TestWakeEndsAFineSleep(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fine sleeps are Linux's")
	}
	c := New()
	if c.fineSleeper() == nil {
		t.Skip("no eventfd here: short sleeps take nanosleep steps")
	}
	early := 0
	for range 50 {
		wake := make(chan struct{}, 1)
		deadline := c.Now() + int64(1900*time.Microsecond)
		go func() {
			time.Sleep(200 * time.Microsecond)
			wake <- struct{}{}
			c.Wake()
		}()
		c.SleepUntil(deadline, wake)
		if c.Now() < deadline-int64(500*time.Microsecond) {
			early++
		}
		<-time.After(2 * time.Millisecond) // the goroutine has finished
	}
	// Loose: a loaded machine may run the waker late; one early end in
	// 50 shows Wake reaches a sleep in progress.
	if early == 0 {
		t.Fatalf("no 1.9 ms sleep of 50 ended ≥ 0.5 ms early after a wake at 0.2 ms")
	}
	t.Logf("%d of 50 sleeps ended early on Wake", early)
	var ru0, ru1 unixRusage
	getRusage(&ru0)
	for range 100 {
		c.SleepUntil(c.Now()+int64(2*time.Millisecond), nil)
	}
	getRusage(&ru1)
	if cs := ru1.nvcsw - ru0.nvcsw; cs > 100*10 {
		t.Errorf("100 sleeps of 2 ms took %d voluntary context switches, want ≤ 1000 (nanosleep steps: ~4000)", cs)
	} else {
		t.Logf("100 sleeps of 2 ms: %d voluntary context switches", cs)
	}
}

// A clock's eventfd is made at its first short sleep and closed when the
// clock is collected: an experiment sweep makes a clock per run, and an
// fd each would run out.
func TestFineSleeperFDsAreReleased(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fine sleeps are Linux's")
	}
	fds := func() int {
		es, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip(err)
		}
		return len(es)
	}
	before := fds()
	for range 2000 {
		c := New()
		c.SleepUntil(c.Now()+int64(10*time.Microsecond), nil)
	}
	grown := 0
	for range 50 {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		if grown = fds() - before; grown < 100 {
			break
		}
	}
	if grown >= 100 {
		t.Fatalf("2000 clocks that slept left %d more open fds", grown)
	}
}
