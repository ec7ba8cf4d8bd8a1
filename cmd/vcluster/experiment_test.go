package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/experiments"
)

// `vcluster run` (quick size) completes and writes every file of the
// report directory, each of which is what it claims to be: results.csv
// and results.json hold the same 9 cells (3 transports × 3 losses), every
// byte check of a cell passed or was elided, the check table (md, html,
// json) is not empty and agrees, report.html is self-contained, the plots
// decode, and the manifest lists the files and records the run.
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
	files := []string{"manifest.json", "config.yaml", "results.csv", "results.json", "report.md", "report.html",
		"busbw_vs_loss.png", "busbw_vs_loss.svg", "pings.csv", "counters.csv", "topology.dot"}
	for _, f := range files {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	var m manifest
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Experiment != experiments.DefaultName || m.Command != "run" || m.Size != experiments.Quick || m.WallSeconds <= 0 || m.Events == 0 ||
		m.ChecksPassed == nil || m.Params["size"] == "" || !strings.HasPrefix(m.Status, "experiment allreduce-loss (quick) ran") {
		t.Errorf("manifest = %+v", m)
	}
	slices.Sort(files)
	listed := slices.Sorted(slices.Values(m.Files))
	if !slices.Equal(listed, files) {
		t.Errorf("manifest lists files %v, want %v", listed, files)
	}

	// results.csv and results.json: the same 9 cells.
	f, _ := os.Open(filepath.Join(dir, "results.csv"))
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatalf("results.csv: %v", err)
	}
	if len(rows) != 1+9 || !slices.Equal(rows[0][:4], []string{"transport", "qps", "loss", "ranks"}) {
		t.Fatalf("results.csv: header %v and %d rows, want 9", rows[0], len(rows)-1)
	}
	col := map[string]int{}
	for i, c := range rows[0] {
		col[c] = i
	}
	for _, r := range rows[1:] {
		if r[col["error"]] != "" || (r[col["check"]] != collectives.CheckOK && r[col["check"]] != collectives.CheckSkipped) || r[col["ranks"]] != "16" {
			t.Errorf("results.csv row %v", r)
		}
		if bw, err := strconv.ParseFloat(r[col["busbw_GBps"]], 64); err != nil || bw <= 0 {
			t.Errorf("results.csv busbw %q", r[col["busbw_GBps"]])
		}
	}
	var res struct {
		Experiment string              `json:"experiment"`
		Rows       []map[string]string `json:"rows"`
		Checks     []experiments.Check `json:"checks"`
	}
	b, _ = os.ReadFile(filepath.Join(dir, "results.json"))
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if res.Experiment != experiments.DefaultName || len(res.Rows) != 9 || res.Rows[8]["transport"] != rows[9][0] || len(res.Checks) == 0 {
		t.Errorf("results.json: %s, %d rows, %d checks", res.Experiment, len(res.Rows), len(res.Checks))
	}
	for _, c := range res.Checks {
		if c.Target == "" || c.Claim == "" || c.Expected == "" || c.Measured == "" {
			t.Errorf("check with an empty field: %+v", c)
		}
	}

	// report.md: the preflight and a check table row per check.
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if !strings.Contains(string(md), "Fabric check (preflight)") || !strings.Contains(string(md), "![") {
		t.Errorf("report.md lacks the preflight or the plot:\n%s", md)
	}
	for _, c := range res.Checks {
		if !strings.Contains(string(md), "| "+c.Target+" | "+c.Claim+" | ") {
			t.Errorf("report.md check table lacks %s %q", c.Target, c.Claim)
		}
	}
	// report.html: self-contained, one embedded plot, the same checks.
	h, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	imgs, trs, problems := experiments.LintReportHTML(h)
	if len(problems) > 0 || imgs != 1 || trs != len(res.Checks)+1 {
		t.Errorf("report.html: %d images, %d rows for %d checks, problems %v", imgs, trs, len(res.Checks), problems)
	}
	// The plots are images.
	pf, _ := os.Open(filepath.Join(dir, "busbw_vs_loss.png"))
	if c, err := png.DecodeConfig(pf); err != nil || c.Width < 100 {
		t.Errorf("busbw_vs_loss.png: %v %+v", err, c)
	}
	pf.Close()
	if svg, _ := os.ReadFile(filepath.Join(dir, "busbw_vs_loss.svg")); !bytes.Contains(svg, []byte("<svg")) {
		t.Error("busbw_vs_loss.svg is not SVG")
	}
	// The preflight files: a ping per plane and pair, all answered.
	pings, _ := os.ReadFile(filepath.Join(dir, "pings.csv"))
	if n := strings.Count(string(pings), ",true\n"); n != 8 || strings.Contains(string(pings), ",false") {
		t.Errorf("pings.csv has %d answered pings, want 8:\n%s", n, pings)
	}
	if dot, _ := os.ReadFile(filepath.Join(dir, "topology.dot")); !bytes.HasPrefix(bytes.TrimSpace(dot), []byte("graph")) && !bytes.Contains(dot, []byte("graph ")) {
		t.Errorf("topology.dot is not Graphviz: %.80s", dot)
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
	for _, n := range append(experiments.Names(), "also: loss-sweep") {
		if !strings.Contains(out, n) {
			t.Errorf("list lacks %s:\n%s", n, out)
		}
	}
	dir := t.TempDir()
	code, out, errOut = runCLI(t, "experiment", "all", "--quick", "--out", dir)
	if code != 0 {
		t.Fatalf("all --quick exited %d: %s", code, errOut)
	}
	// Whether each shape holds is experiments.TestQuickRunsPass's job (it
	// knows the documented findings); here: every experiment wrote its
	// manifest, and the closing line names exactly those that differ.
	var differs []string
	for _, n := range experiments.Names() {
		passed, err := readManifestPassed(filepath.Join(dir, n))
		if err != nil {
			t.Errorf("%s: %v", n, err)
		} else if !passed {
			differs = append(differs, n)
		}
	}
	if len(differs) > 0 {
		if want := "shape differs from TARGETS in: " + strings.Join(differs, ", "); !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	} else if strings.Contains(out, "shape differs") {
		t.Errorf("every manifest passed, but the output says otherwise:\n%s", out)
	}
	for _, args := range [][]string{{"experiment"}, {"experiment", "nosuch"}, {"experiment", "list", "--quick", "--full"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}
