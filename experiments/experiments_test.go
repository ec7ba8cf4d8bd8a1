package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

func quickEnv(t *testing.T, e *Experiment, sets ...string) *Env {
	t.Helper()
	cfg, err := config.Load("", e.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ResolveParams(e, Quick, sets)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Config: cfg, Size: Quick, Params: p, Progress: io.Discard}
}

// Every experiment's quick run completes, writes its files, and every
// check of its TARGETS rows holds; a differing row fails the test by name.
// knownDiffers lists the checks whose published shape vcluster measures
// differently at quick size: findings reported in docs/experiments.md, not
// tuned away. The test still asserts them — a listed check that starts to
// pass fails the test, so the list and the docs stay true.
//
// Issue #17 (paper-fidelity) made every check a band around the published
// value, judged on the median of three seeds, on the paper's setups (RoCE
// on one 400G plane, the paper's timing): these are the rows whose median
// lies outside its band at quick size, with why (docs/experiments.md).
var knownDiffers = map[string]string{
	"allreduce-loss: 64M, no loss: one MRC QP beats RoCE 16 QPs (busbw MRC / RoCE 16)":                                                                                                                                 "T2, MRC runs ~3% below RoCE 16 QPs on one 400G plane (uSID's outer header and MRC's per-packet overhead)",
	"allreduce-loss: 64M, no loss: RoCE 1 QP reaches about half of possible (busbw RoCE 1 / MRC 1, %)":                                                                                                                 "T2, RoCE 1 QP fills one 400G plane: a 16-rank ring has no ECMP collision (4 uplinks per T0, one crossing flow)",
	"allreduce-loss: 64M, 0.1% loss: MRC nearly unaffected (busbw kept of its loss-free busbw)":                                                                                                                        "T3, MRC keeps ~77% at 0.1%: one MPR unit stalls behind every hole until its repair",
	"allreduce-loss: 64M, 0.1% loss: RoCE collapses at every QP count (the most any RoCE setup keeps)":                                                                                                                 "T3, RoCE keeps ~66% at 0.1%: on a few-µs RTT go-back-N resends little per loss",
	"allreduce-loss: 64M, 1% loss: RoCE unusable at every QP count (the most any RoCE setup keeps)":                                                                                                                    "T3, RoCE keeps ~15% at 1%",
	"alltoall: no loss: one MRC QP beats every RoCE setup at every size (least over sizes of busbw MRC / best RoCE)":                                                                                                   "T4, MRC ~0.96× RoCE 8/16 QPs on one 400G plane",
	"alltoall: 16M, no loss: RoCE 16 QPs slightly worse than 1 QP (busbw RoCE 16 / RoCE 1)":                                                                                                                            "T4, RoCE 16 QPs ~2.2× 1 QP: one QP's go-back-N and DCQCN cap a direct all-to-all's 15 peers less than 16 QPs",
	"alltoall: 16M, 0.1% loss, RoCE, 8 QPs: all-to-all more loss-tolerant than ring (busbw kept, all-to-all / ring)":                                                                                                   "T4, RoCE 8 QPs: all-to-all keeps less than ring at 0.1% (median 0.94×)",
	"alltoall: 16M, 0.1% loss, RoCE, 16 QPs: all-to-all more loss-tolerant than ring (busbw kept, all-to-all / ring)":                                                                                                  "T4, RoCE 16 QPs: all-to-all keeps less than ring at 0.1% (0.74×)",
	"blast-radius: one T0–T1 link, 8x100G: the job loses 1/(planes × T1s) of its throughput":                                                                                                                           "T8, 0.39% is below the job's seed-to-seed noise (1.1–2.9% across seeds at quick)",
	"blast-radius: one T0–T1 link, 1x800G: the job loses 1/(planes × T1s) of its throughput":                                                                                                                           "T8, one 800G plane loses ~5%, not 3.1%: MRC carries ~97% of what the remaining uplinks could",
	"collateral: RoCE+DCQCN 1 QP: victim's mean throughput during the incast":                                                                                                                                          "T5, the victim keeps ~23%, not ~75%: the incast still fires PFC and the victim shares the paused T1 downlink (≈ PFC alone, 98 Gb/s)",
	"dcqcn-tuning: more aggressive: settled throughput shortfall at the last hop":                                                                                                                                      "T6, settled, the more aggressive setting loses ~1%, not ~10%",
	"dcqcn-tuning: most aggressive: settled throughput shortfall at the last hop":                                                                                                                                      "T6, settled, the most aggressive setting loses ~6%, not ~20%",
	"failover: MRC, destination-side cut: traffic leaves the cut link within a few tens of µs (cut → last data frame into it)":                                                                                         "T7, MRC leaves a destination-side cut in ~64 µs: the loss shows at the far end, a round trip later",
	"flapping: job throughput drop while four links flap":                                                                                                                                                              "T9, MRC loses ~3% during the flaps, not ~25%: detect–avoid–revive costs less than the production job's",
	"path-quality: ring, elephant-during, period 100 µs: the other T0s halve their share of the bad path within one sample, one advertisement and two control delays of the onset (mean reaction, every trial)":        "seed 003, only some trials halve the elephant path's share within the job: measured utilization barely tells it from the job's own load",
	"path-quality: permutation, elephant-during, period 100 µs: the other T0s halve their share of the bad path within one sample, one advertisement and two control delays of the onset (mean reaction, every trial)": "seed 003, as the ring's",
	"permutation: random permutation, ECMP one path per flow: mean per-flow goodput ~40–55% of line rate (of a lone flow of the same transport: line rate less headers)":                                               "fabric facts, ECMP reaches ~59% on 16 hosts: collisions alone leave 72% here (fluid model); 40–55% is a larger fabric's",
}

