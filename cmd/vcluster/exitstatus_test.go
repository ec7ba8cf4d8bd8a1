package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// A small allreduce-loss grid in which RoCE (go-back-N, one QP) runs out
// of retries at 30% loss: the row fails.
var failingGrid = []string{"--set", "exp.size=64K", "--set", "exp.losses=0.3", "--set", "exp.roceQPs=1",
	"--set", "fabric.hosts=4", "--set", "fabric.hostsPerT0=2", "--progress", "none"}

// experiment and run with a FAILED row exit 1, print the table, write the
// report, and say on the last line of stderr which rows failed; the
// manifest's status says so too.
func TestFailedRowsExit1(t *testing.T) {
	for _, cmd := range [][]string{{"experiment", "allreduce-loss"}, {"run"}} {
		dir := filepath.Join(t.TempDir(), "out")
		code, out, errOut := runCLI(t, append(append(cmd, "--out", dir), failingGrid...)...)
		if code != 1 {
			t.Errorf("%v: exit status %d, want 1; stderr:\n%s", cmd, code, errOut)
		}
		if !strings.Contains(out, "FAILED") {
			t.Errorf("%v: the table has no FAILED row:\n%s", cmd, out)
		}
		re := regexp.MustCompile(`^vcluster: [12] of 2 rows failed: (MRC.*; )?RoCE, 1 QP, 64K, loss 30% \(.*RETRY_EXCEEDED.*\)$`)
		if l := lastLine(errOut); !re.MatchString(l) {
			t.Errorf("%v: last stderr line %q does not match %s", cmd, l, re)
		}
		m := readManifest(t, dir)
		if !strings.HasPrefix(m.Status, "failed: ") || !strings.Contains(m.Status, "RoCE, 1 QP") {
			t.Errorf("%v: manifest status %q, want failed: with the row", cmd, m.Status)
		}
		if _, err := os.Stat(filepath.Join(dir, "report.md")); err != nil {
			t.Errorf("%v: no report for a run with a failed row: %v", cmd, err)
		}
	}
}

// A drill whose job fails (RoCE on ECMP loses a link for good: the QP runs
// out of retries) exits 1 with what failed on the last line.
func TestDrillFailedExit1(t *testing.T) {
	plan := filepath.Join(t.TempDir(), "cut.yaml")
	os.WriteFile(plan, []byte("events:\n  - at: 50us\n    kind: link_down\n    target: busiest:t0-t1\n"), 0o644)
	for _, extra := range [][]string{nil, {"--json"}} {
		args := append([]string{"drill", "--plan", plan, "--preset", "C", "--set", "transport.kind=roce", "--set", "fabric.forwarding=ecmp",
			"--bytes", "4194304", "--deadline", "5ms", "--baseline=false"}, extra...)
		code, out, errOut := runCLI(t, args...)
		if code != 1 {
			t.Errorf("%v: exit status %d, want 1; stderr:\n%s", extra, code, errOut)
		}
		if out == "" {
			t.Errorf("%v: no summary printed", extra)
		}
		if l := lastLine(errOut); !strings.HasPrefix(l, "vcluster: drill failed: ") || !strings.Contains(l, "QPs in error") {
			t.Errorf("%v: last stderr line %q, want drill failed: … QPs in error", extra, l)
		}
	}
}

// A collective whose QP runs out of retries exits 1 saying so.
func TestCollectiveFailedExit1(t *testing.T) {
	code, _, errOut := runCLI(t, "collective", "--transport", "roce", "--loss", "0.9", "--hosts", "4", "--sizes", "64K")
	if code != 1 || !strings.Contains(lastLine(errOut), "RETRY_EXCEEDED") {
		t.Errorf("exit status %d, last line %q; want 1 and the QP error", code, lastLine(errOut))
	}
}

