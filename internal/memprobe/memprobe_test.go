package memprobe

import "testing"

// Every line is on exactly one chain and each chain is a cycle.
func TestChainsVisitEveryLineOnce(t *testing.T) {
	for _, k := range []int{1, 3, 16} {
		region := make([]uint64, 1000*Line/8)
		heads := Chains(region, k, Order(1000, 7))
		if len(heads) != k {
			t.Fatalf("k=%d: %d heads", k, len(heads))
		}
		seen := map[uint64]bool{}
		for _, h := range heads {
			p := uint64(h)
			for {
				if p%(Line/8) != 0 || p >= uint64(len(region)) {
					t.Fatalf("k=%d: pointer %d is not a line start in the region", k, p)
				}
				if seen[p] {
					t.Fatalf("k=%d: line %d visited twice", k, p/(Line/8))
				}
				seen[p] = true
				p = region[p]
				if p == uint64(h) {
					break
				}
			}
		}
		if len(seen) != 1000 {
			t.Fatalf("k=%d: chains visit %d of 1000 lines", k, len(seen))
		}
	}
}

func TestFollowReturnsToStartAfterACycle(t *testing.T) {
	region := make([]uint64, 64*Line/8)
	heads := Chains(region, 1, Order(64, 1))
	tick := int64(0)
	clock := func() int64 { tick += 1000; return tick }
	if d := Follow(region, heads, 64, clock); d != 1000.0/64 {
		t.Fatalf("Follow took %v ns per line by a clock that advanced 1000 ns, want %v", d, 1000.0/64)
	}
	if sink != uint64(heads[0]) {
		t.Fatalf("after one full cycle the chain is at %d, want its head %d", sink, heads[0])
	}
}
