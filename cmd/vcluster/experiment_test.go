package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/experiments"
)

// `vcluster run` (quick size) completes, writes every file, and its check
// table is not empty; the manifest records the experiment.
func TestRunWritesReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, out, errOut := runCLI(t, "run", "--quick", "--out", dir)
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	for _, want := range []string{"zero-load", "allreduce-loss", "MRC, 1 QP", "RoCE, 8 QPs", "check:", "T2", "T3"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"manifest.json", "config.yaml", "results.csv", "results.json", "report.md", "report.html",
		"busbw_vs_loss.png", "busbw_vs_loss.svg", "pings.csv", "counters.csv", "topology.dot"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "Fabric check (preflight)") || strings.Count(string(md), "| T") < 1 {
		t.Errorf("report.md lacks the preflight or the check table:\n%s", md)
	}
	var m manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Experiment != experiments.DefaultName || m.Size != experiments.Quick || m.WallSeconds <= 0 || m.Events == 0 || m.ChecksPassed == nil || m.Params["size"] == "" {
		t.Errorf("manifest = %+v", m)
	}
	// An unknown experiment parameter is a usage error.
	if code, _, errOut := runCLI(t, "run", "--out", filepath.Join(t.TempDir(), "x"), "--set", "exp.nope=1"); code != 2 || !strings.Contains(errOut, "exp.nope") {
		t.Errorf("exp.nope: exit %d, %s", code, errOut)
	}
}

func TestExperimentCommand(t *testing.T) {
	code, out, errOut := runCLI(t, "experiment", "list")
	if code != 0 {
		t.Fatalf("list exited %d: %s", code, errOut)
	}
	for _, n := range experiments.Names() {
		if !strings.Contains(out, n) {
			t.Errorf("list lacks %s:\n%s", n, out)
		}
	}
	dir := t.TempDir()
	code, out, errOut = runCLI(t, "experiment", "all", "--quick", "--out", dir)
	if code != 0 {
		t.Fatalf("all --quick exited %d: %s", code, errOut)
	}
	for _, n := range experiments.Names() {
		passed, err := readManifestPassed(filepath.Join(dir, n))
		if err != nil {
			t.Errorf("%s: %v", n, err)
		} else if !passed {
			t.Errorf("%s --quick: the shape differs from TARGETS:\n%s", n, out)
		}
	}
	for _, args := range [][]string{{"experiment"}, {"experiment", "nosuch"}, {"experiment", "list", "--quick", "--full"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}
