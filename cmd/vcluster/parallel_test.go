package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
)

func TestParallelFlag(t *testing.T) {
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	n := addParallelFlag(cmd)
	cmd.SetArgs([]string{"--parallel", "3"})
	if err := cmd.Execute(); err != nil || *n != 3 {
		t.Fatalf("--parallel 3 parsed as %d (%v)", *n, err)
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
	never := filepath.Join(t.TempDir(), "never")
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"ping", "--parallel", "2", "--set", "host.tcp=true"}, "do not support host.tcp"},
		{[]string{"drill", "--scenario", "t1-reboot", "--parallel", "2", "--set", "output.pcap=h0/p0"}, "partitioned (parallel) runs do not support output.pcap"},
		{[]string{"run", "--parallel", "2", "--set", "output.pcap=h0/p0", "--out", never}, "partitioned (parallel) runs do not support output.pcap"},
		{[]string{"collective", "--parallel", "2", "--set", "host.tcp=true"}, "do not support host.tcp"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.why) {
			t.Errorf("%v: exit %d, want 2 saying %q: %s", c.args, code, c.why, errOut)
		}
	}
	if _, err := os.Stat(never); err == nil {
		t.Errorf("a refused run created %s", never)
	}
	// --metrics reads a partitioned run between windows.
	code, out, errOut := runCLI(t, "bench", "fattree-perm", "--k", "4", "--parallel", "2", "--metrics", "127.0.0.1:0")
	if code != 0 || physics(out) != ref {
		t.Errorf("bench --parallel 2 --metrics: exit %d, results\n%s\nwant\n%s\n%s", code, physics(out), ref, errOut)
	}
}

// tableLines keeps the lines of a command's output that are results (not
// comments with wall times, partition counts or events).
func tableLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && (!strings.HasPrefix(l, "#") || strings.HasPrefix(l, "# Avg bus bandwidth") || strings.HasPrefix(l, "# mean iteration time")) {
			if i := strings.Index(l, "; wall"); i > 0 {
				l = l[:i]
			}
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// vcluster collective prints the same table, trace and JSON for every
// --parallel N ≥ 1, every result checked against the direct computation;
// the classic loop (0) is correct too (its ties break differently).
func TestParallelCollectiveIdentical(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []struct {
		name string
		args []string
	}{
		{"sweep", []string{"--op", "allreduce", "--hosts", "16", "--sizes", "512K:2M", "--chunk", "256K", "--loss", "0.002", "--iters", "2", "--reduce-rate", "40e9"}},
		{"workload", []string{"--workload", "allreduce:ring:1M,alltoall:pairwise:512K@4", "--hosts", "16", "--iters", "2", "--transport", "roce"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var ref, refTrace string
			for _, n := range []string{"0", "1", "2", "4"} {
				trace := filepath.Join(dir, mode.name+n+".json")
				code, out, errOut := runCLI(t, append(append([]string{"collective"}, mode.args...), "--parallel", n, "--trace", trace)...)
				if code != 0 {
					t.Fatalf("--parallel %s exited %d: %s", n, code, errOut)
				}
				got := tableLines(out)
				if strings.Count(got, " ok") < 3 || strings.Contains(got, "FAILED") {
					t.Fatalf("--parallel %s: want every result checked ok:\n%s", n, out)
				}
				if n == "0" {
					continue
				}
				if !strings.Contains(out, "partitioned: 4 partition(s)") {
					t.Errorf("--parallel %s: no partition note in\n%s", n, out)
				}
				tb, err := os.ReadFile(trace)
				if err != nil || len(tb) < 1000 {
					t.Fatalf("--parallel %s: trace %d bytes (%v)", n, len(tb), err)
				}
				if ref == "" {
					ref, refTrace = got, string(tb)
					continue
				}
				if got != ref {
					t.Errorf("--parallel %s differs:\n%s\nwant (--parallel 1)\n%s", n, got, ref)
				}
				if string(tb) != refTrace {
					t.Errorf("--parallel %s: trace differs from --parallel 1's", n)
				}
			}
		})
	}
}

// An experiment run partitioned writes the same results.csv for every
// --parallel N ≥ 1, records N in its manifest and is replayed partitioned;
// vcluster run runs its preflight on the classic loop and the experiment
// partitioned.
func TestParallelExperimentAndRun(t *testing.T) {
	dir := t.TempDir()
	params := []string{"--quick", "--set", "exp.size=1M", "--set", "exp.losses=0,0.01", "--set", "exp.roceQPs=1"}
	csv := func(d string) string {
		b, err := os.ReadFile(filepath.Join(d, "results.csv"))
		if err != nil || strings.Count(string(b), "\n") < 3 {
			t.Fatalf("%s: results.csv %q (%v)", d, b, err)
		}
		return string(b)
	}
	var ref string
	for _, n := range []string{"1", "2"} {
		out := filepath.Join(dir, "exp"+n)
		code, _, errOut := runCLI(t, append([]string{"experiment", "allreduce-loss", "--parallel", n, "--out", out, "--progress", "none"}, params...)...)
		if code != 0 {
			t.Fatalf("experiment --parallel %s exited %d: %s", n, code, errOut)
		}
		m, err := experiments.ReadManifest(filepath.Join(out, "manifest.json"))
		if err != nil || strconv.Itoa(m.Parallel) != n {
			t.Fatalf("--parallel %s: manifest parallel %d (%v)", n, m.Parallel, err)
		}
		if got := csv(out); ref == "" {
			ref = got
		} else if got != ref {
			t.Errorf("experiment --parallel %s: results.csv differs:\n%s\nwant\n%s", n, got, ref)
		}
	}
	again := filepath.Join(dir, "replay")
	if code, _, errOut := runCLI(t, "experiment", "--manifest", filepath.Join(dir, "exp2", "manifest.json"), "--out", again, "--progress", "none"); code != 0 {
		t.Fatalf("replay exited %d: %s", code, errOut)
	}
	if m, _ := experiments.ReadManifest(filepath.Join(again, "manifest.json")); m.Parallel != 2 || csv(again) != ref {
		t.Errorf("replay of a --parallel 2 run: parallel %d, results.csv\n%s\nwant\n%s", m.Parallel, csv(again), ref)
	}
	run := filepath.Join(dir, "run")
	code, out, errOut := runCLI(t, append([]string{"run", "--parallel", "2", "--out", run, "--progress", "none"}, params...)...)
	if code != 0 {
		t.Fatalf("run --parallel 2 exited %d: %s", code, errOut)
	}
	csv(run)
	for _, f := range []string{"pings.csv", "report.md"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("run --parallel 2: %v", err)
		}
	}
	if rep, _ := os.ReadFile(filepath.Join(run, "report.md")); !strings.Contains(string(rep), "the preflight on the classic loop") {
		t.Errorf("run --parallel 2: the report does not say how it ran:\n%s", out)
	}
}