func TestQuickRunsPass(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			e, _ := Lookup(name)
			dir := t.TempDir()
			env := quickEnv(t, e)
			env.Seeds = DefaultSeeds
			rec := &recorder{}
			env.Observer = rec
			r, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{})
			if err != nil {
				t.Fatal(err)
			}
			rec.check(t)
			t.Logf("\n%s\n%s", r.Table, CheckTable(r.Checks))
			if len(r.Checks) == 0 {
				t.Fatal("empty check table")
			}
			for _, c := range r.Checks {
				known, listed := knownDiffers[name+": "+c.Claim]
				if !c.Testable() {
					if listed {
						t.Errorf("%s %q is not testable here (%s): remove it from knownDiffers", c.Target, c.Claim, c.NotTestable)
					}
					continue
				}
				// Every claim states its band and why (issue #17): a bare
				// yes/no check must say why a yes/no is the claim.
				if c.Band == nil || c.Band.Why == "" || c.Band.Why == legacyWhy {
					t.Errorf("%s %q has no band with a reason", c.Target, c.Claim)
				}
				if len(c.Seeds) != DefaultSeeds {
					t.Errorf("%s %q was stated by %d seeds (%v), want all %d", c.Target, c.Claim, len(c.Seeds), c.Seeds, DefaultSeeds)
				}
				switch {
				case !c.Pass && listed:
					t.Logf("differs (known finding, docs/experiments.md: %s): %s %q: expected %s, measured %s", known, c.Target, c.Claim, c.Expected, c.Measured)
				case !c.Pass:
					t.Errorf("differs: %s %q: expected %s, measured %s", c.Target, c.Claim, c.Expected, c.Measured)
				case listed:
					t.Errorf("%s %q now passes (measured %s): remove it from knownDiffers and update docs/experiments.md", c.Target, c.Claim, c.Measured)
				}
			}
			for _, f := range []string{"manifest.json", "results.csv", "results.json", "report.md", "report.html"} {
				if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
					t.Errorf("%s: %v", f, err)
				}
			}
			for _, p := range r.Plots {
				for _, ext := range []string{".png", ".svg"} {
					if _, err := os.Stat(filepath.Join(dir, p.Name+ext)); err != nil {
						t.Error(err)
					}
				}
			}
			checkHTML(t, filepath.Join(dir, "report.html"), r)
		})
	}
}

// checkHTML lints the report (LintReportHTML: well-formed XHTML, plots as
// inline SVG, nothing external) and checks it shows every plot, the
// results table with a row per result and the check table with a row per
// check.
func checkHTML(t *testing.T, path string, r *Results) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l := LintReportHTML(b)
	for _, p := range l.Problems {
		t.Errorf("report.html: %s", p)
	}
	if l.SVGs != len(r.Plots) {
		t.Errorf("report.html has %d inline SVGs, want %d plots", l.SVGs, len(r.Plots))
	}
	if l.Tables["checks"] != len(r.Checks)+1 {
		t.Errorf("report.html check table has %d rows, want a header and %d checks", l.Tables["checks"], len(r.Checks))
	}
	if l.Tables["results"] != len(r.Rows)+1 {
		t.Errorf("report.html results table has %d rows, want a header and %d results", l.Tables["results"], len(r.Rows))
	}
}

