package collectives

import "testing"

// A training-like iteration: data-parallel all-reduce over all 8 ranks,
// then expert-parallel all-to-all inside two groups of 4 at once.
func TestWorkload(t *testing.T) {
	items, err := ParseWorkload("allreduce:ring:1M,alltoall:pairwise:512K@4")
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "mrc", 16)
	m := newComm(t, c, Options{Hosts: firstHosts(8)})
	r, err := m.RunWorkload(items, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range r.PerItem {
		var sum int64
		for k, x := range row {
			if x.Check != CheckOK {
				t.Errorf("iteration %d item %s: %s", i, items[k], x.Check)
			}
			sum += int64(x.TimeNs)
		}
		if sum != int64(r.IterNs[i]) {
			t.Errorf("iteration %d: items take %d ns, iteration %d", i, sum, r.IterNs[i])
		}
	}
	if r.PerItem[0][1].Ranks != 4 {
		t.Errorf("all-to-all ran over %d ranks, want groups of 4", r.PerItem[0][1].Ranks)
	}
	t.Logf("iteration time %.1f µs (%v)", float64(r.MeanNs)/1e3, r.IterNs)
	if _, err := ParseWorkload("allreduce:nosuch:1M"); err == nil {
		t.Error("unknown algorithm accepted")
	}
}