// Bad experiment parameters, of every kind and for several experiments,
// are refused before anything runs or is written: exit 2, the parameter,
// the value and the allowed range named; no output directory.
func TestBadExpParamsRefusedUpFront(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"experiment", "allreduce-loss", "--set", "exp.losses=2"}, `exp.losses: "2" is not a loss rate; must be in [0, 1)`},
		{[]string{"experiment", "allreduce-loss", "--set", "exp.losses=NaN"}, `exp.losses: "NaN" is not a loss rate; must be in [0, 1)`},
		{[]string{"experiment", "allreduce-loss", "--set", "exp.roceQPs=0"}, "exp.roceQPs: \"0\" is out of range; must be a comma-separated list of integers in [1, 64]"},
		{[]string{"experiment", "allreduce-loss", "--set", "exp.size=0"}, "exp.size: \"0\" is not a size"},
		{[]string{"experiment", "allreduce-loss", "--set", "exp.payload=some"}, "exp.payload: \"some\" is not allowed; must be one of real, elided"},
		{[]string{"run", "--set", "exp.losses=-0.5"}, "exp.losses: \"-0.5\" is not a loss rate"},
		{[]string{"experiment", "alltoall", "--set", "exp.roceFabric=same"}, "exp.roceFabric: \"same\" is not allowed; must be one of paper, same-planes"},
		{[]string{"run", "--set", "exp.hosts=10"}, "exp.hosts: \"10\" is not a multiple of fabric.hostsPerT0 (4)"},
		{[]string{"experiment", "alltoall", "--set", "exp.ring=maybe"}, "exp.ring: \"maybe\" is not allowed; must be one of on, off"},
		{[]string{"experiment", "failover", "--set", "exp.deadline=-1s"}, "exp.deadline: \"-1s\" is out of range; must be a duration in (0"},
		{[]string{"experiment", "failover", "--set", "exp.bytes=2T"}, "exp.bytes: \"2T\" is not a size; must be a size in [1, 1T]"},
		{[]string{"experiment", "collateral", "--set", "exp.senders=0"}, "exp.senders: \"0\" is out of range; must be an integer in [1, "},
		{[]string{"experiment", "collateral", "--set", "exp.interval=0"}, "exp.interval: \"0\" is out of range"},
		{[]string{"experiment", "dcqcn-tuning", "--set", "exp.senders=100"}, "exp.senders: \"100\" is out of range; must be an integer in [1, 15]"},
		{[]string{"experiment", "dcqcn-tuning", "--set", "exp.stagger=-1ms"}, "exp.stagger: \"-1ms\" is out of range; must be a duration in [0"},
		{[]string{"experiment", "permutation", "--set", "exp.trials=0"}, "exp.trials: \"0\" is out of range; must be an integer in [1, 1000]"},
		{[]string{"experiment", "blast-radius", "--set", "exp.t1s=4"}, "exp.t1s: \"4\" is out of range; must be an integer in [8, 512]"},
		{[]string{"experiment", "blast-radius", "--set", "exp.from=2ms"}, "exp.from: 2ms is not before exp.to"},
		{[]string{"experiment", "flapping", "--set", "exp.settle=x"}, "exp.settle: \"x\" is out of range"},
		{[]string{"experiment", "p2p", "--set", "exp.writes=4K,0"}, "exp.writes: \"0\" is not a size"},
		{[]string{"experiment", "all", "--set", "exp.size=0"}, "exp.size"}, // no experiment has run when it is refused
	} {
		dir := filepath.Join(t.TempDir(), "out")
		code, out, errOut := runCLI(t, append(tc.args, "--out", dir, "--progress", "none")...)
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2; stderr:\n%s", tc.args, code, errOut)
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tc.args, tc.want, errOut)
		}
		if out != "" {
			t.Errorf("%v: stdout %q: something ran", tc.args, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%v: the output directory was created (stat: %v)", tc.args, err)
		}
	}
}

// Every bad parameter is reported at once, not only the first.
func TestBadExpParamsAllReported(t *testing.T) {
	code, _, errOut := runCLI(t, "experiment", "allreduce-loss", "--set", "exp.losses=2", "--set", "exp.roceQPs=0", "--set", "exp.payload=x", "--out", t.TempDir())
	for _, k := range []string{"exp.losses:", "exp.roceQPs:", "exp.payload:"} {
		if code != 2 || !strings.Contains(errOut, k) {
			t.Errorf("exit %d, stderr lacks %s:\n%s", code, k, errOut)
		}
	}
}

// Config errors caused by a shorthand flag name the flag the user typed
// (and what it may be), not a derived config field.
func TestShorthandFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"collective", "--hosts", "100000"}, "--hosts: 100000 is not possible here"},
		{[]string{"topo", "--hosts", "100000"}, "--hosts: 100000 is not possible here"},
		{[]string{"drill", "--hosts", "100000", "--scenario", "t1-reboot"}, "--hosts: 100000 is not possible here"},
		{[]string{"topo", "--hosts", "6"}, "--hosts: 6 is not possible here"},
		{[]string{"collective", "--transport", "udp"}, "--transport: udp: transport.kind"},
		{[]string{"topo", "--preset", "Z"}, "--preset: Z: fabric.preset"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		lines := strings.Split(errOut, "\n")
		found := false
		for _, l := range lines {
			if strings.HasPrefix(l, tc.want) {
				found = true
			}
			if strings.HasPrefix(l, "fabric.t0PerPlane:") {
				t.Errorf("%v: a line names the derived field: %q", tc.args, l)
			}
		}
		if !found {
			t.Errorf("%v: no line starts with %q:\n%s", tc.args, tc.want, errOut)
		}
		if strings.Contains(tc.want, "--hosts") && !strings.Contains(errOut, "must be a multiple of 4 (fabric.hostsPerT0) in [4, ") {
			t.Errorf("%v: the allowed --hosts range is not stated:\n%s", tc.args, errOut)
		}
	}
}

