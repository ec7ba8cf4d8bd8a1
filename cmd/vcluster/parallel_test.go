package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

func TestParallelFlag(t *testing.T) {
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	n := addParallelFlag(cmd)
	cmd.SetArgs([]string{"--parallel", "3"})
	if err := cmd.Execute(); err != nil || *n != 3 {
		t.Fatalf("--parallel 3 parsed as %d (%v)", *n, err)
	}
	if err := rejectParallel(0, "collective"); err != nil {
		t.Fatalf("--parallel 0 rejected: %v", err)
	}
	err := rejectParallel(2, "collective")
	var ee *exitError
	if err == nil || !strings.Contains(err.Error(), "collective cannot run partitioned") || !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("rejection: %v", err)
	}
}

func TestParallelCluster(t *testing.T) {
	cfg, err := cluster.HtsimFatTreeConfig(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parallelCluster(cfg, 8) // more workers than pods: 4 partitions
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Partitioning(); p == nil || len(p.Loops) != 4 || c.Loop != nil {
		t.Fatalf("--parallel 8 on k=4: partitioning %v", p)
	}
	c.Close()
	if c, err = parallelCluster(cfg, 0); err != nil || c.Partitioning() != nil {
		t.Fatalf("--parallel 0: %v", err)
	}
	c.Close()
	bad, err := config.Load("", append(cluster.HtsimFatTreeSets(4), "output.pcap=h0/p0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parallelCluster(bad, 2); err == nil || !strings.Contains(err.Error(), "output.pcap") {
		t.Fatalf("pcap with --parallel 2: %v", err)
	}
}

// The bench's physics lines (everything but timings and memory) are the
// same for every --parallel N ≥ 1; commands that cannot run partitioned
// refuse with the reason.
func TestParallelBenchIdenticalAndRefusals(t *testing.T) {
	physics := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			for _, p := range []string{"simulated", "events", "packet-hops", "data packets", "FCT"} {
				if strings.HasPrefix(l, p) {
					if i := strings.Index(l, " ("); i > 0 && p != "data packets" && p != "FCT" {
						l = l[:i] // drop the per-second rates
					}
					keep = append(keep, l)
				}
			}
		}
		return strings.Join(keep, "\n")
	}
	var ref string
	for _, n := range []string{"1", "2", "4"} {
		code, out, errOut := runCLI(t, "bench", "fattree-perm", "--k", "4", "--parallel", n, "--progress", "none")
		if code != 0 {
			t.Fatalf("--parallel %s exited %d: %s", n, code, errOut)
		}
		got := physics(out)
		if !strings.Contains(got, "FCT") || !strings.Contains(got, "packet-hops") {
			t.Fatalf("--parallel %s: no results in\n%s", n, out)
		}
		if ref == "" {
			ref = got
		} else if got != ref {
			t.Errorf("--parallel %s differs:\n%s\nwant\n%s", n, got, ref)
		}
	}
	for _, args := range [][]string{
		{"run", "--parallel", "2"},
		{"collective", "--parallel", "2"},
		{"drill", "--scenario", "t1-reboot", "--parallel", "2"},
		{"bench", "fattree-perm", "--k", "4", "--parallel", "2", "--metrics", "127.0.0.1:0"},
	} {
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, "--") {
			t.Errorf("%v: exit %d, want 2 with a reason: %s", args, code, errOut)
		}
	}
}
