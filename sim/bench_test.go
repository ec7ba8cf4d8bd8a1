package sim

import (
	"math/rand/v2"
	"testing"
)

func benchHold(b *testing.B, pending int) {
	h := NewHoldModel(1, pending)
	b.ReportAllocs()
	b.ResetTimer()
	h.Steps(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func BenchmarkLoopHold1k(b *testing.B)   { benchHold(b, 1000) }
func BenchmarkLoopHold100k(b *testing.B) { benchHold(b, 100000) }

// TestLoopZeroAllocsSteadyState pins the benchmark's allocation claim.
func TestLoopZeroAllocsSteadyState(t *testing.T) {
	h := NewHoldModel(1, 1000)
	if a := testing.AllocsPerRun(10000, func() { h.L.Step() }); a != 0 {
		t.Fatalf("%v allocations per event", a)
	}
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

// runHold is the hold model driven through RunUntil instead of Step, so
// that what a run loop checks per event (Stop, Interrupt) is measured: it
// stops the loop after n events.
type runHold struct {
	*HoldModel
	left int
}

func (r *runHold) OnEvent(arg uint64) {
	r.i++
	r.L.Post(r.L.now+r.delays[r.i&(len(r.delays)-1)], r, arg)
	if r.left--; r.left == 0 {
		r.L.Stop()
	}
}

func benchRunHold(b *testing.B, pending int) {
	h := NewHoldModel(1, 0)
	r := &runHold{HoldModel: h}
	rng := NewStream(1, "hold")
	for i := range pending {
		h.L.Schedule(Time(rng.IntN(100000)), r, uint64(i))
	}
	r.left = 4 * pending
	h.L.Run() // warm up to the steady state
	b.ReportAllocs()
	b.ResetTimer()
	r.left = b.N
	h.L.Run()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

func BenchmarkLoopRunHold1k(b *testing.B)   { benchRunHold(b, 1000) }
func BenchmarkLoopRunHold100k(b *testing.B) { benchRunHold(b, 100000) }

// BenchmarkParallelOneLoopHold1k is the hold model run in windows by a
// one-loop Parallel (lookahead 1 µs, about 50 events a window), as the
// classic loop of a cluster built for --parallel 0 runs: the window
// protocol's cost next to BenchmarkLoopRunHold1k's.
func BenchmarkParallelOneLoopHold1k(b *testing.B) {
	h := NewHoldModel(1, 0)
	r := &runHold{HoldModel: h}
	rng := NewStream(1, "hold")
	for i := range 1000 {
		h.L.Schedule(Time(rng.IntN(100000)), r, uint64(i))
	}
	r.left = 4000
	h.L.Run()
	p, err := NewParallel([]*Loop{h.L}, 1000, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	r.left = b.N
	p.Run(1)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
	b.ReportMetric(float64(b.N)/float64(p.Stats.Windows), "events/window")
}
