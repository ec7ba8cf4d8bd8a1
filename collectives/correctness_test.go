package collectives

import (
	"fmt"
	"testing"
)

// Every algorithm gives the right answer on 2, 3, 8 and 16 ranks over
// both transports, with slices small enough that each block is cut up.
func TestAlgorithmsCorrect(t *testing.T) {
	for _, tr := range []string{"mrc", "roce"} {
		for _, n := range []int{2, 3, 8, 16} {
			t.Run(fmt.Sprintf("%s/%d", tr, n), func(t *testing.T) {
				t.Parallel()
				c := newCluster(t, tr, 16)
				m := newComm(t, c, Options{Hosts: firstHosts(n), Chunk: 4 << 10})
				for _, a := range Algorithms("") {
					for _, size := range []uint64{4, 100, 96 << 10} {
						root := 0
						if a.Op == Broadcast {
							root = n - 1
						}
						r, err := m.Run(a, size, RunOptions{Root: root})
						if err != nil {
							t.Fatalf("%s/%s %d B: %v", a.Op, a.Name, size, err)
						}
						if r.Check != CheckOK || r.Wrong != 0 {
							t.Errorf("%s/%s %d B on %d ranks: %s, %d wrong", a.Op, a.Name, r.Bytes, n, r.Check, r.Wrong)
						}
					}
				}
			})
		}
	}
}
