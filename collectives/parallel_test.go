package collectives

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// newPartCluster is newCluster cut into parts partitions run on workers
// goroutines (parts 0: the classic single loop).
func newPartCluster(t testing.TB, transport string, hosts, parts, workers int, sets ...string) *cluster.Cluster {
	t.Helper()
	base := []string{"fabric.preset=C", "fabric.hosts=" + itoa(hosts), "transport.kind=" + transport}
	if transport == "roce" {
		base = append(base, "fabric.forwarding=ecmp")
	}
	cfg, err := config.Load("", append(base, sets...))
	if err != nil {
		t.Fatal(err)
	}
	var c *cluster.Cluster
	if parts == 0 {
		c, err = cluster.New(cfg, nil)
	} else {
		c, err = cluster.NewPartitioned(cfg, parts, workers)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// partRun is everything a collectives run on one cluster produced, as text
// so that runs compare byte for byte.
type partRun struct {
	results string // every Result and workload row, %+v
	rows    []Result
	trace   []byte
	events  uint64
	now     int64
}

// runCollectivesOn runs a mix that exercises every part of the runtime —
// pipelined writes, waits, timed reductions (ReduceBps), warmup and
// several iterations, groups launched at once, connections made between
// runs (later algorithms talk to new peers), loss and retransmission —
// and checks every result against the direct computation.
func runCollectivesOn(t *testing.T, c *cluster.Cluster, loss float64) partRun {
	t.Helper()
	var out partRun
	if loss > 0 {
		lossEverywhere(c, loss)
	}
	m := newComm(t, c, Options{Chunk: 128 << 10, ReduceBps: 50e9, Trace: true})
	var b strings.Builder
	for _, x := range []struct {
		name string
		size uint64
		o    RunOptions
	}{
		{"allreduce/ring", 2 << 20, RunOptions{Iters: 2, Warmup: 1}},
		{"alltoall/direct", 1 << 20, RunOptions{}},
		{"allreduce/tree", 512 << 10, RunOptions{}},
		{"broadcast/chain", 1 << 20, RunOptions{Root: 3}},
		{"allgather/ring", 1 << 20, RunOptions{}},
	} {
		r, err := m.Run(mustLookup(t, x.name), x.size, x.o)
		if err != nil {
			t.Fatalf("%s: %v", x.name, err)
		}
		if r.Check != CheckOK || r.Wrong != 0 || r.TimeNs <= 0 {
			t.Fatalf("%s: check %s, %d wrong, time %d", x.name, r.Check, r.Wrong, r.TimeNs)
		}
		fmt.Fprintf(&b, "%+v\n", r)
		out.rows = append(out.rows, r)
	}
	items, err := ParseWorkload("allreduce:ring:1M,alltoall:pairwise:512K@4")
	if err != nil {
		t.Fatal(err)
	}
	w, err := m.RunWorkload(items, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range w.PerItem {
		for _, r := range row {
			if r.Check != CheckOK {
				t.Fatalf("workload %s: check %s", r.Algo, r.Check)
			}
		}
	}
	fmt.Fprintf(&b, "%+v\n", w)
	var tr bytes.Buffer
	if err := m.Trace().WriteTrace(&tr); err != nil {
		t.Fatal(err)
	}
	out.results, out.trace, out.events, out.now = b.String(), tr.Bytes(), c.Executed(), int64(c.Now())
	return out
}

// Collectives on a partitioned cluster give byte-identical results, traces
// and event counts for every partitioning and number of workers, all
// checked correct. The classic loop breaks equal-time ties differently
// (and under loss that changes which packets are lost), so it is only
// checked to be correct and, without loss, close.
func TestPartitionedCollectivesIdentical(t *testing.T) {
	for _, tp := range []string{"mrc", "roce"} {
		t.Run(tp, func(t *testing.T) {
			var ref partRun
			var refName string
			for _, pw := range [][2]int{{1, 1}, {2, 2}, {4, 1}, {4, 4}} {
				name := fmt.Sprintf("%d partitions, %d workers", pw[0], pw[1])
				got := runCollectivesOn(t, newPartCluster(t, tp, 16, pw[0], pw[1]), 0.002)
				if refName == "" {
					ref, refName = got, name
					if !bytes.Contains(got.trace, []byte(`"cat":"send"`)) || !bytes.Contains(got.trace, []byte(`"name":"reduce"`)) {
						t.Fatalf("%s: trace lacks sends or reductions", name)
					}
					continue
				}
				if got.results != ref.results {
					t.Errorf("%s: results differ from %s:\n%s\nwant\n%s", name, refName, got.results, ref.results)
				}
				if !bytes.Equal(got.trace, ref.trace) {
					t.Errorf("%s: trace differs from %s (%d vs %d bytes)", name, refName, len(got.trace), len(ref.trace))
				}
				if got.events != ref.events || got.now != ref.now {
					t.Errorf("%s: %d events, end %d; %s: %d events, end %d", name, got.events, got.now, refName, ref.events, ref.now)
				}
			}
			classic := runCollectivesOn(t, newPartCluster(t, tp, 16, 0, 0), 0)
			part := runCollectivesOn(t, newPartCluster(t, tp, 16, 4, 2), 0)
			for i, r := range part.rows {
				c := classic.rows[i]
				if d := float64(c.TimeNs-r.TimeNs) / float64(r.TimeNs); d > 0.05 || d < -0.05 {
					t.Errorf("%s/%s without loss: classic loop %v, partitioned %v: more than 5%% apart", r.Op, r.Algo, c.TimeNs, r.TimeNs)
				}
			}
		})
	}
}
