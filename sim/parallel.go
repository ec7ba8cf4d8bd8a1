package sim

import (
	"container/heap"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Exchanger moves the messages partitions send each other (frames on cut
// links) between windows of a Parallel run. Parallel calls it from the
// worker goroutine that runs the partition in that window, never
// concurrently for one partition, and from the coordinator between
// windows (global events, the start and end of a run), while no worker
// runs. What global events send between windows w and w+1 belongs to
// window w: EndWindow(p, w) includes it, and Deliver(p, w) hands it over.
type Exchanger interface {
	// BeginWindow is called before partition p runs window w: what p sends
	// from now on belongs to window w.
	BeginWindow(p int, w uint64)
	// EndWindow is called after p ran window w; it returns the earliest
	// arrival time of what p sent during the window (MaxTime if nothing).
	EndWindow(p int, w uint64) Time
	// Deliver hands partition p what the other partitions sent it during
	// window w: it schedules them on p's loop. Every partition has ended
	// window w before any Deliver of it runs, and no partition sends into
	// window w's buffers again until every Deliver of window w returned.
	Deliver(p int, w uint64)
}

// MaxTime is the largest virtual time ("never").
const MaxTime = maxTime

// ParallelStats count what a Parallel run did.
type ParallelStats struct {
	Windows uint64 // synchronisation windows (one barrier each)
	Workers int    // goroutines of the last run
	// CriticalEvents sums, over windows, the most events one worker ran in
	// the window: the run's critical path in events. Events run over
	// Workers × CriticalEvents is the parallel efficiency the load balance
	// allowed (1 = perfectly even); synchronisation costs come on top.
	// A worker that finishes its share takes partitions nobody started, so
	// this depends on scheduling (results never do).
	CriticalEvents uint64
}

// Balance returns the parallel efficiency the partitions' load balance
// allows on the last run's workers: events / (workers × critical events).
func (p *Parallel) Balance(events uint64) float64 {
	if p.Stats.CriticalEvents == 0 || p.Stats.Workers == 0 {
		return 0
	}
	return float64(events) / float64(uint64(p.Stats.Workers)*p.Stats.CriticalEvents)
}

// Scheduler runs actions at given virtual times: a Loop (each action is
// one of its events), or the global events of a Parallel run (Parallel.At:
// each runs between windows, with every partition stopped). Controllers
// that act on a whole simulation (fault injectors, monitors, samplers)
// schedule through it, so that they run the same on the classic loop and
// partitioned.
type Scheduler interface {
	Now() Time
	At(t Time, f func()) Timer
	AfterFunc(d time.Duration, f func()) Timer
}

var (
	_ Scheduler = (*Loop)(nil)
	_ Scheduler = (*Parallel)(nil)
)

// Parallel runs the partitions of one simulation — one Loop each — on
// worker goroutines, synchronised conservatively (a YAWNS-style window
// protocol). Lookahead L is the least delay of anything one partition can
// do to another (the propagation delay of the cut links). From the global
// earliest pending time T, every partition runs its events with time < T+L
// on its own; nothing another partition does in that window can arrive
// before T+L. At the barrier each partition reports the earliest time it
// holds (its queue, and what it sent), the minimum becomes the next T, and
// at the start of the next window every partition takes in what was sent
// to it. Windows, and hence results, do not depend on the number of
// workers: a partition's events run in the same order whichever goroutine
// runs it.
//
// Global events (At, AfterFunc) act on several partitions at once (a
// fault plan taking a link or a switch down, a monitor reading every
// port): a global event at t runs between windows, after every event
// before t and before any event at t, with every loop's clock at t and
// no worker running. A window ends at the next global event's time, so
// windows, and hence results, still depend on the simulation only.
//
// Loops must use simulated pacing. Between Run calls (and before the
// first) the caller may touch any loop from one goroutine.
type Parallel struct {
	Loops     []*Loop
	Lookahead Time
	X         Exchanger

	Stats ParallelStats

	// OnBarrier, if set, is called between windows (after the global
	// events of that boundary), from the coordinator with every partition
	// stopped, with the time the next window starts: a place to report
	// progress. It must not change the simulation.
	OnBarrier func(next Time)

	window   uint64 // number of the next window (window 0 is "before the first run")
	global   globalQueue
	gseq     uint64
	inWindow bool // workers are running a window (At is then refused)
}

// globalEvent is one scheduled global event.
type globalEvent struct {
	at  Time
	seq uint64
	f   func()
}

// globalQueue is a min-heap of global events by (time, scheduling order).
type globalQueue []globalEvent

func (q globalQueue) Len() int { return len(q) }
func (q globalQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q globalQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *globalQueue) Push(x any)   { *q = append(*q, x.(globalEvent)) }
func (q *globalQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = globalEvent{}
	*q = old[:len(old)-1]
	return e
}

// At schedules the global event f at virtual time t (clamped to Now): it
// runs between windows, after every partition's events before t and
// before any at t, with every loop's clock at t and no worker running, so
// it may touch any partition (take links down, read every port's
// counters, schedule events on any loop, schedule further global
// events). Global events of one time run in the order they were
// scheduled. Call it between runs or from a global event, never from a
// partition's event (it panics then: the time could already have passed
// in another partition). The Timer returned is the zero Timer: global
// events cannot be stopped.
func (p *Parallel) At(t Time, f func()) Timer {
	if p.inWindow {
		panic("sim: Parallel.At called from a partition's event; global events are scheduled between windows only")
	}
	t = max(t, p.Now())
	p.gseq++
	heap.Push(&p.global, globalEvent{at: t, seq: p.gseq, f: f})
	return Timer{}
}

// AfterFunc schedules the global event f d after Now (see At).
func (p *Parallel) AfterFunc(d time.Duration, f func()) Timer {
	return p.At(p.Now()+Time(d), f)
}

// GlobalPending returns the number of global events scheduled.
func (p *Parallel) GlobalPending() int { return len(p.global) }

func (p *Parallel) nextGlobal() Time {
	if len(p.global) == 0 {
		return maxTime
	}
	return p.global[0].at
}

// runGlobals runs every global event at time g (those they schedule at g
// too), with every loop's clock set to g. Every loop has run all its
// events before g and none after.
func (p *Parallel) runGlobals(g Time) {
	for _, l := range p.Loops {
		if l.now < g {
			l.now = g
		}
	}
	for len(p.global) > 0 && p.global[0].at <= g {
		e := heap.Pop(&p.global).(globalEvent)
		e.f()
	}
}

// earliest returns the earliest time any partition holds after window w:
// its queue, and what it sent in w (or between windows since).
func (p *Parallel) earliest(w uint64) Time {
	m := maxTime
	for i, l := range p.Loops {
		if b, ok := l.NextBound(); ok {
			m = min(m, b)
		}
		if p.X != nil {
			m = min(m, p.X.EndWindow(i, w))
		}
	}
	return m
}

// between decides, with every worker stopped after window w (m: the
// earliest time the partitions hold), what comes next: it runs the
// global events due before any partition event, then returns the next
// window [start, end), or stop. cond is checked before each time's global
// events and before the next window.
func (p *Parallel) between(w uint64, m, until Time, cond func() bool) (start, end Time, stop bool) {
	for {
		g := p.nextGlobal()
		t := min(m, g)
		if t == maxTime || t > until || (cond != nil && !cond()) || interrupted.Load() {
			return 0, 0, true
		}
		if g > m {
			break
		}
		p.runGlobals(g)
		m = p.earliest(w)
	}
	end = m + p.Lookahead // run the events before end
	if end < m {
		end = maxTime // no lookahead limit
	}
	end = min(end, p.nextGlobal())
	if until != maxTime && end > until {
		end = until + 1
	}
	if p.OnBarrier != nil {
		p.OnBarrier(m)
	}
	return m, end, false
}

// NewParallel coordinates loops with lookahead l (> 0) and exchanger x
// (nil when the partitions never talk to each other).
func NewParallel(loops []*Loop, l Time, x Exchanger) (*Parallel, error) {
	if len(loops) == 0 {
		return nil, fmt.Errorf("sim: parallel run without loops")
	}
	if l <= 0 {
		return nil, fmt.Errorf("sim: parallel lookahead must be > 0, got %d", l)
	}
	for i, lp := range loops {
		if lp.rt != nil && lp.rt.enabled {
			return nil, fmt.Errorf("sim: loop %d uses real-time pacing; parallel runs are simulated only", i)
		}
	}
	return &Parallel{Loops: loops, Lookahead: l, X: x}, nil
}

// Now returns the time of the latest event run in any partition (a single
// loop's Now after the same run), or of the global event running.
func (p *Parallel) Now() Time {
	var t Time
	for _, l := range p.Loops {
		t = max(t, l.now)
	}
	return t
}

// Executed returns the events run by all partitions.
func (p *Parallel) Executed() uint64 {
	var n uint64
	for _, l := range p.Loops {
		n += l.executed
	}
	return n
}

// Pending returns the events scheduled in all partitions (messages between
// partitions not yet delivered are not counted).
func (p *Parallel) Pending() int {
	n := 0
	for _, l := range p.Loops {
		n += l.live
	}
	return n
}

// Run runs on workers goroutines until no event is left anywhere. Every
// run returns early when a partition's event calls Stop on its loop (at
// the end of that window) or when Interrupt is called (each partition
// stops after its running event; global events still queued stay so).
func (p *Parallel) Run(workers int) { p.run(workers, maxTime, nil) }

// RunUntil runs every event at or before t.
func (p *Parallel) RunUntil(workers int, t Time) { p.run(workers, t, nil) }

// RunWhile runs while cond holds. cond is checked between windows (with
// every partition stopped, so it may read any of them), not before every
// event: the run stops at the first window boundary where cond is false,
// which depends on the simulation only, not on the number of workers. It
// reports whether it stopped because cond became false.
func (p *Parallel) RunWhile(workers int, cond func() bool) bool {
	p.run(workers, maxTime, cond)
	return !cond()
}

// barrier is a reusable rendezvous of the workers that also reduces their
// earliest times; the last to arrive decides the next window.
type barrier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	min     Time
	maxEv   uint64 // most events a worker ran in this window
	gen     atomic.Uint64
	next    Time // decision of the last completed round: next window [next, end)
	end     Time
	stop    bool
	decide  func(w uint64, min Time, maxEv uint64) (next, end Time, stop bool)
}

// Spin budgets of a waiting worker (in yields): a worker that is woken
// from sleep costs tens of µs, much of a short window, so it spins first.
// The budget adapts: it grows while waits end during the spin (the
// machine has the cores) and drops back to the minimum when the worker has
// to sleep anyway (the others were held back, and spinning only takes a
// core from them).
const (
	spinMin   = 64
	spinStart = spinMin
	spinMax   = 16384
)

// arrive reports the earliest time m the worker holds and the events it
// ran in window w, waits for the others and returns the next window
// (or stop); spin is the worker's spin budget.
func (b *barrier) arrive(w uint64, m Time, events uint64, spin *int) (Time, Time, bool) {
	b.mu.Lock()
	b.min = min(b.min, m)
	b.maxEv = max(b.maxEv, events)
	b.arrived++
	if b.arrived == b.n {
		b.next, b.end, b.stop = b.decide(w, b.min, b.maxEv)
		b.arrived, b.min, b.maxEv = 0, maxTime, 0
		b.gen.Add(1)
		b.cond.Broadcast()
		b.mu.Unlock()
		return b.next, b.end, b.stop
	}
	g := b.gen.Load()
	b.mu.Unlock()
	for i := 0; i < *spin; i++ {
		if b.gen.Load() != g {
			*spin = min(*spin+*spin/4, spinMax)
			return b.next, b.end, b.stop
		}
		runtime.Gosched()
	}
	*spin = spinMin
	b.mu.Lock()
	for b.gen.Load() == g {
		b.cond.Wait()
	}
	b.mu.Unlock()
	return b.next, b.end, b.stop
}

func (p *Parallel) run(workers int, until Time, cond func() bool) {
	n := len(p.Loops)
	workers = max(1, min(workers, n))
	p.Stats.Workers = workers
	if p.window == 0 {
		p.window = 1 // window 0 stands for "before the first run"
	}
	prev := p.window - 1 // the last window run (what was sent since belongs to it)
	for _, l := range p.Loops {
		l.stopped = false
	}
	// Hand over what was sent between runs, then settle the global events
	// due before the first window.
	deliver := func(w uint64) {
		if p.X != nil {
			for i := range p.Loops {
				p.X.Deliver(i, w)
			}
		}
	}
	deliver(prev)
	if p.X != nil {
		for i := range p.Loops {
			p.X.BeginWindow(i, prev) // same buffers; resets what EndWindow reports
		}
	}
	_, end, stop := p.between(prev, p.earliest(prev), until, cond)
	deliver(prev)
	if stop {
		return
	}
	b := &barrier{n: workers, min: maxTime}
	b.cond = sync.NewCond(&b.mu)
	b.decide = func(w uint64, m Time, maxEv uint64) (Time, Time, bool) {
		p.inWindow = false
		p.Stats.Windows++
		p.Stats.CriticalEvents += maxEv
		for _, l := range p.Loops {
			if l.stopped {
				return 0, 0, true
			}
		}
		next, end, stop := p.between(w, m, until, cond)
		p.inWindow = !stop
		return next, end, stop
	}
	first := p.window
	// claimed[i] is one more than the last window partition i was claimed
	// for (window numbers start at first, so every partition is free).
	claimed := make([]atomic.Uint64, n)
	for i := range claimed {
		claimed[i].Store(first)
	}
	p.inWindow = true
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p.worker(w, workers, first, end, b, claimed)
		}(w)
	}
	last := p.worker(0, workers, first, end, b, claimed)
	wg.Wait()
	p.inWindow = false
	p.window = last + 1
	// Hand over what the last window (and the global events after it)
	// sent, so that every frame is in some loop (or pool) when Run returns.
	deliver(last)
}

