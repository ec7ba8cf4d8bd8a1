package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// holdHandler is the classic "hold" model: every event schedules one new
// event a random delay later, so the pending count stays constant.
type holdHandler struct {
	l   *Loop
	rng *rand.Rand
	// delays are drawn from a table so the benchmark measures the queue,
	// not the random generator.
	delays []Time
	i      int
}

func (h *holdHandler) OnEvent(arg uint64) {
	h.i++
	h.l.Schedule(h.l.now+h.delays[h.i&(len(h.delays)-1)], h, arg)
}

func benchHold(b *testing.B, pending int) {
	l := NewLoop(Options{})
	h := &holdHandler{l: l, rng: rand.New(rand.NewPCG(1, 1))}
	// Delays spread over ~1..100 µs like packet serialisation, propagation
	// and transport timers.
	for range 1 << 16 {
		h.delays = append(h.delays, Time(1+h.rng.ExpFloat64()*20000))
	}
	for i := range pending {
		l.Schedule(Time(h.rng.IntN(100000)), h, uint64(i))
	}
	for range 4 * pending { // warm up: reach the steady-state distribution
		l.Step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.Step()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func BenchmarkLoopHold1k(b *testing.B)   { benchHold(b, 1000) }
func BenchmarkLoopHold100k(b *testing.B) { benchHold(b, 100000) }

// TestLoopZeroAllocsSteadyState pins the benchmark's allocation claim.
func TestLoopZeroAllocsSteadyState(t *testing.T) {
	l := NewLoop(Options{})
	h := &holdHandler{l: l, rng: rand.New(rand.NewPCG(1, 1))}
	for range 1024 {
		h.delays = append(h.delays, Time(1+h.rng.IntN(50000)))
	}
	for i := range 1000 {
		l.Schedule(Time(i), h, 0)
	}
	for range 100000 {
		l.Step()
	}
	if a := testing.AllocsPerRun(10000, func() { l.Step() }); a != 0 {
		t.Fatalf("%v allocations per event", a)
	}
	_ = time.Now
}

// --- reference: a plain 4-ary heap, to show the radix queue beats it ---

type heap4 struct{ a []qentry }

func less(x, y qentry) bool { return x.at < y.at || (x.at == y.at && x.key < y.key) }

func (h *heap4) push(e qentry) {
	h.a = append(h.a, e)
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !less(h.a[i], h.a[p]) {
			break
		}
		h.a[i], h.a[p] = h.a[p], h.a[i]
		i = p
	}
}

func (h *heap4) pop() qentry {
	top := h.a[0]
	n := len(h.a) - 1
	h.a[0] = h.a[n]
	h.a = h.a[:n]
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if less(h.a[j], h.a[m]) {
				m = j
			}
		}
		if !less(h.a[m], h.a[i]) {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}

func benchHeap4(b *testing.B, pending int) {
	rng := rand.New(rand.NewPCG(1, 1))
	var delays []uint64
	for range 1 << 16 {
		delays = append(delays, uint64(1+rng.ExpFloat64()*20000))
	}
	h := &heap4{}
	var seq uint64
	for range pending {
		seq++
		h.push(qentry{at: uint64(rng.IntN(100000)), key: seq})
	}
	b.ResetTimer()
	for i := range b.N {
		e := h.pop()
		seq++
		h.push(qentry{at: e.at + delays[i&(1<<16-1)], key: seq})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func BenchmarkHeap4Hold1k(b *testing.B)   { benchHeap4(b, 1000) }
func BenchmarkHeap4Hold100k(b *testing.B) { benchHeap4(b, 100000) }
