package sim

import (
	"time"
	"unsafe"
)

// Handler receives events scheduled with Loop.Schedule. Components that fire
// many events (ports, links, transports) implement it on themselves so that
// scheduling allocates nothing; arg is theirs to interpret.
type Handler interface {
	OnEvent(arg uint64)
}

// Clock is what every simulated component is driven by. Now is virtual time;
// callbacks run on the loop goroutine, in time order, ties in scheduling
// order (after the ranked events of that time, see ScheduleRanked).
type Clock interface {
	Now() Time
	AfterFunc(d time.Duration, f func()) Timer
	Schedule(at Time, h Handler, arg uint64) Timer
}

// node is the loop-side state of one scheduled event. Nodes live in a slice
// and are recycled through a free list; seq identifies the scheduling that
// owns a node, so stale queue entries and stale Timer handles are recognised.
type node struct {
	h   Handler
	pf  Prefetcher // h, if it is one (asserted once, when scheduled)
	f   func()
	arg uint64
	seq uint64 // of the scheduling that owns the node; 0 when free
	at  Time
}

// Timer is a handle on a scheduled event. The zero Timer is valid and never
// pending.
type Timer struct {
	l    *Loop
	slot int32
	seq  uint64
}

// Stop cancels the event. It reports whether the call stopped it (false if it
// already ran or was stopped).
func (t Timer) Stop() bool {
	if t.l == nil || !t.Pending() {
		return false
	}
	t.l.release(t.slot)
	t.l.live--
	return true
}

// Pending reports whether the event is still scheduled.
func (t Timer) Pending() bool {
	return t.l != nil && t.l.nodes[t.slot].seq == t.seq
}

// When returns the virtual time the event is scheduled for (valid while
// Pending).
func (t Timer) When() Time { return t.l.nodes[t.slot].at }

// Progress is what a progress callback sees.
type Progress struct {
	Now          Time    // virtual time
	Events       uint64  // events executed so far
	Pending      int     // events scheduled
	EventsPerSec float64 // over the last reporting interval; 0 without a WallClock
	WallElapsed  time.Duration
}

// Loop is one deterministic discrete-event loop. It is not safe for use from
// several goroutines, except Inject, which external producers (lab tunnels)
// use in real-time pacing.
type Loop struct {
	now      Time
	seq      uint64
	q        radixQueue
	nodes    []node
	free     []int32
	live     int
	executed uint64
	stopped  bool
	seed     uint64

	progress      func(Progress)
	progressEvery uint64 // events between progress callbacks
	nextProgress  uint64
	lastProgWall  int64
	lastProgEvts  uint64

	rt *realtime // non-nil in real-time pacing

	noPrefetch bool   // SetPrefetch(false)
	prefetched uint64 // Prefetch calls made

}

// Options configures a Loop.
type Options struct {
	// Seed is the run seed from which every component stream is derived.
	Seed uint64
	// Wall supplies wall-clock time for progress rates and real-time pacing.
	// Nil is fine for simulated runs (rates are then reported as 0).
	Wall WallClock
	// RealTime selects real-time pacing: no event runs before its wall time.
	// It requires Wall.
	RealTime bool
	// Slowdown stretches virtual time in real-time pacing: one virtual second
	// takes Slowdown wall seconds (≥1; 0 means 1).
	Slowdown float64
}

// rankedSeqs is where ordinary sequence numbers start: the ones below are
// ranks (ScheduleRanked), so ranked events sort before ordinary ones of the
// same time.
const rankedSeqs = 1 << 32

// NewLoop returns an empty loop at virtual time 0.
func NewLoop(o Options) *Loop {
	l := &Loop{seed: o.Seed, seq: rankedSeqs}
	if o.Wall != nil {
		l.rt = &realtime{wall: o.Wall, enabled: o.RealTime, slowdown: o.Slowdown}
		l.rt.waker, _ = o.Wall.(Waker)
		if l.rt.slowdown < 1 {
			l.rt.slowdown = 1
		}
		l.rt.wake = make(chan struct{}, 1)
		l.rt.start = o.Wall.Now()
	}
	return l
}

// Now returns the current virtual time.
func (l *Loop) Now() Time { return l.now }

// Seed returns the run seed.
func (l *Loop) Seed() uint64 { return l.seed }

// Executed returns the number of events run so far.
func (l *Loop) Executed() uint64 { return l.executed }

// Pending returns the number of scheduled (not stopped) events.
func (l *Loop) Pending() int { return l.live }

func (l *Loop) alloc() int32 {
	if n := len(l.free); n > 0 {
		s := l.free[n-1]
		l.free = l.free[:n-1]
		return s
	}
	l.nodes = append(l.nodes, node{})
	return int32(len(l.nodes) - 1)
}

func (l *Loop) release(slot int32) {
	nd := &l.nodes[slot]
	nd.seq = 0
	nd.h, nd.pf, nd.f = nil, nil, nil
	l.free = append(l.free, slot)
}

