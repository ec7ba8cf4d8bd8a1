package experiments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An `experiment all` index from synthetic run directories: one that
// passed, one that differs, one that failed before its report. The
// summary and index.html count each experiment's own events and checks,
// link the reports that exist, and sum the totals.
func TestWriteIndex(t *testing.T) {
	dir := t.TempDir()
	yes, no := true, false
	runs := []struct {
		name   string
		m      Manifest
		checks []Check
		report bool
	}{
		{"alpha", Manifest{Experiment: "alpha", TargetRows: []string{"T1"}, Status: "experiment alpha (quick) ran; checks: 2 pass, 0 differ", WallSeconds: 1.25, Events: 1000, ChecksPassed: &yes},
			[]Check{{Target: "T1", Claim: "a <holds>", Expected: "x", Measured: "y", Pass: true}, {Target: "T1", Claim: "b", Expected: "x", Measured: "y", Pass: true}}, true},
		{"beta", Manifest{Experiment: "beta", TargetRows: []string{"T2", "T3"}, Status: "experiment beta (quick) ran; checks: 0 pass, 1 differ", WallSeconds: 2, Events: 20, ChecksPassed: &no},
			[]Check{{Target: "T2", Claim: "c", Expected: "more", Measured: "less", Pass: false}}, true},
		{"gamma", Manifest{Experiment: "gamma", TargetRows: []string{"T4"}, Status: "failed: gamma: boom", WallSeconds: 0.5}, nil, false},
	}
	var es []IndexEntry
	for _, r := range runs {
		sub := filepath.Join(dir, r.name)
		os.MkdirAll(sub, 0o755)
		if err := WriteManifest(sub, r.m); err != nil {
			t.Fatal(err)
		}
		if r.report {
			b, _ := json.Marshal(map[string]any{"experiment": r.name, "checks": r.checks})
			os.WriteFile(filepath.Join(sub, "results.json"), b, 0o644)
			os.WriteFile(filepath.Join(sub, "report.html"), []byte("x"), 0o644)
		}
		e, err := ReadIndexEntry(dir, r.name)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if s := []string{es[0].State(), es[1].State(), es[2].State()}; s[0] != "pass" || s[1] != "differs" || s[2] != "failed" {
		t.Errorf("states %v, want pass, differs, failed", s)
	}
	sum := SummaryTable(es)
	for _, want := range []string{"alpha", "T2,T3", "2 pass, 0 differ", "1.2 s", "1000", "0 pass, 1 differ", "failed", "total (3)", "2 pass, 1 differ", "3.8 s", "1020"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	files, err := WriteIndex(dir, es)
	if err != nil || len(files) != 2 {
		t.Fatalf("WriteIndex = %v, %v", files, err)
	}
	h, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	l := LintIndexHTML(h)
	if len(l.Problems) > 0 || l.Tables["experiments"] != 4 || l.Tables["checks"] != 4 || strings.Join(l.Links, " ") != "alpha/report.html beta/report.html" {
		t.Errorf("index.html: %+v", l)
	}
	for _, want := range []string{"a &lt;holds&gt;", `class="differs"`, `class="failed"`, "1020 simulation events"} {
		if !strings.Contains(string(h), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "index.md"))
	if !strings.Contains(string(md), "| [alpha](alpha/report.md) |") || !strings.Contains(string(md), "| gamma |") || strings.Count(string(md), "\n| beta | T2 | c |") != 1 {
		t.Errorf("index.md:\n%s", md)
	}
	if _, err := ReadIndexEntry(dir, "none"); err == nil {
		t.Error("an entry without a manifest was read")
	}
}