// Runs that cannot fit in memory are refused before anything is built:
// exit 2, quickly, without allocating the buffers.
func TestMemoryRefusedUpFront(t *testing.T) {
	avail := cluster.AvailableMemory()
	if avail == 0 {
		t.Skip("available memory unknown on this machine: checkMemory checks nothing")
	}
	for _, tc := range []struct {
		args []string
		need uint64 // the buffers alone
	}{
		{[]string{"collective", "--hosts", "64", "--sizes", "1M:1G"}, 64 * 3 << 30},
		{[]string{"drill", "--bytes", "1T", "--scenario", "t1-reboot"}, 16 * 2 << 40},
		{[]string{"experiment", "allreduce-loss", "--set", "exp.size=1T", "--set", "exp.payload=real", "--out", filepath.Join(t.TempDir(), "x")}, 16 * 3 << 40},
	} {
		if tc.need < avail {
			t.Logf("%v: this machine has %d bytes available, more than the run needs: skipped", tc.args, avail)
			continue
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		code, out, errOut := runCLI(t, tc.args...)
		el := time.Since(start)
		runtime.ReadMemStats(&after)
		if code != 2 || !strings.Contains(errOut, "not enough memory") {
			t.Errorf("%v: exit %d, stderr %q; want 2, not enough memory", tc.args, code, errOut)
		}
		if strings.Contains(out, "#") && strings.Contains(out, "busbw") {
			t.Errorf("%v: rows were printed: it ran", tc.args)
		}
		t.Logf("%v: refused after %v", tc.args, el) // the allocation bound below is the check
		if a := after.TotalAlloc - before.TotalAlloc; a > 256<<20 {
			t.Errorf("%v: allocated %d MiB before refusing", tc.args, a>>20)
		}
	}
	// The estimate takes the elided payload into account: the same
	// collective with --elide is not refused for memory.
	cfg, err := config.Load("", []string{"fabric.preset=C", "fabric.hosts=64", "transport.payload=elided"})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkMemory(cfg, 3<<30); err != nil {
		t.Errorf("elided payload refused: %v", err)
	}
}

// --hold-until-plan-end keeps the workload running until the plan's last
// fault is over (faults.DrillOptions.HoldUntilPlanEnd): a fault after the
// job's first round is judged under traffic instead of after_job_end.
func TestDrillHoldUntilPlanEnd(t *testing.T) {
	args := []string{"drill", "--scenario", "t1-reboot", "--at", "2ms", "--duration", "500us", "--bytes", "1M", "--json", "--baseline=false"}
	for _, tc := range []struct {
		hold    bool
		outcome string
	}{{false, `"outcome": "after_job_end"`}, {true, `"outcome": "bypassed"`}} {
		a := args
		if tc.hold {
			a = append(append([]string{}, args...), "--hold-until-plan-end")
		}
		code, out, errOut := runCLI(t, a...)
		if code != 0 || !strings.Contains(out, tc.outcome) {
			t.Errorf("hold %v: exit %d, want 0 and %s; stderr %s\n%s", tc.hold, code, tc.outcome, errOut, out)
		}
	}
}

// A replayed manifest whose parameters are out of range is refused like a
// command line: exit 2, before the replay directory is created.
func TestReplayChecksParams(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if code, _, errOut := runCLI(t, "experiment", "p2p", "--quick", "--set", "exp.writes=4K", "--set", "exp.stream=64K", "--out", dir, "--progress", "none"); code != 0 {
		t.Fatalf("record: exit %d: %s", code, errOut)
	}
	path := filepath.Join(dir, manifestFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), `"stream": "64K"`, `"stream": "0"`, 1)
	if bad == string(b) {
		t.Fatalf("manifest has no stream parameter:\n%s", b)
	}
	os.WriteFile(path, []byte(bad), 0o644)
	out := filepath.Join(t.TempDir(), "replay")
	code, _, errOut := runCLI(t, "experiment", "--manifest", path, "--out", out)
	if code != 2 || !strings.Contains(errOut, `exp.stream: "0" is not a size`) {
		t.Errorf("exit %d, stderr %q; want 2 and the exp.stream range", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the replay directory was created (stat: %v)", err)
	}
}
