package sim

import (
	"fmt"
	"reflect"
	"testing"
)

// ringModel is a toy partitioned simulation: node i lives in partition
// i%parts; every event logs itself, schedules local work and now and then
// sends a message (delay ≥ lookahead) to the next node, which receives it
// as a ranked event (rank = sending node), as links do.
type ringModel struct {
	nodes []*ringNode
	loops []*Loop
	parts int
	// mailboxes[parity][src][dst]
	box     [2][][][]ringMsg
	parity  []int
	minSent []Time
}

type ringMsg struct {
	to  int
	at  Time
	arg uint64
}

type ringNode struct {
	m    *ringModel
	id   int
	loop *Loop
	rng  FastRand
	log  []string
	last Time // of the last message sent: a rank's events must not tie
}

const (
	ringL   = 1000
	msgFlag = 1 << 15
)

func newRing(nodes, parts int) *ringModel {
	m := &ringModel{parts: parts, parity: make([]int, parts), minSent: make([]Time, parts)}
	for p := 0; p < parts; p++ {
		m.loops = append(m.loops, NewLoop(Options{Seed: 7}))
	}
	for b := range m.box {
		m.box[b] = make([][][]ringMsg, parts)
		for s := range m.box[b] {
			m.box[b][s] = make([][]ringMsg, parts)
		}
	}
	for i := 0; i < nodes; i++ {
		n := &ringNode{m: m, id: i, loop: m.loops[i%parts], rng: NewFastRand(7, fmt.Sprint("node", i))}
		m.nodes = append(m.nodes, n)
		n.loop.Schedule(0, n, 0) // one time grid for all: ties everywhere
	}
	return m
}

func (n *ringNode) OnEvent(arg uint64) {
	now := n.loop.Now()
	n.log = append(n.log, fmt.Sprintf("%d:%d", now, arg))
	if arg&msgFlag != 0 {
		// A message changes what the node does next, so arrival order
		// shows up in the logs.
		n.rng = NewFastRand(n.rng.Uint64()^arg, "mix")
		return
	}
	if arg >= 150 {
		return
	}
	// Local work on a coarse grid, so that ties with arrivals are common.
	n.loop.Schedule(now+Time(n.rng.Uint64()%4)*250, n, arg+1)
	if n.rng.Uint64()%2 == 0 {
		to := (n.id + 1) % len(n.m.nodes)
		at := max(now+ringL+Time(n.rng.Uint64()%3)*250, n.last+250)
		n.last = at
		n.m.send(n, to, at, arg|msgFlag)
	}
}

func (m *ringModel) send(from *ringNode, to int, at Time, arg uint64) {
	dst := m.nodes[to]
	if m.parts == 1 {
		dst.loop.ScheduleRanked(at, dst, arg, uint32(from.id))
		return
	}
	s, d := from.id%m.parts, to%m.parts
	if s == d {
		dst.loop.ScheduleRanked(at, dst, arg, uint32(from.id))
		return
	}
	b := &m.box[m.parity[s]][s][d]
	*b = append(*b, ringMsg{to: to, at: at, arg: arg<<16 | uint64(from.id)})
	m.minSent[s] = min(m.minSent[s], at)
}

func (m *ringModel) BeginWindow(p int, w uint64)    { m.parity[p], m.minSent[p] = int(w&1), MaxTime }
func (m *ringModel) EndWindow(p int, w uint64) Time { return m.minSent[p] }
func (m *ringModel) Deliver(p int, w uint64) {
	for s := 0; s < m.parts; s++ {
		b := &m.box[w&1][s][p]
		for _, x := range *b {
			dst := m.nodes[x.to]
			dst.loop.ScheduleRanked(x.at, dst, x.arg>>16, uint32(x.arg&0xffff))
		}
		*b = (*b)[:0]
	}
}

func (m *ringModel) logs() [][]string {
	var out [][]string
	for _, n := range m.nodes {
		out = append(out, n.log)
	}
	return out
}

