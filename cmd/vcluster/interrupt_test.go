package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// childEnv makes the test binary run as the vcluster command (TestMain),
// so that a test can signal a real process.
const childEnv = "VCLUSTER_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	seedsDefault = 1 // see seedsDefault
	if os.Getenv(childEnv) == "1" {
		main() // os.Args are the vcluster arguments
		return
	}
	os.Exit(m.Run())
}

// signalRun starts vcluster args in a child process, waits for a stderr
// line matching ready, sends sig and returns the exit status and all of
// stderr.
func signalRun(t *testing.T, sig os.Signal, ready *regexp.Regexp, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout = io.Discard
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	seen := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(pr)
		signalled := false
		for s.Scan() {
			all.WriteString(s.Text() + "\n")
			if !signalled && ready.MatchString(s.Text()) {
				signalled = true
				close(seen)
			}
		}
	}()
	select {
	case <-seen:
	case <-done:
		cmd.Wait()
		t.Fatalf("%v ended before it printed a line matching %s:\n%s", args, ready, all.String())
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%v: no line matching %s in 2 minutes", args, ready)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { <-done; waited <- cmd.Wait() }()
	select {
	case err = <-waited:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-waited // the reader is done with all
		t.Fatalf("%v: still running a minute after %v:\n%s", args, sig, all.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), all.String()
}

// SIGINT in the middle of an experiment stops it at the next event
// boundary: exit status 130, one line saying where, and a manifest with
// status "interrupted" (not "started", and no failed rows).
func TestInterruptExperiment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	// 16M: each point takes about a second, the signal comes early in
	// the second point.
	code, errOut := signalRun(t, os.Interrupt, regexp.MustCompile(`^\[allreduce-loss\] point 2/12 `),
		"experiment", "allreduce-loss", "--set", "exp.size=16M", "--progress", "log", "--out", dir)
	if code != exitInterrupted {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, exitInterrupted, errOut)
	}
	re := regexp.MustCompile(`^vcluster: interrupted at virtual time [0-9]+\.[0-9]{3} ms \(point [2-9] of 12: [^)]+\); (partial results|manifest) in ` + regexp.QuoteMeta(dir))
	if l := lastLine(errOut); !re.MatchString(l) {
		t.Errorf("last stderr line %q does not match %s", l, re)
	}
	if n := strings.Count(errOut, "vcluster: interrupted"); n != 1 {
		t.Errorf("%d interrupt lines, want 1:\n%s", n, errOut)
	}
	if strings.Contains(errOut, "rows failed") || strings.Contains(errOut, "FAILED") {
		t.Errorf("an interrupted run is reported as failed:\n%s", errOut)
	}
	if m := readManifest(t, dir); m.Status != "interrupted" {
		t.Errorf("manifest status %q, want interrupted", m.Status)
	}
	// The points that completed are the partial results; the one that was
	// running is not among them.
	csv, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatalf("no partial results: %v", err)
	}
	rows := strings.Split(strings.TrimSpace(string(csv)), "\n")[1:]
	if len(rows) == 0 || len(rows) >= 9 || strings.Contains(string(csv), "stalled") {
		t.Errorf("partial results.csv has %d rows (want 1..8, none stalled):\n%s", len(rows), csv)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, "report.md")); !strings.Contains(string(md), "Interrupted") {
		t.Errorf("report.md does not say it is partial")
	}
}

// SIGTERM does the same for `vcluster run`, here during the experiment
// after the preflight.
func TestInterruptRunSIGTERM(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, errOut := signalRun(t, syscall.SIGTERM, regexp.MustCompile(`^\[allreduce-loss\] point 1/12 `),
		"run", "--progress", "log", "--out", dir)
	if code != exitInterrupted {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, exitInterrupted, errOut)
	}
	if l := lastLine(errOut); !strings.HasPrefix(l, "vcluster: interrupted at virtual time ") || !strings.Contains(l, "of 12: ") {
		t.Errorf("last stderr line %q, want the interrupt line with the point", l)
	}
	if m := readManifest(t, dir); m.Status != "interrupted" {
		t.Errorf("manifest status %q, want interrupted", m.Status)
	}
}

// An interrupted collective or drill (sim.Interrupt before the loop runs:
// every run returns at once) exits 130 and is not reported as a stall.
func TestInterruptCollectiveAndDrill(t *testing.T) {
	defer sim.ResetInterrupt()
	for _, args := range [][]string{
		{"collective", "--hosts", "4", "--sizes", "64K:1M"},
		{"drill", "--scenario", "t1-reboot", "--preset", "C"},
		{"bench", "p2p", "--size", "1M", "--loss", "0"},
	} {
		sim.Interrupt()
		code, _, errOut := runCLI(t, args...)
		sim.ResetInterrupt()
		if code != exitInterrupted {
			t.Errorf("%v: exit status %d, want %d; stderr:\n%s", args, code, exitInterrupted, errOut)
		}
		if l := lastLine(errOut); !strings.HasPrefix(l, "vcluster: interrupted") {
			t.Errorf("%v: last line %q, want the interrupt line", args, l)
		}
		if strings.Contains(errOut, "stalled") || strings.Contains(errOut, "drill failed") {
			t.Errorf("%v: reported as a failure:\n%s", args, errOut)
		}
	}
}