// TestParallelPingIdentical: ping through the netstacks of a partitioned
// cluster (source and destination hosts on different partitions, each
// stack with its own random stream) prints the same RTTs for --parallel
// 1, 2 and 4 as the classic loop, and captures the same frames.
func TestParallelPingIdentical(t *testing.T) {
	var ref string
	var refPcap []byte
	for _, n := range []string{"0", "1", "2", "4"} {
		pc := filepath.Join(t.TempDir(), "p.pcap")
		code, out, errOut := runCLI(t, "ping", "--count", "4", "--payload", "200", "--parallel", n, "--pcap", pc)
		if code != 0 {
			t.Fatalf("ping --parallel %s: exit %d: %s", n, code, errOut)
		}
		got := strings.ReplaceAll(out, pc, "P")
		if !strings.Contains(got, "4 transmitted, 4 received") {
			t.Fatalf("ping --parallel %s:\n%s", n, out)
		}
		b, err := os.ReadFile(pc)
		if err != nil || len(b) < 100 {
			t.Fatalf("ping --parallel %s: capture %d bytes (%v)", n, len(b), err)
		}
		if ref == "" {
			ref, refPcap = got, b
			continue
		}
		if got != ref {
			t.Errorf("ping --parallel %s:\n%s\nwant\n%s", n, got, ref)
		}
		if string(b) != string(refPcap) {
			t.Errorf("ping --parallel %s: capture differs from --parallel 0", n)
		}
	}
}

// TestParallelP2PIdentical: bench p2p's physics (goodput, packets,
// retransmissions at each loss rate) is the same for --parallel 1 and 2.
func TestParallelP2PIdentical(t *testing.T) {
	physics := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 6 && strings.HasSuffix(f[0], "%") {
				keep = append(keep, strings.Join(f[:6], " ")) // loss … retx; wall-clock columns dropped
			}
		}
		return strings.Join(keep, "\n")
	}
	var ref string
	for _, n := range []string{"1", "2"} {
		code, out, errOut := runCLI(t, "bench", "p2p", "--size", "16777216", "--loss", "0,0.01", "--parallel", n)
		if code != 0 {
			t.Fatalf("--parallel %s: exit %d: %s", n, code, errOut)
		}
		got := physics(out)
		if strings.Count(got, "\n") != 1 {
			t.Fatalf("--parallel %s: want two result rows in\n%s", n, out)
		}
		if ref == "" {
			ref = got
		} else if got != ref {
			t.Errorf("--parallel %s:\n%s\nwant\n%s", n, got, ref)
		}
	}
}
