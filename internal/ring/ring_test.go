package ring

import "testing"

func TestFIFOOrderAcrossGrowth(t *testing.T) {
	var r Ring[int]
	next, want := 0, 0
	for round := 0; round < 200; round++ {
		for i := 0; i < round%37+1; i++ {
			r.Push(next)
			next++
		}
		for i := 0; i < round%23 && r.Len() > 0; i++ {
			if got := *r.Front(); got != want {
				t.Fatalf("front %d, want %d", got, want)
			}
			if got := r.Pop(); got != want {
				t.Fatalf("pop %d, want %d", got, want)
			}
			want++
		}
		if r.Len() != next-want {
			t.Fatalf("len %d, want %d", r.Len(), next-want)
		}
		for i := 0; i < r.Len(); i++ {
			if *r.At(i) != want+i {
				t.Fatalf("At(%d) = %d, want %d", i, *r.At(i), want+i)
			}
		}
	}
	r.Clear()
	if r.Len() != 0 {
		t.Fatal("Clear left elements")
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	var r Ring[[4]uint64]
	for i := 0; i < 100; i++ {
		r.Push([4]uint64{})
	}
	for r.Len() > 0 {
		r.Pop()
	}
	if a := testing.AllocsPerRun(1000, func() {
		for i := 0; i < 64; i++ {
			r.Push([4]uint64{uint64(i)})
		}
		for r.Len() > 0 {
			r.Pop()
		}
	}); a != 0 {
		t.Fatalf("%.1f allocations per run, want 0", a)
	}
}
