package fabric

import (
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// TestPrefetchChangesNothing: the loop's Prefetch calls (links, ports,
// uSID egress lookahead) only read: a congested run gives byte-identical
// counters, arrival logs and event counts with and without them, for ECMP
// and uSID fabrics, classic and ranked loops.
func TestPrefetchChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(*sim.Loop) (*Topology, error)
	}{{"fat-tree ecmp", fatTree4}, {"clos usid", clos2}} {
		for _, parts := range []int{0, 1} {
			prefetchOff = false
			on := runPartitioned(t, c.build, parts, 1, 60)
			prefetchOff = true
			off := runPartitioned(t, c.build, parts, 1, 60)
			prefetchOff = false
			if on.prefetched == 0 || off.prefetched != 0 {
				t.Fatalf("%s parts %d: %d Prefetch calls with, %d without", c.name, parts, on.prefetched, off.prefetched)
			}
			samePartRun(t, c.name, on, off)
		}
	}
}
