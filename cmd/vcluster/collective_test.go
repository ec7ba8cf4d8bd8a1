package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/collectives"
)

func TestCollectiveCommand(t *testing.T) {
	dir := t.TempDir()
	tr, csvF, js := filepath.Join(dir, "t.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	code, out, errOut := runCLI(t, "collective", "--op", "allreduce", "--algo", "ring", "--hosts", "16", "--ranks", "8",
		"--transport", "mrc", "--sizes", "64K:256K", "--trace", tr, "--csv", csvF, "--json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"8 ranks, mrc", "algbw", "busbw", "#wrong", "65536", "131072", "262144", " ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rows []map[string]any
	b, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(b, &rows) != nil || len(rows) != 3 {
		t.Errorf("JSON rows: %v, %d rows", err, len(rows))
	}
	if b, err := os.ReadFile(csvF); err != nil || strings.Count(string(b), "\n") != 4 {
		t.Errorf("CSV: %v\n%s", err, b)
	}
	var doc struct{ TraceEvents []any }
	if b, err := os.ReadFile(tr); err != nil || json.Unmarshal(b, &doc) != nil || len(doc.TraceEvents) == 0 {
		t.Errorf("trace: %v, %d events", err, len(doc.TraceEvents))
	}

	// RoCE, payload elided: the check is skipped and says why.
	code, out, errOut = runCLI(t, "collective", "--op", "alltoall", "--hosts", "16", "--transport", "roce", "--sizes", "1M", "--elide")
	if code != 0 || !strings.Contains(out, "roce") || !strings.Contains(out, "ecmp") || !strings.Contains(out, "skipped") {
		t.Errorf("roce elided: exit %d\n%s%s", code, out, errOut)
	}

	// A workload.
	code, out, errOut = runCLI(t, "collective", "--hosts", "16", "--ranks", "8", "--workload", "allreduce:ring:256K,alltoall:pairwise:128K@4", "--iters", "2")
	if code != 0 || !strings.Contains(out, "mean iteration time") {
		t.Errorf("workload: exit %d\n%s%s", code, out, errOut)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"collective", "--op", "allsum"},
		{"collective", "--algo", "nosuch"},
		{"collective", "--sizes", "1M:1K"},
		{"collective", "--check", "maybe"},
	} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}