func (l *Loop) insert(at Time, h Handler, f func(), arg uint64) Timer {
	if at < l.now {
		at = l.now
	}
	if l.live >= MaxPending {
		panic("sim: more than MaxPending events scheduled")
	}
	s := l.alloc()
	l.seq++
	nd := &l.nodes[s]
	nd.h, nd.f, nd.arg, nd.at, nd.seq = h, f, arg, at, l.seq
	nd.pf, _ = h.(Prefetcher)
	l.q.push(qentry{at: uint64(at), key: l.seq<<slotBits | uint64(s)})
	l.live++
	return Timer{l: l, slot: s, seq: l.seq}
}

// Schedule runs h.OnEvent(arg) at virtual time at (clamped to now). It
// allocates nothing in steady state.
func (l *Loop) Schedule(at Time, h Handler, arg uint64) Timer {
	return l.insert(at, h, nil, arg)
}

// ScheduleRanked runs h.OnEvent(arg) at virtual time at, before every
// ordinary event of the same time, and among the ranked events of that time
// in rank order (equal ranks: in any order, so a rank must name a handler
// for which the order does not matter). The order of ties then depends on
// the ranks, not on when the event was scheduled: links use it so that
// frame arrivals order the same way however the fabric is partitioned.
// The event cannot be stopped (the Timer returned is the zero Timer).
func (l *Loop) ScheduleRanked(at Time, h Handler, arg uint64, rank uint32) Timer {
	if at < l.now {
		at = l.now
	}
	if l.live >= MaxPending {
		panic("sim: more than MaxPending events scheduled")
	}
	s := l.alloc()
	seq := uint64(rank) + 1
	nd := &l.nodes[s]
	nd.h, nd.f, nd.arg, nd.at, nd.seq = h, nil, arg, at, seq
	nd.pf, _ = h.(Prefetcher)
	l.q.pushSorted(qentry{at: uint64(at), key: seq<<slotBits | uint64(s)})
	l.live++
	return Timer{}
}

// Post runs h.OnEvent(arg) at virtual time at (clamped to now), like
// Schedule, for callers that never stop the event (ports, links).
//
// It is Schedule today. Carrying the handler in the queue entry instead
// of a node (no node lookup per event) was measured and rejected: 40-byte
// entries made the radix queue's redistribution twice as slow (hold model
// 38 → 75 ns/event) for a node lookup that costs ~1.5% of a million-port
// run, as the free list reuses hot nodes.
func (l *Loop) Post(at Time, h Handler, arg uint64) { l.insert(at, h, nil, arg) }

// PostRanked is ScheduleRanked for callers that never stop the event.
func (l *Loop) PostRanked(at Time, h Handler, arg uint64, rank uint32) {
	l.ScheduleRanked(at, h, arg, rank)
}

// ScheduleAfter runs h.OnEvent(arg) after d.
func (l *Loop) ScheduleAfter(d time.Duration, h Handler, arg uint64) Timer {
	return l.insert(l.now+Time(d), h, nil, arg)
}

// AfterFunc runs f after d of virtual time.
func (l *Loop) AfterFunc(d time.Duration, f func()) Timer {
	return l.insert(l.now+Time(d), nil, f, 0)
}

// At runs f at virtual time t.
func (l *Loop) At(t Time, f func()) Timer { return l.insert(t, nil, f, 0) }

// next pops the next live entry, or reports false when none remains at or
// before limit.
func (l *Loop) next(limit Time) (qentry, bool) {
	for l.q.len() > 0 {
		if !l.q.prepare(uint64(limit)) {
			return qentry{}, false
		}
		e := l.q.pop()
		if l.nodes[e.slot()].seq != e.seq() {
			continue // stopped
		}
		if l.q.head0 < len(l.q.buckets[0]) && !l.noPrefetch {
			l.prefetch() // only when another event of this time follows
		}
		return e, true
	}
	return qentry{}, false
}

// Prefetcher is implemented by handlers whose events touch memory that is
// cold in a large simulation (a frame arriving at one of a million ports).
// The loop calls Prefetch(stage, arg) for the events a few places ahead of
// the one it runs — stage 0 for the farthest, stage PrefetchStages-1 for
// the nearest — so a handler can follow its pointers one step per stage:
// each stage may read only what an earlier stage prefetched (or the
// receiver's own lines, which stage 0 prefetches) and issues PrefetchLine
// for the next step. Prefetch must not write anything and must tolerate
// any state (the event it prepares may have been stopped).
type Prefetcher interface {
	Prefetch(stage int, arg uint64)
}

// PrefetchStages is the number of Prefetch stages, and prefetchDist the
// distance (in events of the current time) at which each runs.
const PrefetchStages = 6

var prefetchDist = [PrefetchStages]int{14, 11, 8, 5, 3, 1}

