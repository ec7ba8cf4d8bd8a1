package sim

import (
	"fmt"
	"testing"
)

// stageRec records Prefetch calls and firings, in order.
type stageRec struct {
	l   *Loop
	log []string
}

func (r *stageRec) Prefetch(stage int, arg uint64) {
	r.log = append(r.log, fmt.Sprintf("p%d:%d", stage, arg))
}
func (r *stageRec) OnEvent(arg uint64) { r.log = append(r.log, fmt.Sprintf("f:%d", arg)) }

// TestPrefetchStagesInOrder: every event of a run of equal-time events far
// enough from its start gets each stage once, farthest first, before it
// fires; the distance of each stage is as configured; SetPrefetch(false)
// makes no calls.
func TestPrefetchStagesInOrder(t *testing.T) {
	const n = 40
	r := &stageRec{}
	l := NewLoop(Options{})
	for i := range n {
		l.Post(5, r, uint64(i))
	}
	l.Run()
	pos := map[string]int{}
	for i, s := range r.log {
		if _, dup := pos[s]; dup {
			t.Fatalf("%s twice", s)
		}
		pos[s] = i
	}
	maxDist := prefetchDist[0]
	for ev := maxDist; ev < n; ev++ {
		fired := pos[fmt.Sprintf("f:%d", ev)]
		prev := -1
		for st := range PrefetchStages {
			k := fmt.Sprintf("p%d:%d", st, ev)
			at, ok := pos[k]
			if !ok || at > fired || at < prev {
				t.Fatalf("event %d: stage %d at %d (ok %v), fired at %d, previous stage at %d", ev, st, at, ok, fired, prev)
			}
			prev = at
			// Stage st for ev runs when the event prefetchDist[st] places
			// earlier is about to fire (before its handler).
			if want := pos[fmt.Sprintf("f:%d", ev-prefetchDist[st])]; at > want {
				t.Fatalf("event %d stage %d at %d, after event %d fired (%d)", ev, st, at, ev-prefetchDist[st], want)
			}
		}
	}
	if got := l.Prefetched(); got < uint64(PrefetchStages*(n-maxDist)) {
		t.Fatalf("%d Prefetch calls", got)
	}
	r2 := &stageRec{}
	l2 := NewLoop(Options{})
	l2.SetPrefetch(false)
	for i := range n {
		l2.Post(5, r2, uint64(i))
	}
	l2.Run()
	if len(r2.log) != n || l2.Prefetched() != 0 {
		t.Fatalf("prefetch off: %d log entries, %d calls", len(r2.log), l2.Prefetched())
	}
}
