package sim

import (
	"sync"
	"sync/atomic"
)

// interrupted is the process-wide interrupt flag. Every run loop (Loop's
// Run*, real-time runs, Parallel runs) loads it once per event, next to its
// Stop flag: an atomic load is a plain load on the platforms we run on, so
// the check costs nothing measurable.
var interrupted atomic.Bool

// sleepers are the wake channels of real-time loops sleeping until an
// event's wall time, so that Interrupt does not wait for the sleep to end.
var sleepers struct {
	mu sync.Mutex
	m  map[chan struct{}]int
}

// Interrupt makes every Loop and Parallel run in the process stop at the
// next event boundary (after the event running, if any) and return, and
// every run started later return at once, until ResetInterrupt. It is safe
// to call from any goroutine (a signal handler's). A run stopped this way
// leaves its loops consistent: no event is half run, nothing is dropped,
// and the caller can flush what it has.
func Interrupt() {
	interrupted.Store(true)
	sleepers.mu.Lock()
	for c := range sleepers.m {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	sleepers.mu.Unlock()
}

// Interrupted reports whether Interrupt was called (since the last
// ResetInterrupt).
func Interrupted() bool { return interrupted.Load() }

// ResetInterrupt clears the interrupt, so runs run again (tests).
func ResetInterrupt() { interrupted.Store(false) }

// addSleeper registers a real-time loop's wake channel while it runs.
func addSleeper(c chan struct{}) {
	sleepers.mu.Lock()
	if sleepers.m == nil {
		sleepers.m = make(map[chan struct{}]int)
	}
	sleepers.m[c]++
	sleepers.mu.Unlock()
}

func removeSleeper(c chan struct{}) {
	sleepers.mu.Lock()
	if sleepers.m[c]--; sleepers.m[c] <= 0 {
		delete(sleepers.m, c)
	}
	sleepers.mu.Unlock()
}