// prefetch runs the prefetch stages for the events ahead of the one about
// to fire. Only events of the current time are known in order (bucket 0);
// later ones are not prepared.
func (l *Loop) prefetch() {
	b0 := l.q.buckets[0]
	if i := l.q.head0 + prefetchDist[0] + 3; i < len(b0) {
		// The node the farthest stage will read, three events later.
		PrefetchLine(unsafe.Pointer(&l.nodes[b0[i].slot()]))
	}
	for st, d := range prefetchDist {
		i := l.q.head0 + d - 1
		if i >= len(b0) {
			continue
		}
		if nd := &l.nodes[b0[i].slot()]; nd.pf != nil {
			nd.pf.Prefetch(st, nd.arg)
			l.prefetched++
		}
	}
}

// SetPrefetch turns the Prefetcher calls on (the default) or off. It
// changes speed only, never results (tests compare the two).
func (l *Loop) SetPrefetch(on bool) { l.noPrefetch = !on }

// Prefetched returns how many Prefetch calls the loop made.
func (l *Loop) Prefetched() uint64 { return l.prefetched }

func (l *Loop) fire(e qentry) {
	nd := &l.nodes[e.slot()]
	h, f, arg := nd.h, nd.f, nd.arg
	l.release(e.slot())
	l.live--
	l.now = Time(e.at)
	l.executed++
	if h != nil {
		h.OnEvent(arg)
	} else {
		f()
	}
	if l.progress != nil && l.executed >= l.nextProgress {
		l.reportProgress()
	}
}

const maxTime = Time(1<<63 - 1)

// Step runs the next event, if any, and reports whether one ran.
func (l *Loop) Step() bool {
	e, ok := l.next(maxTime)
	if !ok {
		return false
	}
	l.pace(Time(e.at))
	l.fire(e)
	return true
}

// Stop makes the current Run* call return after the running event.
func (l *Loop) Stop() { l.stopped = true }

// halted reports whether the current Run* call must return: Stop was
// called, or Interrupt.
func (l *Loop) halted() bool { return l.stopped || interrupted.Load() }

// Run runs until no event is left (idle) or Stop is called.
func (l *Loop) Run() { l.RunUntil(maxTime) }

// RunUntil runs every event scheduled at or before t, then sets the clock to
// t (unless stopped early or t is maxTime). Every Run* call returns after
// the running event when Stop or Interrupt is called.
func (l *Loop) RunUntil(t Time) {
	l.stopped = false
	if l.rt != nil && l.rt.enabled {
		l.runRealtime(t, nil)
		return
	}
	for !l.halted() {
		e, ok := l.next(t)
		if !ok {
			break
		}
		l.fire(e)
	}
	if !l.halted() && t != maxTime && t > l.now {
		l.now = t
	}
}

// RunBefore runs every event scheduled before t (not at t) and leaves the
// clock at the last event it ran: one window of a Parallel run. It returns
// early if Stop or Interrupt is called.
func (l *Loop) RunBefore(t Time) {
	l.stopped = false
	for !l.halted() && t > 0 {
		e, ok := l.next(t - 1)
		if !ok {
			return
		}
		l.fire(e)
	}
}

// NextBound returns a lower bound on the time of the next event (exact
// unless stopped events are still queued), without changing the queue, and
// false when nothing is queued.
func (l *Loop) NextBound() (Time, bool) {
	if l.q.len() == 0 {
		return 0, false
	}
	return Time(max(l.q.minBound(), uint64(l.now))), true
}

// RunFor runs for d of virtual time from now.
func (l *Loop) RunFor(d time.Duration) { l.RunUntil(l.now + Time(d)) }

// RunWhile runs events while cond() holds (checked before each event) and
// events remain; it reports whether it stopped because cond became false.
// In real-time pacing an empty queue does not end it: it waits for
// injected work (Inject) while cond holds, until Stop or Interrupt.
func (l *Loop) RunWhile(cond func() bool) bool {
	l.stopped = false
	if l.rt != nil && l.rt.enabled {
		l.runRealtime(maxTime, cond)
		return !cond()
	}
	for !l.halted() {
		if !cond() {
			return true
		}
		e, ok := l.next(maxTime)
		if !ok {
			return !cond()
		}
		l.pace(Time(e.at))
		l.fire(e)
	}
	return !cond()
}

// OnProgress installs f, called every `every` events (and at least once per
// Run call that executes that many).
func (l *Loop) OnProgress(every uint64, f func(Progress)) {
	if every == 0 {
		every = 1 << 20
	}
	l.progress, l.progressEvery = f, every
	l.nextProgress = l.executed + every
	if l.rt != nil {
		l.lastProgWall = l.rt.wall.Now()
		l.lastProgEvts = l.executed
	}
}

func (l *Loop) reportProgress() {
	l.nextProgress = l.executed + l.progressEvery
	p := Progress{Now: l.now, Events: l.executed, Pending: l.live}
	if l.rt != nil {
		w := l.rt.wall.Now()
		if dt := w - l.lastProgWall; dt > 0 {
			p.EventsPerSec = float64(l.executed-l.lastProgEvts) / (float64(dt) / 1e9)
		}
		p.WallElapsed = time.Duration(w - l.rt.start)
		l.lastProgWall, l.lastProgEvts = w, l.executed
	}
	l.progress(p)
}
