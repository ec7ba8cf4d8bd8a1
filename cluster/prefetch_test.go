package cluster

import (
	"bytes"
	"reflect"
	"testing"
)

// TestPrefetchChangesNothingEndToEnd: the loops' prefetch stages reach
// into NICs, engines and MRC QPs (endpoint.RxPrefetcher); they only read,
// so a permutation under MRC gives the same flows, totals and port
// counters with prefetching on and off.
func TestPrefetchChangesNothingEndToEnd(t *testing.T) {
	cfg, err := HtsimFatTreeConfig(4, 5)
	if err != nil {
		t.Fatal(err)
	}
	run := func(on bool) (PermResult, []byte, uint64) {
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetPrefetch(on)
		r, err := c.RunPermutation(Derangement(cfg.Seed, len(c.Hosts)), 400_000)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := c.Topo.WriteCountersCSV(&b); err != nil {
			t.Fatal(err)
		}
		return r, b.Bytes(), c.Loop.Prefetched()
	}
	on, csvOn, calls := run(true)
	off, csvOff, none := run(false)
	if calls == 0 || none != 0 {
		t.Fatalf("%d Prefetch calls with prefetching on, %d with it off", calls, none)
	}
	if !reflect.DeepEqual(on, off) {
		t.Errorf("results differ with prefetching on and off:\n%+v\n%+v", on, off)
	}
	if !bytes.Equal(csvOn, csvOff) {
		t.Error("port counters differ with prefetching on and off")
	}
	if on.DataPackets == 0 {
		t.Fatal("no data packets")
	}
}
