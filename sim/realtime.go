package sim

import (
	"math"
	"sync"
	"time"
)

// WallClock is the wall-clock source for real-time pacing and progress
// rates. sim never reads the wall clock itself; package wallclock provides
// the real one and tests can supply their own.
type WallClock interface {
	// Now returns monotonic wall time in nanoseconds.
	Now() int64
	// SleepUntil blocks until Now() ≥ deadline or wake is signalled.
	SleepUntil(deadline int64, wake <-chan struct{})
}

// LagStats describes how far behind wall time a real-time loop ran events.
type LagStats struct {
	Events int64
	Max    time.Duration
	Mean   time.Duration
	Early  int64 // events that ran before their wall time (must stay 0)
}

type realtime struct {
	wall     WallClock
	enabled  bool
	slowdown float64
	start    int64
	wake     chan struct{}
	waker    Waker // wall, when it is one (Inject ends its sleeps)

	mu       sync.Mutex
	injected []func()
	spare    []func() // the drained slice, reused so Inject allocates nothing in steady state

	lagN, early  int64
	lagMax, lagS int64
	onLag        func(lag time.Duration) // SetLagObserver
}

// wallFor returns the wall time at which virtual time t is due.
func (r *realtime) wallFor(t Time) int64 {
	return r.start + int64(float64(t)*r.slowdown)
}

// virtualAt returns the virtual time corresponding to wall time w.
func (r *realtime) virtualAt(w int64) Time {
	return Time(float64(w-r.start) / r.slowdown)
}

// Inject schedules f to run on the loop at the current virtual time (the
// wall clock's "now" mapped to virtual time). It is the only Loop method
// safe to call from other goroutines, and only in real-time pacing.
func (l *Loop) Inject(f func()) {
	r := l.rt
	if r == nil || !r.enabled {
		panic("sim: Inject needs real-time pacing")
	}
	r.mu.Lock()
	r.injected = append(r.injected, f)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if r.waker != nil {
		r.waker.Wake()
	}
}

// Waker is a WallClock whose SleepUntil may wait where the wake channel
// cannot reach it (in the kernel): Inject calls Wake after signalling
// the channel.
type Waker interface{ Wake() }

// SetLagObserver installs f, called on the loop goroutine with every
// event's lag behind its wall time in real-time pacing (for percentiles:
// Lag keeps only the mean and the maximum). Call it before the loop runs.
func (l *Loop) SetLagObserver(f func(lag time.Duration)) {
	if l.rt != nil {
		l.rt.onLag = f
	}
}

// WallTime returns the virtual time the wall clock's now maps to, in
// real-time pacing (the loop's Now is the time of the last event run,
// which lags it while idle); Now otherwise.
func (l *Loop) WallTime() Time {
	r := l.rt
	if r == nil || !r.enabled {
		return l.now
	}
	return max(l.now, r.virtualAt(r.wall.Now()))
}

// Lag reports the real-time lag statistics so far.
func (l *Loop) Lag() LagStats {
	if l.rt == nil || l.rt.lagN == 0 {
		return LagStats{}
	}
	r := l.rt
	return LagStats{Events: r.lagN, Max: time.Duration(r.lagMax), Mean: time.Duration(r.lagS / r.lagN), Early: r.early}
}

// drainInjected turns injected functions into events at the wall's now.
func (l *Loop) drainInjected() {
	r := l.rt
	r.mu.Lock()
	fs := r.injected
	r.injected = r.spare[:0]
	r.mu.Unlock()
	if len(fs) == 0 {
		r.spare = fs
		return
	}
	at := r.virtualAt(r.wall.Now())
	for i, f := range fs {
		l.insert(at, nil, f, 0)
		fs[i] = nil
	}
	r.spare = fs
}

// pace blocks, in real-time pacing, until event time t is due on the wall
// clock. Injections arriving meanwhile are not handled here (RunUntil's
// real-time path handles them); pace is for Step/RunWhile.
func (l *Loop) pace(t Time) {
	r := l.rt
	if r == nil || !r.enabled {
		return
	}
	due := r.wallFor(t)
	for r.wall.Now() < due {
		r.wall.SleepUntil(due, nil)
	}
	l.recordLag(due)
}

func (l *Loop) recordLag(due int64) {
	r := l.rt
	lag := r.wall.Now() - due
	if lag < 0 {
		r.early++
		lag = 0
	}
	if r.onLag != nil {
		r.onLag(time.Duration(lag))
	}
	r.lagN++
	r.lagS += lag
	if lag > r.lagMax {
		r.lagMax = lag
	}
}

// runRealtime runs events no earlier than their wall time until virtual
// time limit, handling injected work as it arrives. With cond it returns
// as soon as cond is false (checked before every event and after every
// wake-up) and, while it holds, an empty queue waits for injections
// instead of returning: a lab process's loop runs that way, fed by its
// tunnels.
func (l *Loop) runRealtime(limit Time, cond func() bool) {
	r := l.rt
	addSleeper(r.wake) // Interrupt wakes the sleep below
	defer removeSleeper(r.wake)
	for !l.halted() {
		l.drainInjected()
		if cond != nil && !cond() {
			l.catchUp()
			return
		}
		var due int64
		var target Time
		// minBound, not prepare: prepare moves the queue's floor to the
		// next event's time, and an injection arriving while we sleep
		// toward it (at the wall's now, earlier) would be clamped up to
		// that time — a far timer would hold every injection back.
		next, queued := Time(0), l.q.len() > 0
		if queued {
			next = Time(l.q.minBound()) // scans a bucket: once per turn
		}
		if queued && next <= limit {
			target = next
		} else if limit == maxTime {
			if cond == nil {
				return // idle
			}
			r.wall.SleepUntil(math.MaxInt64, r.wake) // until an injection or Interrupt
			continue
		} else {
			target = limit
		}
		due = r.wallFor(target)
		if r.wall.Now() < due {
			r.wall.SleepUntil(due, r.wake)
			continue // re-check: an injection may have arrived
		}
		if target == limit && (l.q.len() == 0 || !l.q.prepare(uint64(limit))) {
			if limit > l.now {
				l.now = limit
			}
			return
		}
		e, ok := l.next(target) // due now: the floor moves no later than the wall
		if !ok {
			continue
		}
		l.recordLag(due)
		l.fire(e)
	}
}

// catchUp moves Now to the wall's time, or to the next event's when that
// is earlier (never past an event still to run). A real-time loop that
// returns to its caller after an idle spell would otherwise keep the time
// of its last event: whatever the caller then schedules relative to Now
// (a QP's first timeout, say) would be due in the wall's past and fire at
// once, the loop racing through virtual time it should have spent
// waiting for the network.
func (l *Loop) catchUp() {
	t := l.rt.virtualAt(l.rt.wall.Now())
	if l.q.len() > 0 {
		t = min(t, Time(l.q.minBound()))
	}
	if t > l.now {
		l.now = t
	}
}

// WallStart returns the wall time (WallClock.Now) that virtual time 0 maps
// to, or 0 without a WallClock.
func (l *Loop) WallStart() int64 {
	if l.rt == nil {
		return 0
	}
	return l.rt.start
}
