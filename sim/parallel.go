package sim

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Exchanger moves the messages partitions send each other (frames on cut
// links) between windows of a Parallel run. Parallel calls it from the
// worker goroutine that runs the partition in that window, never
// concurrently for one partition.
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
// Loops must use simulated pacing. Between Run calls (and before the
// first) the caller may touch any loop from one goroutine.
type Parallel struct {
	Loops     []*Loop
	Lookahead Time
	X         Exchanger

	Stats ParallelStats

	window uint64 // number of the next window
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
// loop's Now after the same run).
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

// Run runs on workers goroutines until no event is left anywhere.
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
	next    Time // decision of the last completed round
	stop    bool
	decide  func(min Time, maxEv uint64) (next Time, stop bool)
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
// ran, waits for the others and returns the next window's start (or stop);
// spin is the worker's spin budget.
func (b *barrier) arrive(m Time, events uint64, spin *int) (Time, bool) {
	b.mu.Lock()
	b.min = min(b.min, m)
	b.maxEv = max(b.maxEv, events)
	b.arrived++
	if b.arrived == b.n {
		b.next, b.stop = b.decide(b.min, b.maxEv)
		b.arrived, b.min, b.maxEv = 0, maxTime, 0
		b.gen.Add(1)
		b.cond.Broadcast()
		b.mu.Unlock()
		return b.next, b.stop
	}
	g := b.gen.Load()
	b.mu.Unlock()
	for i := 0; i < *spin; i++ {
		if b.gen.Load() != g {
			*spin = min(*spin+*spin/4, spinMax)
			return b.next, b.stop
		}
		runtime.Gosched()
	}
	*spin = spinMin
	b.mu.Lock()
	for b.gen.Load() == g {
		b.cond.Wait()
	}
	b.mu.Unlock()
	return b.next, b.stop
}

func (p *Parallel) run(workers int, until Time, cond func() bool) {
	n := len(p.Loops)
	workers = max(1, min(workers, n))
	p.Stats.Workers = workers
	start := maxTime
	for _, l := range p.Loops {
		l.stopped = false
		if b, ok := l.NextBound(); ok {
			start = min(start, b)
		}
	}
	if start == maxTime || start > until || (cond != nil && !cond()) {
		return
	}
	b := &barrier{n: workers, min: maxTime}
	b.cond = sync.NewCond(&b.mu)
	b.decide = func(m Time, maxEv uint64) (Time, bool) {
		p.Stats.Windows++
		p.Stats.CriticalEvents += maxEv
		for _, l := range p.Loops {
			if l.stopped {
				return 0, true
			}
		}
		if m == maxTime || m > until || (cond != nil && !cond()) {
			return 0, true
		}
		return m, false
	}
	first := p.window
	// claimed[i] is one more than the last window partition i was claimed
	// for (window numbers start at first, so every partition is free).
	claimed := make([]atomic.Uint64, n)
	for i := range claimed {
		claimed[i].Store(first)
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p.worker(w, workers, first, start, until, b, claimed)
		}(w)
	}
	last := p.worker(0, workers, first, start, until, b, claimed)
	wg.Wait()
	p.window = last + 1
	// Hand over what the last window sent, so that every frame is in some
	// loop (or pool) when Run returns.
	if p.X != nil {
		for i := range p.Loops {
			p.X.Deliver(i, last)
		}
	}
}

// worker runs window after window, starting with window number first at
// time t, and returns the last window's number. Worker w of W first runs
// its own share of the partitions ([w·n/W, (w+1)·n/W), so a partition
// tends to stay on one core), then takes any partition nobody claimed yet:
// a worker the operating system holds back delays the window by at most
// the partition it is running. Which worker runs a partition never changes
// what the partition does.
func (p *Parallel) worker(w, workers int, first uint64, t, until Time, b *barrier, claimed []atomic.Uint64) uint64 {
	n := len(p.Loops)
	lo := w * n / workers
	spin := spinStart
	for win := first; ; win++ {
		end := t + p.Lookahead // run the events before end
		if end < t {
			end = maxTime // no lookahead limit
		}
		if until != maxTime && end > until {
			end = until + 1
		}
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
		if t, stop = b.arrive(m, events, &spin); stop {
			return win
		}
	}
}
