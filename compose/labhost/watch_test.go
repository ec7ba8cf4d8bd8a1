package labhost

import (
	"testing"

	"github.com/vcluster/vcluster/compose/labapi"
)

// A rank watches the members at ring distances 1, 2, 4, … either way:
// everyone in small runs, about 2·log₂ n in large ones, and the members
// whose watchers see a failure reach every rank (the graph in which a
// rank's watchers follow it is connected).
func TestWatchedMembers(t *testing.T) {
	for n := 2; n <= 64; n++ {
		hosts := make([]int, n)
		for i := range hosts {
			hosts[i] = 100 + 3*i // host ids need not be ranks
		}
		watchers := map[int][]int{} // host → the hosts that watch it
		for _, self := range hosts {
			var others []labapi.Peer
			for _, h := range hosts {
				if h != self {
					others = append(others, labapi.Peer{Host: h, API: "x:1"})
				}
			}
			w := watched(others, self, hosts)
			if n <= 4 && len(w) != n-1 {
				t.Errorf("n=%d host %d watches %d, want all %d", n, self, len(w), n-1)
			}
			if n == 64 && len(w) != 11 {
				t.Errorf("n=64 host %d watches %d, want 11 (distances 1..32 both ways)", self, len(w))
			}
			for _, p := range w {
				if p.Host == self || p.API == "" {
					t.Fatalf("n=%d host %d watches %+v", n, self, p)
				}
				watchers[p.Host] = append(watchers[p.Host], self)
			}
		}
		// A failure at hosts[0] spreads to its watchers, theirs, …
		reached := map[int]bool{hosts[0]: true}
		queue := []int{hosts[0]}
		for len(queue) > 0 {
			h := queue[0]
			queue = queue[1:]
			for _, w := range watchers[h] {
				if !reached[w] {
					reached[w] = true
					queue = append(queue, w)
				}
			}
		}
		if len(reached) != n {
			t.Errorf("n=%d: a failure reaches %d of %d ranks", n, len(reached), n)
		}
	}
}
