package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/experiments"
)

// `vcluster run` (quick size) completes and writes every file of the
// report directory, each of which is what it claims to be: results.csv
// and results.json hold the same 12 cells (3 transports × 3 losses), every
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
		"busbw_vs_loss.png", "busbw_vs_loss.svg", "busbw_vs_loss.csv", "plots.json", "pings.csv", "counters.csv", "topology.dot"}
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

	// results.csv and results.json: the same 12 cells.
	f, _ := os.Open(filepath.Join(dir, "results.csv"))
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatalf("results.csv: %v", err)
	}
	if len(rows) != 1+12 || !slices.Equal(rows[0][:4], []string{"transport", "qps", "loss", "ranks"}) {
		t.Fatalf("results.csv: header %v and %d rows, want 12", rows[0], len(rows)-1)
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
	if res.Experiment != experiments.DefaultName || len(res.Rows) != 12 || res.Rows[11]["transport"] != rows[12][0] || len(res.Checks) == 0 {
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
	// report.html: self-contained, one inline SVG plot, the same results
	// and checks as tables.
	h, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	l := experiments.LintReportHTML(h)
	if len(l.Problems) > 0 || l.SVGs != 1 || l.Tables["checks"] != len(res.Checks)+1 || l.Tables["results"] != 12+1 {
		t.Errorf("report.html: %d SVGs, tables %v for %d checks, problems %v", l.SVGs, l.Tables, len(res.Checks), l.Problems)
	}
	// The plot's data reads back as the plot the report drew.
	plots, err := experiments.ReadPlots(dir)
	if err != nil || len(plots) != 1 || plots[0].Name != "busbw_vs_loss" || len(plots[0].Series) != 4 {
		t.Errorf("ReadPlots = %d plots, %v", len(plots), err)
	} else if png, err := experiments.RenderPlotAs(plots[0], "png"); err != nil || !bytes.Equal(png, mustRead(t, filepath.Join(dir, "busbw_vs_loss.png"))) {
		t.Errorf("busbw_vs_loss.png redrawn from its CSV differs from the run's (%v)", err)
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

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
	checkAllIndex(t, dir, out)
	for _, args := range [][]string{{"experiment"}, {"experiment", "nosuch"}, {"experiment", "list", "--quick", "--full"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}

// checkAllIndex checks what `experiment all` wrote besides the
// experiments: the summary table on stdout (a line per experiment with
// its own manifest's events and wall time, and the totals) and
// index.html/index.md (every experiment linked, every check in one
// table, self-contained apart from the links).
func checkAllIndex(t *testing.T, dir, out string) {
	t.Helper()
	_, summary, ok := strings.Cut(out, "summary:\n")
	if !ok {
		t.Fatalf("no summary table in the output:\n%s", out)
	}
	var total uint64
	checks := 0
	for _, n := range experiments.Names() {
		e, err := experiments.ReadIndexEntry(dir, n)
		if err != nil {
			t.Fatal(err)
		}
		total += e.Manifest.Events
		checks += len(e.Checks)
		p, d := e.Verdicts()
		untestable := ""
		if u := len(e.Checks) - p - d; u > 0 {
			untestable = fmt.Sprintf(", %d not testable", u)
		}
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^%s +%s +%d pass, %d differ%s +[0-9.]+ s +%d +%s$`,
			regexp.QuoteMeta(n), regexp.QuoteMeta(strings.Join(e.Manifest.TargetRows, ",")), p, d, untestable, e.Manifest.Events, regexp.QuoteMeta(e.State())))
		if !re.MatchString(summary) || e.Manifest.Events == 0 {
			t.Errorf("summary has no line %s (its manifest's checks, events and status):\n%s", re, summary)
		}
	}
	if !strings.Contains(summary, fmt.Sprintf("total (%d)", len(experiments.Names()))) || !strings.Contains(summary, " "+strconv.FormatUint(total, 10)+" ") {
		t.Errorf("summary lacks the total of %d events:\n%s", total, summary)
	}
	h := mustRead(t, filepath.Join(dir, "index.html"))
	l := experiments.LintIndexHTML(h)
	for _, p := range l.Problems {
		t.Errorf("index.html: %s", p)
	}
	if l.Tables["experiments"] != len(experiments.Names())+1 || l.Tables["checks"] != checks+1 {
		t.Errorf("index.html tables %v, want %d experiments and %d checks (and headers)", l.Tables, len(experiments.Names()), checks)
	}
	if len(l.Links) != len(experiments.Names()) {
		t.Errorf("index.html links %v, want one per experiment", l.Links)
	}
	for _, href := range l.Links {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(href))); err != nil || !strings.HasSuffix(href, "/report.html") {
			t.Errorf("index.html links %s: %v", href, err)
		}
	}
	if md := mustRead(t, filepath.Join(dir, "index.md")); !bytes.Contains(md, []byte("](allreduce-loss/report.md)")) {
		t.Errorf("index.md does not link allreduce-loss's report:\n%s", md)
	}
	// Events are each experiment's own: the last one run alone counts
	// the same (same config and seed), not the sum of those before it.
	last := experiments.Names()[len(experiments.Names())-1]
	alone := filepath.Join(t.TempDir(), last)
	if code, _, errOut := runCLI(t, "experiment", last, "--quick", "--out", alone); code != 0 {
		t.Fatalf("%s alone exited %d: %s", last, code, errOut)
	}
	a, _ := experiments.ReadIndexEntry(filepath.Dir(alone), last)
	b, _ := experiments.ReadIndexEntry(dir, last)
	if a.Manifest.Events == 0 || a.Manifest.Events != b.Manifest.Events {
		t.Errorf("%s: %d events alone, %d within experiment all", last, a.Manifest.Events, b.Manifest.Events)
	}
}

// --seeds N judges every check on N seeds: results.json's checks carry one
// value per seed (seed, seed+1, …), results.csv every seed's rows, the
// manifest the count; --seeds out of range is refused before anything runs.
func TestSeedsFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p2p")
	code, _, errOut := runCLI(t, "experiment", "p2p", "--quick", "--seeds", "3", "--seed", "5", "--set", "exp.writes=32K", "--set", "exp.stream=1M", "--out", dir, "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Checks []experiments.Check `json:"checks"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || json.Unmarshal(b, &res) != nil || len(res.Checks) == 0 {
		t.Fatalf("results.json: %v %s", err, b)
	}
	for _, c := range res.Checks {
		if !c.Testable() {
			continue
		}
		if want := []uint64{5, 6, 7}; !slices.Equal(c.Seeds, want) || len(c.Values) != 3 {
			t.Errorf("%s: seeds %v values %v, want seeds %v", c.Claim, c.Seeds, c.Values, want)
		}
	}
	rows, err := csv.NewReader(bytes.NewReader(must(os.ReadFile(filepath.Join(dir, "results.csv"))))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seedCol := slices.Index(rows[0], experiments.SeedColumn)
	seen := map[string]int{}
	for _, r := range rows[1:] {
		seen[r[seedCol]]++
	}
	if len(seen) != 3 || seen["5"] == 0 || seen["5"] != seen["7"] {
		t.Errorf("results.csv rows per seed %v, want seeds 5, 6, 7 alike", seen)
	}
	var m experiments.Manifest
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err != nil || json.Unmarshal(b, &m) != nil || m.Seeds != 3 || m.Seed != 5 {
		t.Errorf("manifest seed %d seeds %d (%v)", m.Seed, m.Seeds, err)
	}
	for _, bad := range []string{"0", "17"} {
		out := filepath.Join(t.TempDir(), "never")
		if code, _, errOut := runCLI(t, "experiment", "p2p", "--seeds", bad, "--out", out); code != 2 || !strings.Contains(errOut, "--seeds") {
			t.Errorf("--seeds %s: exit %d, %s", bad, code, errOut)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("--seeds %s wrote %s", bad, out)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
