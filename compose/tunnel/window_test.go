package tunnel

import "testing"

func TestWindowSteps(t *testing.T) {
	type step struct {
		session, seq uint64
		want         Reason // of Check
		commit       bool
		highest      uint64 // after the step
	}
	steps := []step{
		{10, 0, Stale, false, 0},    // seq 0 is never a frame
		{10, 5, 0, true, 5},         // first frame: any session, any seq
		{10, 5, Replay, true, 5},    // seen; committing it again changes nothing
		{10, 3, 0, true, 5},         // below the highest, in the window, not seen
		{10, 3, Replay, false, 5},   //
		{10, 4, 0, false, 5},        // Check alone does not commit...
		{10, 4, 0, true, 5},         // ...so it is still acceptable
		{10, 4, Replay, false, 5},   //
		{10, 6, 0, true, 6},         // slide by one
		{10, 5, Replay, false, 6},   // the old highest is remembered after the slide
		{10, 2, 0, false, 6},        // never seen, still in the window
		{10, 200, 0, true, 200},     // slide by more than 64
		{10, 72, Stale, false, 200}, // 200-128: just below the window
		{10, 73, 0, true, 200},      // 200-127: the oldest in the window
		{10, 73, Replay, false, 200},
		{10, 6, Stale, false, 200}, // far below
		{10, 264, 0, true, 264},    // slide by exactly 64
		{10, 200, Replay, false, 264},
		{10, 73, Stale, false, 264}, // left the window in the slide
		{10, 137, 0, false, 264},    // 264-127: the oldest in the window
		{10, 136, Stale, false, 264},
		{10, 1000, 0, true, 1000}, // slide by more than the window: all forgotten
		{10, 264, Stale, false, 1000},
		{10, 999, 0, true, 1000},
		{10, 999, Replay, false, 1000},
		{9, 2000, Stale, true, 1000}, // an older session, whatever its seq; committing it is ignored
		{11, 1, 0, true, 1},          // a restart: larger session, seq starts again
		{11, 999, 0, false, 1},       // the old session's seqs are not remembered
		{11, 1, Replay, false, 1},
		{10, 1000, Stale, false, 1},
	}
	var w Window
	for i, s := range steps {
		if got := w.Check(s.session, s.seq); got != s.want {
			t.Fatalf("step %d (session %d seq %d): Check = %v, want %v", i, s.session, s.seq, got, s.want)
		}
		if s.commit {
			w.Commit(s.session, s.seq)
		}
		if w.Highest() != s.highest {
			t.Fatalf("step %d: highest %d, want %d", i, w.Highest(), s.highest)
		}
	}
}

// The window holds exactly WindowSize seqs: the highest and the 127
// below it, and a fresh slide forgets precisely what left it.
func TestWindowEdges(t *testing.T) {
	for _, jump := range []uint64{1, 2, 63, 64, 65, 127, 128, 129} {
		var w Window
		for s := uint64(1); s <= 300; s++ {
			w.Commit(1, s)
		}
		top := uint64(300) + jump
		w.Commit(1, top)
		for s := uint64(1); s <= top; s++ {
			got := w.Check(1, s)
			var want Reason
			switch {
			case top-s >= WindowSize:
				want = Stale
			case s <= 300 || s == top:
				want = Replay
			}
			if got != want {
				t.Fatalf("jump %d: seq %d: %v, want %v", jump, s, got, want)
			}
		}
	}
}

func FuzzWindow(f *testing.F) {
	f.Add([]byte{1, 2, 3, 200, 4, 0, 255})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// A model: the set of committed seqs of one session.
		var w Window
		seen := map[uint64]bool{}
		var high uint64
		seq := uint64(1000)
		for _, op := range ops {
			seq = seq + uint64(op) - 128
			if seq == 0 {
				seq = 1
			}
			got := w.Check(1, seq)
			var want Reason
			switch {
			case high == 0 || seq > high:
			case high-seq >= WindowSize:
				want = Stale
			case seen[seq]:
				want = Replay
			}
			if got != want {
				t.Fatalf("seq %d (high %d): %v, want %v", seq, high, got, want)
			}
			if got == 0 {
				w.Commit(1, seq)
				seen[seq] = true
				high = max(high, seq)
			}
		}
	})
}