func TestParallelMatchesSingleLoop(t *testing.T) {
	ref := newRing(12, 1)
	ref.loops[0].Run()
	want := ref.logs()
	events := ref.loops[0].Executed()
	for _, parts := range []int{2, 3, 4} {
		for _, workers := range []int{1, 2, 4} {
			m := newRing(12, parts)
			p, err := NewParallel(m.loops, ringL, m)
			if err != nil {
				t.Fatal(err)
			}
			p.Run(workers)
			if got := m.logs(); !reflect.DeepEqual(got, want) {
				for i := range got {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("parts %d workers %d: node %d log differs:\n got %v\nwant %v", parts, workers, i, got[i], want[i])
					}
				}
			}
			if p.Executed() != events || p.Now() != ref.loops[0].Now() {
				t.Fatalf("parts %d workers %d: %d events to %d, want %d to %d", parts, workers, p.Executed(), p.Now(), events, ref.loops[0].Now())
			}
			if p.Stats.Windows == 0 {
				t.Fatalf("no windows")
			}
			if b := p.Balance(p.Executed()); (workers == 1 && b != 1) || b <= 0.2 || b > 1 {
				t.Fatalf("parts %d workers %d: balance %v", parts, workers, b)
			}
		}
	}
}

// TestParallelRunUntilResumes checks that a run cut into RunUntil pieces
// equals one run, and that RunWhile stops at a window boundary.
func TestParallelRunUntilResumes(t *testing.T) {
	ref := newRing(8, 1)
	ref.loops[0].Run()
	m := newRing(8, 2)
	p, err := NewParallel(m.loops, ringL, m)
	if err != nil {
		t.Fatal(err)
	}
	for u := Time(0); u < 60000; u += 3333 {
		p.RunUntil(2, u)
		if p.Now() > u {
			t.Fatalf("RunUntil(%d) ran to %d", u, p.Now())
		}
	}
	p.Run(2)
	if !reflect.DeepEqual(m.logs(), ref.logs()) {
		t.Fatal("a run in pieces differs from one run")
	}
	m2 := newRing(8, 2)
	p2, _ := NewParallel(m2.loops, ringL, m2)
	if !p2.RunWhile(2, func() bool { return len(m2.nodes[3].log) < 5 }) {
		t.Fatal("RunWhile did not stop on its condition")
	}
	if n := len(m2.nodes[3].log); n < 5 || p2.Pending() == 0 {
		t.Fatalf("stopped with %d entries and %d pending", n, p2.Pending())
	}
}

func TestParallelRejects(t *testing.T) {
	if _, err := NewParallel([]*Loop{NewLoop(Options{})}, 0, nil); err == nil {
		t.Fatal("zero lookahead accepted")
	}
	if _, err := NewParallel(nil, 1, nil); err == nil {
		t.Fatal("no loops accepted")
	}
}

