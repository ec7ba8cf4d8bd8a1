package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestDrillCommand(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte(`events:
  - at: 300us
    duration: 1ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
`), 0o644)
	logf := filepath.Join(dir, "events.jsonl")
	code, out, errOut := runCLI(t, "drill", "--plan", plan, "--preset", "C", "--bytes", "33554432", "--log", logf)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{"1 completed (1 verified byte for byte", "link_down", "bypassed", "→ completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	b, err := os.ReadFile(logf)
	if err != nil || !strings.Contains(string(b), `"event":"inject"`) || !strings.Contains(string(b), `"event":"recovered"`) {
		t.Errorf("event log: %v\n%s", err, b)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("events:\n  - at: 1ms\n    kind: link_down\n    target: link:p1.t0.0-p1.t1.9\n"), 0o644)
	code, _, errOut = runCLI(t, "drill", "--plan", bad, "--preset", "C")
	if code != 2 || !strings.Contains(errOut, "bad.yaml:2:") {
		t.Errorf("bad plan: exit %d, stderr %q", code, errOut)
	}
}

// vcluster drill --parallel N prints the same summary and writes the same
// event log for every N ≥ 1: a plan that cuts a T0–T1 link (a link between
// partitions), reboots a T1 (every one of its links is cut) and loses
// frames, with Clustermapper and the controller on.
func TestDrillParallelIdentical(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte(`events:
  - at: 30us
    duration: 1500us
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
  - at: 60us
    kind: switch_reboot
    target: switch:p2.t1.1
    params: {boot: 1ms}
  - at: 80us
    duration: 1ms
    kind: loss
    target: link:p3.t0.1-p3.t1.0
    params: {rate: 2%}
`), 0o644)
	var ref, refLog string
	for _, n := range []string{"1", "2", "4"} {
		logf := filepath.Join(dir, "events"+n+".jsonl")
		code, out, errOut := runCLI(t, "drill", "--plan", plan, "--preset", "C", "--set", "fabric.hosts=16", "--set", "fabric.hostsPerT0=2",
			"--workload", "shift", "--bytes", "8388608", "--baseline=false", "--period", "200us", "--log", logf, "--json", "--parallel", n)
		if code != 0 {
			t.Fatalf("--parallel %s: exit %d: %s", n, code, errOut)
		}
		b, err := os.ReadFile(logf)
		if err != nil {
			t.Fatal(err)
		}
		if n == "1" {
			var s struct {
				Completed, Transfers int
				Findings, Denylist   []string
			}
			if err := json.Unmarshal([]byte(out), &s); err != nil || s.Transfers != 16 || s.Completed != 16 || len(s.Findings) == 0 || len(s.Denylist) == 0 {
				t.Fatalf("--parallel 1: %+v (%v)\n%s", s, err, out)
			}
			for _, ev := range []string{`"inject"`, `"recovered"`, `"located"`, `"deny_pushed"`} {
				if !strings.Contains(string(b), `"event":`+ev) {
					t.Errorf("event log lacks %s", ev)
				}
			}
			ref, refLog = out, string(b)
			continue
		}
		if out != ref {
			t.Errorf("--parallel %s: summary differs:\n%s\nwant (--parallel 1)\n%s", n, out, ref)
		}
		if string(b) != refLog {
			t.Errorf("--parallel %s: events.jsonl differs from --parallel 1's", n)
		}
	}
}

// --bytes takes units like every size flag (issue #15: "drill --bytes 4M"
// was refused), and --progress shows the baseline and the run under the
// plan as the drill's two points.
func TestDrillBytesUnitsAndProgress(t *testing.T) {
	code, out, errOut := runCLI(t, "drill", "--scenario", "t1-reboot", "--preset", "C", "--bytes", "4M", "--json", "--progress", "log")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s struct{ Bytes uint64 }
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Bytes != 4<<20 {
		t.Errorf("summary bytes %d (%v), want %d", s.Bytes, err, 4<<20)
	}
	if !regexp.MustCompile(`\[drill\] point 1/2 fault-free baseline .*\n\[drill\] point 2/2 under the fault plan .*\n\[drill\] done, 2 points, [1-9]\d* events`).MatchString(errOut) {
		t.Errorf("progress lines:\n%s", errOut)
	}
	code, _, errOut = runCLI(t, "drill", "--scenario", "t1-reboot", "--preset", "C", "--bytes", "1M", "--baseline=false", "--progress", "log")
	if code != 0 || !strings.Contains(errOut, "[drill] point 1/1 under the fault plan") || strings.Contains(errOut, "baseline") {
		t.Errorf("--baseline=false: exit %d, progress lines:\n%s", code, errOut)
	}
}

// --metrics serves the counters of the cluster under the plan.
func TestDrillMetrics(t *testing.T) {
	observedRun(t, "drill", 4<<20, "drill", "--scenario", "t1-reboot", "--preset", "C", "--bytes", "4M", "--baseline=false")
}
