package sim

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

type rec struct {
	l   *Loop
	out *[]uint64
}

func (r rec) OnEvent(arg uint64) { *r.out = append(*r.out, arg) }

func TestEqualTimesRunInSchedulingOrder(t *testing.T) {
	l := NewLoop(Options{})
	var got []uint64
	h := rec{l, &got}
	// Interleave many equal times with others; ties must come out in
	// scheduling order whatever the internal bucket moves do.
	r := rand.New(rand.NewPCG(1, 2))
	type ev struct {
		at  Time
		seq uint64
	}
	var want []ev
	for i := 0; i < 5000; i++ {
		at := Time(r.IntN(50)) * 1000
		l.Schedule(at, h, uint64(i))
		want = append(want, ev{at, uint64(i)})
	}
	l.Run()
	sort.SliceStable(want, func(a, b int) bool { return want[a].at < want[b].at })
	if len(got) != len(want) {
		t.Fatalf("ran %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i].seq {
			t.Fatalf("event %d: got %d want %d", i, got[i], want[i].seq)
		}
	}
}

func TestTiesAcrossRescheduling(t *testing.T) {
	// Events scheduled from inside events at the current time run after
	// those already scheduled for that time.
	l := NewLoop(Options{})
	var order []string
	l.At(10, func() {
		order = append(order, "a")
		l.At(10, func() { order = append(order, "c") })
	})
	l.At(10, func() { order = append(order, "b") })
	l.At(5, func() { l.At(10, func() { order = append(order, "b2") }) })
	l.Run()
	want := []string{"a", "b", "b2", "c"}
	for i := range want {
		if i >= len(order) || order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestTimerStopAndPending(t *testing.T) {
	l := NewLoop(Options{})
	fired := 0
	tm := l.AfterFunc(time.Microsecond, func() { fired++ })
	if !tm.Pending() || tm.When() != 1000 {
		t.Fatalf("timer not pending at 1µs")
	}
	if !tm.Stop() || tm.Stop() {
		t.Fatal("first Stop must succeed, second must fail")
	}
	tm2 := l.AfterFunc(2*time.Microsecond, func() { fired += 10 })
	l.Run()
	if fired != 10 || tm2.Pending() || tm2.Stop() {
		t.Fatalf("fired=%d pending=%v", fired, tm2.Pending())
	}
	if l.Now() != 2000 || l.Pending() != 0 {
		t.Fatalf("now=%v pending=%d", l.Now(), l.Pending())
	}
	// A stale handle must not stop a new event reusing its slot.
	tm3 := l.AfterFunc(1, func() { fired += 100 })
	if tm.Stop() {
		t.Fatal("stale handle stopped a reused slot")
	}
	l.Run()
	if fired != 110 || !(!tm3.Pending()) {
		t.Fatalf("fired=%d", fired)
	}
}

func TestRunUntilAndRunWhile(t *testing.T) {
	l := NewLoop(Options{})
	n := 0
	var tick func()
	tick = func() { n++; l.AfterFunc(time.Microsecond, tick) }
	l.At(0, tick)
	l.RunUntil(10 * Microsecond)
	if n != 11 || l.Now() != 10*Microsecond {
		t.Fatalf("n=%d now=%v", n, l.Now())
	}
	l.RunFor(5 * time.Microsecond)
	if n != 16 || l.Now() != 15*Microsecond {
		t.Fatalf("n=%d now=%v", n, l.Now())
	}
	if !l.RunWhile(func() bool { return n < 40 }) || n != 40 {
		t.Fatalf("RunWhile: n=%d", n)
	}
	// Idle: a loop with no events returns at once.
	l2 := NewLoop(Options{})
	l2.Run()
	if l2.Now() != 0 {
		t.Fatal("idle loop advanced")
	}
	// Past times are clamped to now.
	l2.RunUntil(100)
	ran := Time(-1)
	l2.At(50, func() { ran = l2.Now() })
	l2.Run()
	if ran != 100 {
		t.Fatalf("past event ran at %v", ran)
	}
}

func TestProgressCallback(t *testing.T) {
	fw := &fakeWall{}
	l := NewLoop(Options{Wall: fw})
	var ps []Progress
	l.OnProgress(100, func(p Progress) { ps = append(ps, p) })
	for i := 0; i < 1000; i++ {
		l.At(Time(i), func() { fw.now += 1000 }) // 1 µs of wall per event
	}
	l.Run()
	if len(ps) != 10 {
		t.Fatalf("%d progress reports, want 10", len(ps))
	}
	last := ps[len(ps)-1]
	if last.Events != 1000 || last.Now != 999 {
		t.Fatalf("last progress %+v", last)
	}
	if last.EventsPerSec < 0.99e6 || last.EventsPerSec > 1.01e6 {
		t.Fatalf("events/s %v, want 1e6", last.EventsPerSec)
	}
}

type fakeWall struct{ now int64 }

func (f *fakeWall) Now() int64                            { return f.now }
func (f *fakeWall) SleepUntil(d int64, _ <-chan struct{}) { f.now = d }

func TestStreamsIndependent(t *testing.T) {
	a := NewStream(7, "link/t0-1:p3")
	b := NewStream(7, "link/t0-1:p3")
	c := NewStream(7, "link/t0-1:p4")
	d := NewStream(8, "link/t0-1:p3")
	same, diffName, diffSeed := true, 0, 0
	for i := 0; i < 64; i++ {
		x, y, z, w := a.Uint64(), b.Uint64(), c.Uint64(), d.Uint64()
		if x != y {
			same = false
		}
		if x == z {
			diffName++
		}
		if x == w {
			diffSeed++
		}
	}
	if !same || diffName > 0 || diffSeed > 0 {
		t.Fatalf("same=%v collisions name=%d seed=%d", same, diffName, diffSeed)
	}
}

func TestNetstackClock(t *testing.T) {
	l := NewLoop(Options{})
	c := NetstackClock{L: l}
	fired := Time(-1)
	tm := c.AfterFunc(3*time.Microsecond, func() { fired = l.Now() })
	tm.Reset(5 * time.Microsecond)
	l.Run()
	if fired != 5000 {
		t.Fatalf("fired at %v", fired)
	}
	if got := c.NowMonotonic().Sub(c.NowMonotonic().Add(-5 * time.Microsecond)); got != 5*time.Microsecond {
		t.Fatal(got)
	}
	if c.Now().Sub(Epoch) != 5*time.Microsecond {
		t.Fatal(c.Now())
	}
	stopped := c.AfterFunc(time.Microsecond, func() { t.Fatal("stopped timer fired") })
	if !stopped.Stop() {
		t.Fatal("stop failed")
	}
	l.Run()
}