// worker runs window after window, starting with window number first
// (which ends at end), and returns the last window's number. Worker w of W first
// runs its own share of the partitions ([w·n/W, (w+1)·n/W), so a
// partition tends to stay on one core), then takes any partition nobody
// claimed yet: a worker the operating system holds back delays the window
// by at most the partition it is running. Which worker runs a partition
// never changes what the partition does.
func (p *Parallel) worker(w, workers int, first uint64, end Time, b *barrier, claimed []atomic.Uint64) uint64 {
	n := len(p.Loops)
	lo := w * n / workers
	spin := spinStart
	for win := first; ; win++ {
		m := maxTime
		var events uint64
		for j := 0; j < n; j++ {
			i := (lo + j) % n
			c := &claimed[i]
			if old := c.Load(); old > win || !c.CompareAndSwap(old, win+1) {
				continue // another worker runs it in this window
			}
			l := p.Loops[i]
			events -= l.executed
			if p.X != nil {
				if win > first {
					p.X.Deliver(i, win-1)
				}
				p.X.BeginWindow(i, win)
			}
			l.RunBefore(end)
			events += l.executed
			if bd, ok := l.NextBound(); ok {
				m = min(m, bd)
			}
			if p.X != nil {
				m = min(m, p.X.EndWindow(i, win))
			}
		}
		var stop bool
		if _, end, stop = b.arrive(win, m, events, &spin); stop {
			return win
		}
	}
}
