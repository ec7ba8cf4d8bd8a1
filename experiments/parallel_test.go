package experiments

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The experiments that can run partitioned write byte-identical
// results.csv (and events.jsonl, for those with fault plans) for
// --parallel 1, 2 and 4 (and the manifest records the mode); the others
// say why they cannot, and Execute refuses them. The fault and sampler
// experiments (collateral, dcqcn-tuning, failover, blast-radius,
// flapping) act on several partitions in mid-run as global events
// between windows.
func TestParallelResultsIdentical(t *testing.T) {
	cases := []struct {
		name string
		sets []string
	}{
		{"allreduce-loss", []string{"size=2M", "losses=0,0.01", "roceQPs=1", "payload=real"}},
		{"alltoall", []string{"size=1M", "losses=0.01", "roceQPs=1", "payload=real"}},
		{"permutation", nil},
		{"p2p", nil},
		{"orderre", orderreSmall},
		{"path-quality", pathQualitySmall},
		{"failover", nil},
		{"flapping", []string{"flapFor=2ms", "after=1ms"}},
		{"collateral", []string{"each=16M"}},
		{"dcqcn-tuning", []string{"senders=7"}},
		{"blast-radius", []string{"topologies=4x100G,1x800G", "t1s=8", "from=200us", "to=400us"}},
	}
	partitioned := map[string]bool{}
	for _, tc := range cases {
		partitioned[tc.name] = true
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Lookup(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			var ref []byte
			for _, n := range []int{1, 2, 4} {
				dir := t.TempDir()
				env := quickEnv(t, e, tc.sets...)
				env.Parallel = n
				rec := &recorder{}
				env.Observer = rec
				if _, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{}); err != nil {
					t.Fatalf("--parallel %d: %v", n, err)
				}
				rec.check(t)
				got, err := os.ReadFile(filepath.Join(dir, "results.csv"))
				if err != nil {
					t.Fatal(err)
				}
				if ev, err := os.ReadFile(filepath.Join(dir, "events.jsonl")); err == nil {
					got = append(append(got, "\n-- events.jsonl --\n"...), ev...)
				}
				if m, err := ReadManifest(filepath.Join(dir, "manifest.json")); err != nil || m.Parallel != n {
					t.Errorf("--parallel %d: manifest records parallel %d (%v)", n, m.Parallel, err)
				}
				if bytes.Count(got, []byte("\n")) < 2 {
					t.Fatalf("--parallel %d: no rows:\n%s", n, got)
				}
				if ref == nil {
					ref = got
				} else if !bytes.Equal(got, ref) {
					t.Errorf("--parallel %d: results.csv differs:\n%s\nwant (--parallel 1)\n%s", n, got, ref)
				}
			}
		})
	}
	for _, name := range Names() {
		if !partitioned[name] {
			t.Errorf("%s is not tested partitioned (every experiment runs partitioned)", name)
		}
	}
}