// The HTML lint catches what it is there to catch (so that a report that
// broke its promises would fail TestQuickRunsPass).
func TestLintReportHTML(t *testing.T) {
	_, svg, err := RenderPlot(Plot{Name: "x", Series: []Series{{Name: "s", X: []float64{0, 1}, Y: []float64{1, 2}}}})
	if err != nil {
		t.Fatal(err)
	}
	fig := string(inlineSVG(svg))
	doc := func(body string) []byte {
		return []byte(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml"><head><meta charset="utf-8"/><title>t</title><style>td{border:1px solid}</style></head><body>` + body + `</body></html>`)
	}
	table := `<table id="checks"><thead><tr><th>h</th><th>i</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>`
	good := doc(`<p>a &amp; b &mdash; c</p><figure>` + fig + `</figure>` + table + `<pre>x</pre><script>//<![CDATA[
var a = 1 < 2;
//]]></script>`)
	if l := LintReportHTML(good); len(l.Problems) > 0 || l.SVGs != 1 || l.Tables["checks"] != 2 || len(l.Tables) != 1 {
		t.Fatalf("good report: %+v", l)
	}
	for name, b := range map[string][]byte{
		"not well-formed":   doc(`<p>unclosed`),
		"html root":         []byte(`<div>x</div>`),
		"image":             doc(`<img alt="x" src="data:image/png;base64,aGVsbG8="/>`),
		"svg namespace":     doc(`<svg width="1"></svg>`),
		"svg image":         doc(`<svg xmlns="http://www.w3.org/2000/svg"><image href="x.png"/></svg>`),
		"external script":   doc(`<script src="x.js"></script>`),
		"loading script":    doc(`<script>fetch("/x")</script>`),
		"stylesheet link":   doc(`<link rel="stylesheet" href="s.css"/>`),
		"anchor":            doc(`<a href="https://example.com">x</a>`),
		"relative anchor":   doc(`<a href="x/report.html">x</a>`),
		"event handler":     doc(`<p onclick="x()">x</p>`),
		"css url":           doc(`<p style="background:url(x.png)">x</p>`),
		"import in style":   []byte(`<html xmlns="http://www.w3.org/1999/xhtml"><head><style>@import "x.css";</style></head></html>`),
		"iframe":            doc(`<iframe></iframe>`),
		"object":            doc(`<object data="x.svg"></object>`),
		"fence in pre":      doc("<pre>```\nx\n```</pre>"),
		"fence in text":     doc("<p>see ```go</p>"),
		"no header row":     doc(`<table><tr><td>1</td></tr></table>`),
		"short row":         doc(`<table><tr><th>a</th><th>b</th></tr><tr><td>1</td></tr></table>`),
		"th below header":   doc(`<table><tr><th>a</th></tr><tr><th>1</th></tr></table>`),
		"empty table":       doc(`<table></table>`),
		"two tables, an id": doc(table + table),
	} {
		if l := LintReportHTML(b); len(l.Problems) == 0 {
			t.Errorf("%s: no problem found", name)
		}
	}
	// The index may link to files below it, nowhere else.
	if l := LintIndexHTML(doc(`<a href="x/report.html">x</a>`)); len(l.Problems) > 0 || len(l.Links) != 1 || l.Links[0] != "x/report.html" {
		t.Errorf("index link: %+v", l)
	}
	for _, href := range []string{"../x/report.html", "/etc/passwd", "https://example.com/", "javascript:x()", "a//b", ""} {
		if l := LintIndexHTML(doc(`<a href="` + href + `">x</a>`)); len(l.Problems) == 0 {
			t.Errorf("index link %q: no problem found", href)
		}
	}
}

// recorder is an Observer that checks the calls it gets.
type recorder struct {
	points   []int
	n        int
	clusters int
	bad      []string
}

func (r *recorder) Point(i, n int, label string) {
	if r.n != 0 && n != r.n {
		r.bad = append(r.bad, fmt.Sprintf("point %d of %d after points of %d", i, n, r.n))
	}
	if label == "" {
		r.bad = append(r.bad, fmt.Sprintf("point %d has no label", i))
	}
	r.n = n
	r.points = append(r.points, i)
}

func (r *recorder) Watch(c *cluster.Cluster) {
	if c == nil || (c.Loop == nil && c.Parallel() == nil) {
		r.bad = append(r.bad, "Watch(nil)")
	}
	r.clusters++
}

// check: points, if reported, are 0..n-1 in order; a run that reports
// points also says which clusters it simulates.
func (r *recorder) check(t *testing.T) {
	t.Helper()
	for _, b := range r.bad {
		t.Error(b)
	}
	if len(r.points) == 0 {
		t.Logf("reports no points (Env.Point is optional)")
		return
	}
	for k, i := range r.points {
		if i != k {
			t.Fatalf("points reported %v, want 0..%d in order", r.points, r.n-1)
		}
	}
	if len(r.points) != r.n {
		t.Errorf("reported %d points of %d", len(r.points), r.n)
	}
	if r.clusters < len(r.points) {
		t.Errorf("%d points but %d clusters watched", len(r.points), r.clusters)
	}
}

// loss-sweep is the name for allreduce-loss; it is not a second
// catalogue entry (`experiment all` runs each experiment once).
func TestAlias(t *testing.T) {
	e, err := Lookup("loss-sweep")
	if err != nil || e.Name != "allreduce-loss" {
		t.Fatalf("Lookup(loss-sweep) = %v, %v", e, err)
	}
	if slices.Contains(Names(), "loss-sweep") {
		t.Errorf("Names() lists the alias: %v", Names())
	}
	if a := Aliases("allreduce-loss"); !slices.Equal(a, []string{"loss-sweep"}) {
		t.Errorf("Aliases = %v", a)
	}
	if _, err := Lookup("loss-swep"); err == nil {
		t.Error("Lookup of an unknown name succeeded")
	}
	var nilEnv *Env
	nilEnv.Point(0, 1, "x") // no observer: nothing happens
	nilEnv.Watch(nil)
	(&Env{}).Point(0, 1, "x")
}

// A finished run's manifest reads back and replays; each kind of damage is
// reported by the field it concerns.
func TestManifestReplay(t *testing.T) {
	e, _ := Lookup(DefaultName)
	env := quickEnv(t, e, "size=1M", "losses=0", "roceQPs=1")
	dir := t.TempDir()
	if _, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{Tool: "vcluster"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifest.json")
	m, err := ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	got, cfg, err := m.Replay()
	if err != nil || got.Name != e.Name || !reflect.DeepEqual(cfg, env.Config) {
		t.Fatalf("Replay = %v, %+v, %v", got, cfg, err)
	}
	raw, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{"unknown field", func(m map[string]any) { m["colour"] = "red" }, []string{`unknown field "colour"`}},
		{"wrong type", func(m map[string]any) { m["seed"] = "one" }, []string{"seed: want a JSON uint64"}},
		{"unfinished", func(m map[string]any) { delete(m, "experiment"); delete(m, "params") }, []string{"experiment: missing", "params: missing"}},
		{"tool", func(m map[string]any) { m["tool"] = "other" }, []string{`tool: must be "vcluster"`}},
		{"experiment", func(m map[string]any) { m["experiment"] = "nosuch" }, []string{`experiment: no experiment "nosuch"`}},
		{"size", func(m map[string]any) { m["size"] = "huge" }, []string{`size: must be quick, default or full, got "huge"`}},
		{"params", func(m map[string]any) {
			p := m["params"].(map[string]any)
			delete(p, "size")
			p["nope"] = "1"
		}, []string{"params.size: missing", "params.nope: allreduce-loss has no such parameter"}},
		{"seed", func(m map[string]any) { m["seed"] = 99 }, []string{"seed: disagrees with config.seed (1), got 99"}},
		{"config", func(m map[string]any) { m["config"].(map[string]any)["fabric"].(map[string]any)["planes"] = 0 }, []string{"config.fabric.planes: must be 1..16, got 0"}},
	} {
		var j map[string]any
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatal(err)
		}
		c.edit(j)
		b, _ := json.Marshal(j)
		p := filepath.Join(t.TempDir(), "manifest.json")
		os.WriteFile(p, b, 0o644)
		m, err := ReadManifest(p)
		if err == nil {
			_, _, err = m.Replay()
		}
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	if _, err := ReadManifest(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("a missing manifest was read")
	}
}

// Same config and seed → identical results.csv.
func TestDeterministicResults(t *testing.T) {
	e, _ := Lookup(DefaultName)
	var got [2][]byte
	for i := range got {
		dir := t.TempDir()
		if _, err := Execute(context.Background(), e, quickEnv(t, e, "size=4M", "losses=0,0.01", "roceQPs=1"), dir, "test", nil, Manifest{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "results.csv"))
		if err != nil {
			t.Fatal(err)
		}
		got[i] = b
	}
	if !bytes.Equal(got[0], got[1]) || len(got[0]) == 0 {
		t.Errorf("results.csv differs between two runs:\n%s\n%s", got[0], got[1])
	}
}

func TestResolveParams(t *testing.T) {
	e, _ := Lookup(DefaultName)
	p, err := ResolveParams(e, Full, []string{"size=1M"})
	if err != nil || p["size"] != "1M" || p["roceQPs"] != "1,2,4,8,16" {
		t.Errorf("ResolveParams = %v, %v", p, err)
	}
	if _, err := ResolveParams(e, Quick, []string{"nope=1"}); err == nil || !strings.Contains(err.Error(), "exp.size") {
		t.Errorf("unknown parameter: %v", err)
	}
	c, x := SplitSets([]string{"fabric.planes=2", "exp.size=1M"})
	if len(c) != 1 || len(x) != 1 || x[0] != "size=1M" {
		t.Errorf("SplitSets = %v %v", c, x)
	}
}
