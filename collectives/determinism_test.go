package collectives

import (
	"testing"
)

// Same config and seed → identical times.
func TestDeterministic(t *testing.T) {
	run := func() []Result {
		c := newCluster(t, "mrc", 16)
		lossEverywhere(c, 0.001)
		m := newComm(t, c, Options{Hosts: firstHosts(6), Chunk: 64 << 10})
		var rs []Result
		for _, name := range []string{"allreduce/ring", "alltoall/direct", "allreduce/tree"} {
			r, err := m.Run(mustLookup(t, name), 1<<20, RunOptions{Iters: 2})
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		return rs
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("run %d differs:\n%+v\n%+v", i, a[i], b[i])
		}
	}
}
