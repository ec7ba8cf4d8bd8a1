package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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

// fakeExperiment is an experiment for report tests: it runs nothing.
var fakeExperiment = &Experiment{Name: "fake", Title: "a fake", Targets: []string{"T0"},
	Setup:  "Setup with `code`, **bold**\n\n```\nraw & <pre>\n```\n\n- one\n- two",
	Params: []Param{{Key: "k", Default: "1"}},
	Args: Typed[struct{}]{
		Read: func(*Env) (struct{}, error) { return struct{}{}, nil },
		Run:  func(context.Context, *Env, struct{}) (*Results, error) { return nil, nil },
	}}

// report.html from WriteReport: the prose rendered (no fence left, the
// code block a <pre>), the results and checks as tables, one inline SVG
// per plot; ReplaceReportSVGs swaps a plot's SVG for a redrawn one and
// the page stays clean.
func TestReportHTML(t *testing.T) {
	dir := t.TempDir()
	plots := testPlots()
	r := &Results{Columns: []string{"transport", "busbw"}, Rows: [][]string{{"MRC", "46.9"}, {"RoCE", "12.1"}}, Table: "transport busbw\nMRC 46.9\n",
		Checks: []Check{{Target: "T0", Claim: "c", Expected: "e", Measured: "m", Pass: true}}, Plots: plots,
		Notes: "**Note**: see `x`.\n\n| a | b |\n|---|---|\n| 1 | 2 |"}
	env := &Env{Size: Quick, Params: map[string]string{"k": "1"}}
	files, err := WriteReport(dir, fakeExperiment, env, r, "cluster X")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"plots.json", "throughput_over_time.csv", "capacity_lost.csv", "bandwidth_vs_write.csv", "report.html"} {
		if !slices.Contains(files, f) {
			t.Errorf("WriteReport wrote %v, not %s", files, f)
		}
	}
	h, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	l := LintReportHTML(h)
	if len(l.Problems) > 0 || l.SVGs != len(plots) || l.Tables["results"] != 3 || l.Tables["checks"] != 2 || l.Tables[""] != 2 {
		t.Errorf("report.html: %+v", l)
	}
	for _, want := range []string{"<pre>raw &amp; &lt;pre&gt;\n</pre>", "<code>code</code>", "<strong>bold</strong>", "<li>two</li>", "<strong>Note</strong>", `<td class="num">46.9</td>`} {
		if !strings.Contains(string(h), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "Data: [capacity_lost.csv](capacity_lost.csv)") {
		t.Errorf("report.md does not link the CSVs:\n%s", md)
	}
	p := plots[1]
	p.Title = "a new title"
	svg, _ := RenderPlotAs(p, "svg")
	h2, n := ReplaceReportSVGs(h, map[string][]byte{p.Name: svg, "nosuch": svg})
	l2 := LintReportHTML(h2)
	if n != 1 || len(l2.Problems) > 0 || l2.SVGs != len(plots) || !bytes.Contains(h2, inlineSVG(svg)) || bytes.Equal(h, h2) {
		t.Errorf("ReplaceReportSVGs: %d replaced, %+v", n, l2)
	}
}