func TestScheduleRankedOrder(t *testing.T) {
	l := NewLoop(Options{})
	var got []uint64
	h := HandlerFunc(func(a uint64) { got = append(got, a) })
	l.Schedule(10, h, 100)
	l.ScheduleRanked(10, h, 3, 3)
	l.Schedule(10, h, 101)
	l.ScheduleRanked(10, h, 1, 1)
	l.ScheduleRanked(5, h, 7, 7)
	l.At(5, func() {
		// At time 5 the bucket of time 5 is being consumed; a ranked push
		// at the current time sorts before the ordinary events left there.
		l.Schedule(5, h, 102)
		l.ScheduleRanked(5, h, 2, 2)
	})
	l.Run()
	want := []uint64{7, 2, 102, 1, 3, 100, 101}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

type HandlerFunc func(uint64)

func (f HandlerFunc) OnEvent(a uint64) { f(a) }

// globalRing adds global events to a ring: each one checks that it runs
// after every event before its time and before any at its time, records
// what every node has done, perturbs nodes in every partition (their
// random streams, new local events, messages between partitions) and
// schedules the next global event, some on the ring's time grid (ties
// with node events), some off it.
func globalRing(nodes, parts int) (*ringModel, *Parallel, *[]string) {
	m := newRing(nodes, parts)
	p, err := NewParallel(m.loops, ringL, m)
	if err != nil {
		panic(err)
	}
	var trace []string
	rng := NewFastRand(11, "global")
	var tick func()
	tick = func() {
		now := p.Now()
		snap := fmt.Sprint("g@", now, ":")
		for _, n := range m.nodes {
			if n.loop.Now() != now {
				panic(fmt.Sprintf("global event at %d: node %d's clock at %d", now, n.id, n.loop.Now()))
			}
			if k := len(n.log); k > 0 {
				var at Time
				fmt.Sscanf(n.log[k-1], "%d:", &at)
				if at >= now {
					panic(fmt.Sprintf("global event at %d after node %d's event at %d", now, n.id, at))
				}
			}
			snap += fmt.Sprint(" ", len(n.log))
		}
		trace = append(trace, snap)
		if now > 40000 {
			return
		}
		for _, n := range m.nodes {
			if rng.Uint64()%3 == 0 {
				n.rng = NewFastRand(n.rng.Uint64()^uint64(now), "global")
				n.loop.Schedule(now+Time(rng.Uint64()%3)*250, n, 140)
			}
		}
		if from := m.nodes[rng.Uint64()%uint64(nodes)]; now+ringL > from.last {
			from.last = now + ringL
			m.send(from, (from.id+1)%nodes, now+ringL, 200|msgFlag)
		}
		d := Time(rng.Uint64()%7) * 250
		if rng.Uint64()%2 == 0 {
			d += 123
		}
		p.At(now+d, tick)
		if rng.Uint64()%4 == 0 {
			p.At(now+d, func() { trace = append(trace, fmt.Sprint("second@", p.Now())) })
		}
	}
	p.At(0, tick)
	return m, p, &trace
}

// TestParallelGlobalEvents checks that global events give the same
// results for every number of partitions and workers, and that windows
// end at them.
func TestParallelGlobalEvents(t *testing.T) {
	ref, rp, rtrace := globalRing(12, 1)
	rp.Run(1)
	if len(*rtrace) < 20 {
		t.Fatalf("only %d global events ran", len(*rtrace))
	}
	for _, parts := range []int{2, 3, 4} {
		for _, workers := range []int{1, 2, 4} {
			m, p, trace := globalRing(12, parts)
			p.Run(workers)
			if !reflect.DeepEqual(*trace, *rtrace) {
				t.Fatalf("parts %d workers %d: global events saw\n%v\nwant\n%v", parts, workers, *trace, *rtrace)
			}
			if !reflect.DeepEqual(m.logs(), ref.logs()) {
				t.Fatalf("parts %d workers %d: node logs differ", parts, workers)
			}
			if p.Executed() != rp.Executed() || p.Now() != rp.Now() || p.Stats.Windows != rp.Stats.Windows {
				t.Fatalf("parts %d workers %d: %d events to %d in %d windows, want %d to %d in %d", parts, workers,
					p.Executed(), p.Now(), p.Stats.Windows, rp.Executed(), rp.Now(), rp.Stats.Windows)
			}
		}
	}
	// Without the global events the ring runs differently (they matter).
	plain := newRing(12, 1)
	plain.loops[0].Run()
	if reflect.DeepEqual(plain.logs(), ref.logs()) {
		t.Fatal("global events changed nothing")
	}
}

// TestParallelGlobalRunUntil cuts a run with global events into RunUntil
// pieces and checks At's refusal inside a window.
func TestParallelGlobalRunUntil(t *testing.T) {
	ref, rp, rtrace := globalRing(8, 1)
	rp.Run(1)
	m, p, trace := globalRing(8, 2)
	for u := Time(0); u < 60000; u += 2777 {
		p.RunUntil(2, u)
		if p.Now() > u {
			t.Fatalf("RunUntil(%d) ran to %d", u, p.Now())
		}
	}
	p.Run(2)
	if !reflect.DeepEqual(*trace, *rtrace) || !reflect.DeepEqual(m.logs(), ref.logs()) {
		t.Fatal("a run in pieces differs from one run")
	}
	// At from inside a window panics.
	m3 := newRing(4, 2)
	p3, _ := NewParallel(m3.loops, ringL, m3)
	var got any
	m3.loops[1].At(500, func() {
		defer func() { got = recover() }()
		p3.At(2000, func() {})
	})
	p3.Run(1)
	if got == nil {
		t.Fatal("At inside a window did not panic")
	}
}

// TestParallelOnBarrier checks the barrier hook sees every window start.
func TestParallelOnBarrier(t *testing.T) {
	m := newRing(8, 2)
	p, _ := NewParallel(m.loops, ringL, m)
	var calls uint64
	var last Time
	p.OnBarrier = func(next Time) {
		if next < last {
			t.Errorf("window start %d after %d", next, last)
		}
		last = next
		calls++
	}
	p.Run(2)
	if calls != p.Stats.Windows {
		t.Fatalf("%d barrier calls for %d windows", calls, p.Stats.Windows)
	}
}
