package labhost

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

// errStopping is what work gets once the host is closing.
var errStopping = errors.New("host: stopping")

// drive owns the loop: it runs events (and what the tunnels inject) until
// a work item comes or the host stops, then runs the item on this
// goroutine, outside any event, so the item may run the loop itself.
func (h *Host) drive() {
	defer close(h.done)
	for {
		h.loop.RunWhile(func() bool { return !h.stopping.Load() && len(h.work) == 0 })
		if h.stopping.Load() {
			return
		}
		select {
		case w := <-h.work:
			w()
		default:
			// The loop was halted (sim.Interrupt) with nothing to do:
			// do not spin while Close comes.
			time.Sleep(time.Millisecond)
		}
	}
}

// submit queues w for the driver and wakes the loop.
func (h *Host) submit(w func()) error {
	if h.stopping.Load() {
		return errStopping
	}
	select {
	case h.work <- w:
	default:
		return errors.New("host: too many requests queued (64)")
	}
	h.loop.Inject(func() {})
	return nil
}

// onLoop runs f on the loop goroutine (an injected event) and waits for
// it, at most timeout.
func (h *Host) onLoop(f func(), timeout time.Duration) error {
	if h.stopping.Load() {
		return errStopping
	}
	done := make(chan struct{})
	h.loop.Inject(func() { f(); close(done) })
	select {
	case <-done:
		return nil
	case <-h.done:
		return errStopping
	case <-time.After(timeout):
		return errors.New("host: the loop did not answer in time")
	}
}

// waitRunning runs f on a goroutine of its own and the loop on this one
// (the driver's, outside any event) until f returns or the host stops:
// a wait for the network (a peer's API) must not stop this host's loop,
// which carries the peers' traffic meanwhile.
func (h *Host) waitRunning(f func() error) error {
	var (
		mu   sync.Mutex
		done bool
		err  error
	)
	go func() {
		e := f()
		mu.Lock()
		done, err = true, e
		mu.Unlock()
		h.loop.Inject(func() {})
	}()
	finished := func() bool { mu.Lock(); defer mu.Unlock(); return done }
	h.loop.RunWhile(func() bool { return !h.stopping.Load() && !finished() })
	for !finished() {
		if h.stopping.Load() {
			return errStopping
		}
		time.Sleep(time.Millisecond) // halted loop (sim.Interrupt)
		h.loop.RunWhile(func() bool { return !h.stopping.Load() && !finished() })
	}
	mu.Lock()
	defer mu.Unlock()
	return err
}

// lagRing keeps the last events' lags for percentiles (the observer runs
// on the loop goroutine; readers take the lock).
type lagRing struct {
	mu   sync.Mutex
	v    []int64
	next int
	full bool
	n    int64
	max  int64
}

func (r *lagRing) init(n int) { r.v = make([]int64, n) }

func (r *lagRing) add(d time.Duration) {
	r.mu.Lock()
	r.v[r.next] = int64(d)
	r.next++
	if r.next == len(r.v) {
		r.next, r.full = 0, true
	}
	r.n++
	r.max = max(r.max, int64(d))
	r.mu.Unlock()
}

// stats returns the lag summary: percentiles over the last events, the
// maximum over all; early is the loop's count of events run early.
func (r *lagRing) stats(early int64) labapi.Lag {
	r.mu.Lock()
	n := r.next
	if r.full {
		n = len(r.v)
	}
	s := slices.Clone(r.v[:n])
	l := labapi.Lag{Events: r.n, MaxNs: r.max, Early: early}
	r.mu.Unlock()
	if len(s) > 0 {
		slices.Sort(s)
		l.P50Ns = s[len(s)/2]
		l.P99Ns = s[min(len(s)-1, len(s)*99/100)]
	}
	return l
}