// --sizes min:max:factor runs min, then ×factor while ≤ max (nccl-tests'
// -b/-e/-f), and the table ends with nccl-tests' footer: the rows with
// wrong elements and the mean busbw as C's %g prints it.
func TestCollectiveSizeSteps(t *testing.T) {
	js := filepath.Join(t.TempDir(), "r.json")
	code, out, errOut := runCLI(t, "collective", "--hosts", "16", "--ranks", "8", "--sizes", "64K:5M:4", "--json", js, "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []collectives.Result
	if b, err := os.ReadFile(js); err != nil || json.Unmarshal(b, &rows) != nil {
		t.Fatalf("JSON rows: %v", err)
	}
	var got []uint64
	var sum float64
	for _, r := range rows {
		got = append(got, r.Bytes)
		sum += r.BusBW
	}
	if want := []uint64{64 << 10, 256 << 10, 1 << 20, 4 << 20}; !reflect.DeepEqual(got, want) {
		t.Errorf("sizes %v, want %v", got, want)
	}
	for _, want := range []string{"# minBytes 65536 maxBytes 5242880 step: 4(factor) warmup iters: 0 iters: 1 validation: 1\n",
		collectives.InPlaceNote + "\n", "out-of-place\n", "# Out of bounds values : 0 OK\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The mean of the rows' busbw, to 6 significant digits and no more.
	m := regexp.MustCompile(`(?m)^# Avg bus bandwidth    : ([0-9.]+) $`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no Avg bus bandwidth line:\n%s", out)
	}
	avg, _ := strconv.ParseFloat(m[1], 64)
	mean := sum / float64(len(rows))
	if digits := len(strings.TrimLeft(strings.Replace(m[1], ".", "", 1), "0")); digits > 6 || math.Abs(avg-mean) > 5e-6*mean {
		t.Errorf("Avg bus bandwidth %s: want the mean %v to 6 significant digits", m[1], mean)
	}
}

// --deadline stops a sweep whose collective is still running at that
// virtual time: exit status 1 naming the size, the iteration and the
// unfinished ranks; the rows done before are printed and written. A
// deadline after the end changes nothing.
func TestCollectiveDeadline(t *testing.T) {
	dir := t.TempDir()
	csvF := filepath.Join(dir, "r.csv")
	args := []string{"collective", "--hosts", "16", "--ranks", "8", "--sizes", "64K:4M", "--progress", "none"}
	code, ref, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	table := func(out string) string { // without the wall-clock line
		return regexp.MustCompile(`(?m)^# simulated .*\n`).ReplaceAllString(out, "")
	}
	if code, out, errOut := runCLI(t, append(args, "--deadline", "10ms")...); code != 0 || table(out) != table(ref) {
		t.Errorf("--deadline 10ms (after the end): exit %d, stderr %s\n%s\nwant\n%s", code, errOut, out, ref)
	}

	code, out, errOut := runCLI(t, append(args, "--deadline", "300us", "--csv", csvF)...)
	if code != 1 {
		t.Fatalf("--deadline 300us: exit %d, want 1; stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	last := lines[len(lines)-1]
	re := regexp.MustCompile(`^vcluster: --deadline 300µs: allreduce/ring (\d+) bytes: not finished by the deadline \(virtual time 0\.300 ms\), iteration 1 of 1: (\d) of 8 ranks unfinished: rank \d at step \d+ of \d+ .*; (\d) complete row\(s\) above, in ` + regexp.QuoteMeta(csvF) + `$`)
	g := re.FindStringSubmatch(last)
	if g == nil {
		t.Fatalf("last stderr line %q does not match %s", last, re)
	}
	done, _ := strconv.Atoi(g[3])
	if done == 0 || done >= 7 || g[1] != strconv.Itoa(64<<10<<done) {
		t.Errorf("stopped at %s bytes after %d rows", g[1], done)
	}
	rows := regexp.MustCompile(`(?m)^ +\d+ +\d+ +float .*  ok$`).FindAllString(out, -1)
	refRows := regexp.MustCompile(`(?m)^ +\d+ +\d+ +float .*  ok$`).FindAllString(ref, -1)
	if len(rows) != done || !reflect.DeepEqual(rows, refRows[:done]) {
		t.Errorf("rows printed before the deadline:\n%v\nwant the first %d of\n%v", rows, done, refRows)
	}
	if b, err := os.ReadFile(csvF); err != nil || strings.Count(string(b), "\n") != done+1 {
		t.Errorf("CSV of the complete rows: %v\n%s", err, b)
	}

	// Not with --workload: refused before anything runs.
	code, out, errOut = runCLI(t, "collective", "--workload", "allreduce:ring:1M", "--deadline", "1ms")
	if code != 2 || out != "" || !strings.Contains(errOut, "--deadline: applies to --op/--sizes sweeps only") {
		t.Errorf("--workload --deadline: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// --progress shows each size (each workload iteration) as a step i of n
// with its ETA on stderr.
func TestCollectiveProgress(t *testing.T) {
	code, _, errOut := runCLI(t, "collective", "--hosts", "16", "--ranks", "8", "--sizes", "64K:1M:4", "--elide", "--progress", "log")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`\[collective\] point 1/3 64K \(elapsed .*\)\n\[collective\] point 2/3 256K \(elapsed .*, ETA .*\)\n\[collective\] point 3/3 1M \(elapsed .*\)\n\[collective\] done, 3 points, [1-9]\d* events`).MatchString(errOut) {
		t.Errorf("progress lines:\n%s", errOut)
	}
	code, _, errOut = runCLI(t, "collective", "--hosts", "16", "--ranks", "8", "--workload", "allreduce:ring:256K", "--iters", "2", "--progress", "log")
	if code != 0 || !regexp.MustCompile(`\[collective\] point 1/2 iteration 1 .*\n\[collective\] point 2/2 iteration 2 .*\n\[collective\] done, 2 points`).MatchString(errOut) {
		t.Errorf("workload: exit %d, progress lines:\n%s", code, errOut)
	}
}

// A bad --progress mode is a usage error before anything runs, on every
// command that has the run flags.
func TestBadProgressRefused(t *testing.T) {
	for _, args := range [][]string{{"collective", "--hosts", "16"}, {"drill", "--scenario", "t1-reboot"}} {
		code, out, errOut := runCLI(t, append(args, "--progress", "fancy")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--progress: want auto, bar, log or none") {
			t.Errorf("%v --progress fancy: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}

// --metrics serves the cluster's counters for the whole sweep, not only
// its first size: the NICs' final tx bytes cover every size's traffic. A
// ring all-reduce makes every one of the 8 ranks send 2·7/8 of the size:
// 14 × (64K + 256K + 1M) payload bytes, headers on top.
func TestCollectiveMetrics(t *testing.T) {
	observedRun(t, "collective", 14.0*(64<<10+256<<10+1<<20), "collective", "--hosts", "16", "--ranks", "8", "--sizes", "64K:1M:4", "--elide")
}

// observedRun runs args with --metrics and checks the final scrape: the
// run is exp and its NICs sent at least minTx bytes.
func observedRun(t *testing.T, exp string, minTx float64, args ...string) {
	t.Helper()
	scrapes, code, stderr := scrapeRun(t, append(args, "--progress", "none", "--metrics-linger", "300ms")...)
	if code != 0 || len(scrapes) == 0 {
		t.Fatalf("exit %d, %d scrapes: %s", code, len(scrapes), stderr)
	}
	last := scrapes[len(scrapes)-1]
	if tx := sum(last, "vcluster_port_tx_bytes_total", `tier="nic"`); tx < minTx {
		t.Errorf("NIC tx bytes %g, below the %g the run sends: counters stopped early", tx, minTx)
	}
	info := `vcluster_run_info{experiment="` + exp + `"}`
	if last[info] != 1 || last["vcluster_events_total"] == 0 {
		t.Errorf("%s = %g, vcluster_events_total = %g; want 1 and some", info, last[info], last["vcluster_events_total"])
	}
}
