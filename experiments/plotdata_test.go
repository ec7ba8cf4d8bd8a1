package experiments

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// testPlots are plots of every kind the experiments draw: over time with
// marks and a NaN, categorical, log x, and one with an empty series.
func testPlots() []Plot {
	nan := math.NaN()
	return []Plot{
		{Name: "throughput_over_time", Title: "a transfer, a link cut at 100 µs: throughput into the destination over time, with a title long enough to wrap", XLabel: "virtual time (µs)", YLabel: "throughput (Gb/s)",
			Series: []Series{
				{Name: "MRC, 1 QP", X: []float64{0, 10, 20, 30, 40.5}, Y: []float64{0, 390.25, 401, 380, 1e-7}},
				{Name: "RoCE, 1 QP", X: []float64{0, 10, 20, 30}, Y: []float64{0, 99.5, nan, 0}},
			},
			Marks: []Mark{{X: 15, Label: "link cut"}, {X: 17, Label: "MRC bypass"}, {X: 29.75, Label: "RoCE QP error"}}},
		{Name: "capacity_lost", Title: "throughput lost per fault", XLabel: "fault", YLabel: "lost (%)",
			XLabels: []string{"T0–T1 link", "NIC port", "T0-side OSFP, \"quoted\""},
			Series: []Series{
				{Name: "8x100G", X: []float64{0, 1, 2}, Y: []float64{-0.01, 12.5, 12.5}},
				{Name: "1x800G", X: []float64{0, 1, 2}, Y: []float64{3.1, 100, 100}},
			}},
		{Name: "bandwidth_vs_write", Title: "goodput vs write size", XLabel: "write size (bytes)", YLabel: "fraction of line rate", LogX: true,
			Series: []Series{{Name: "MRC", X: []float64{4096, 32768, 1 << 20}, Y: []float64{0.95, 0.951, 0.949}}, {Name: "nothing measured"}}},
	}
}

func writePlotFiles(t *testing.T, dir string, plots []Plot) {
	t.Helper()
	files, err := PlotDataFiles(plots)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// samePlot is p == q with NaN equal to NaN and nil equal to empty.
func samePlot(p, q Plot) error {
	if fmt.Sprintf("%q %q %q %q %q %v %v", p.Name, p.Title, p.XLabel, p.YLabel, p.XLabels, p.LogX, p.Marks) !=
		fmt.Sprintf("%q %q %q %q %q %v %v", q.Name, q.Title, q.XLabel, q.YLabel, q.XLabels, q.LogX, q.Marks) {
		return fmt.Errorf("metadata %+v != %+v", p, q)
	}
	if len(p.Series) != len(q.Series) {
		return fmt.Errorf("%d series != %d", len(p.Series), len(q.Series))
	}
	for i, s := range p.Series {
		r := q.Series[i]
		if s.Name != r.Name || len(s.X) != len(r.X) || len(s.Y) != len(r.Y) {
			return fmt.Errorf("series %d: %q (%d, %d points) != %q (%d, %d)", i, s.Name, len(s.X), len(s.Y), r.Name, len(r.X), len(r.Y))
		}
		for k := range s.X {
			ny := math.IsNaN(s.Y[k]) && math.IsNaN(r.Y[k])
			if math.Float64bits(s.X[k]) != math.Float64bits(r.X[k]) || (!ny && math.Float64bits(s.Y[k]) != math.Float64bits(r.Y[k])) {
				return fmt.Errorf("series %q point %d: (%v, %v) != (%v, %v)", s.Name, k, s.X[k], s.Y[k], r.X[k], r.Y[k])
			}
		}
	}
	return nil
}

// Plot → CSV + plots.json → Plot is the same plot, and drawing it again
// gives the same PNG and SVG bytes as drawing the original.
func TestPlotDataRoundTrip(t *testing.T) {
	dir := t.TempDir()
	plots := testPlots()
	writePlotFiles(t, dir, plots)
	got, err := ReadPlots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(plots) {
		t.Fatalf("read %d plots, wrote %d", len(got), len(plots))
	}
	for i, p := range plots {
		if err := samePlot(p, got[i]); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		png, svg, err := RenderPlot(p)
		if err != nil {
			t.Fatal(err)
		}
		png2, svg2, err := RenderPlot(got[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(png, png2) || !bytes.Equal(svg, svg2) || len(png) < 1000 {
			t.Errorf("%s: redrawn from its files, the PNG (%d/%d bytes) or SVG (%d/%d) differs", p.Name, len(png), len(png2), len(svg), len(svg2))
		}
	}
	// The CSVs are tidy: a header, one row per point; categorical x
	// carries its label; a NaN is an empty cell.
	csv1, _ := os.ReadFile(filepath.Join(dir, "throughput_over_time.csv"))
	if want := "series,x,y\n\"MRC, 1 QP\",0,0\n\"MRC, 1 QP\",10,390.25\n"; !strings.HasPrefix(string(csv1), want) {
		t.Errorf("throughput_over_time.csv starts %q, want %q", csv1[:min(60, len(csv1))], want)
	}
	if !strings.Contains(string(csv1), "\"RoCE, 1 QP\",20,\n") || strings.Count(string(csv1), "\n") != 1+5+4 {
		t.Errorf("throughput_over_time.csv:\n%s", csv1)
	}
	csv2, _ := os.ReadFile(filepath.Join(dir, "capacity_lost.csv"))
	if !strings.HasPrefix(string(csv2), "series,x,x_label,y\n8x100G,0,T0–T1 link,-0.01\n") {
		t.Errorf("capacity_lost.csv:\n%s", csv2)
	}
}

// Rendering is a function of the plot: the same bytes twice.
func TestRenderDeterministic(t *testing.T) {
	for _, p := range testPlots() {
		a, as, err := RenderPlot(p)
		if err != nil {
			t.Fatal(err)
		}
		b, bs, _ := RenderPlot(p)
		if !bytes.Equal(a, b) || !bytes.Equal(as, bs) {
			t.Errorf("%s: two renderings differ", p.Name)
		}
	}
}

// Every kind of damage to plots.json or a CSV is an error naming the
// file, the line and what is wrong.
func TestReadPlotsErrors(t *testing.T) {
	for _, c := range []struct {
		name, file string
		edit       func(string) string
		want       string
	}{
		{"json syntax", PlotsFile, func(s string) string { return strings.Replace(s, "\"plots\": [", "\"plots\": [,", 1) }, "plots.json:2:"},
		{"unknown field", PlotsFile, func(s string) string { return strings.Replace(s, `"title"`, `"colour": "red", "title"`, 1) }, `plots.json:5: unknown field "colour"`},
		{"wrong type", PlotsFile, func(s string) string { return strings.Replace(s, `"logX": true`, `"logX": "yes"`, 1) }, "logX: want a JSON bool"},
		{"trailing data", PlotsFile, func(s string) string { return s + "{}" }, "data after the JSON object"},
		{"no plots", PlotsFile, func(string) string { return "{}" }, `no "plots" list`},
		{"empty", PlotsFile, func(string) string { return "" }, "plots.json:1: empty file"},
		{"bad name", PlotsFile, func(s string) string { return strings.Replace(s, `"name": "capacity_lost"`, `"name": "../x"`, 1) }, `plots[1]: name: "../x"`},
		{"csv path", PlotsFile, func(s string) string {
			return strings.Replace(s, `"csv": "capacity_lost.csv"`, `"csv": "/etc/passwd"`, 1)
		}, `plots[1]: csv "/etc/passwd"`},
		{"duplicate plot", PlotsFile, func(s string) string {
			return strings.Replace(s, `"name": "capacity_lost"`, `"name": "throughput_over_time"`, 1)
		}, `a second plot named "throughput_over_time"`},
		{"duplicate series", PlotsFile, func(s string) string { return strings.Replace(s, `"1x800G"`, `"8x100G"`, 1) }, `two series named "8x100G"`},
		{"mark NaN", PlotsFile, func(s string) string { return strings.Replace(s, `"x": 15,`, `"x": NaN,`, 1) }, "plots.json:"},
		{"missing csv", "capacity_lost.csv", nil, "plots[1] (capacity_lost):"},
		{"header", "capacity_lost.csv", func(s string) string { return strings.Replace(s, "x_label", "label", 1) }, `capacity_lost.csv:1: header "series,x,label,y"`},
		{"extra column", "throughput_over_time.csv", func(s string) string {
			return strings.Replace(s, "\"MRC, 1 QP\",10,390.25", "\"MRC, 1 QP\",10,390.25,7", 1)
		}, "throughput_over_time.csv:3: wrong number of fields"},
		{"unknown series", "throughput_over_time.csv", func(s string) string { return strings.Replace(s, "\"RoCE, 1 QP\",10", "RoCE,10", 1) }, `throughput_over_time.csv:8: series "RoCE" is not one of plot throughput_over_time's series`},
		{"bad x", "throughput_over_time.csv", func(s string) string { return strings.Replace(s, "\"MRC, 1 QP\",20,", "\"MRC, 1 QP\",twenty,", 1) }, `throughput_over_time.csv:4: x "twenty"`},
		{"NaN x", "throughput_over_time.csv", func(s string) string { return strings.Replace(s, "\"MRC, 1 QP\",20,", "\"MRC, 1 QP\",NaN,", 1) }, `throughput_over_time.csv:4: x "NaN"`},
		{"NaN y as text", "throughput_over_time.csv", func(s string) string { return strings.Replace(s, "\"RoCE, 1 QP\",20,\n", "\"RoCE, 1 QP\",20,NaN\n", 1) }, `throughput_over_time.csv:9: y "NaN": want a finite number, or nothing`},
		{"Inf y", "throughput_over_time.csv", func(s string) string { return strings.Replace(s, ",401\n", ",+Inf\n", 1) }, `throughput_over_time.csv:4: y "+Inf"`},
		{"label index", "capacity_lost.csv", func(s string) string { return strings.Replace(s, "8x100G,1,NIC port", "8x100G,1.5,NIC port", 1) }, `capacity_lost.csv:3: x "1.5": want the index (0..2)`},
		{"label text", "capacity_lost.csv", func(s string) string { return strings.Replace(s, "8x100G,1,NIC port", "8x100G,1,NIC", 1) }, `capacity_lost.csv:3: x_label "NIC", but x 1 is "NIC port"`},
		{"log x", "bandwidth_vs_write.csv", func(s string) string { return strings.Replace(s, "MRC,4096,", "MRC,0,", 1) }, "bandwidth_vs_write.csv:2: x 0 on a log axis"},
		{"csv quote", "bandwidth_vs_write.csv", func(s string) string { return strings.Replace(s, "MRC,4096,", "\"MRC,4096,", 1) }, "bandwidth_vs_write.csv:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writePlotFiles(t, dir, testPlots())
			path := filepath.Join(dir, c.file)
			if c.edit == nil {
				os.Remove(path)
			} else {
				b, _ := os.ReadFile(path)
				e := c.edit(string(b))
				if e == string(b) {
					t.Fatalf("the edit changed nothing in:\n%s", b)
				}
				os.WriteFile(path, []byte(e), 0o644)
			}
			_, err := ReadPlots(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// What the writer cannot write back faithfully, it refuses.
func TestPlotDataFilesRefuses(t *testing.T) {
	for name, p := range map[string]Plot{
		"name":          {Name: "a/b"},
		"lengths":       {Name: "p", Series: []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{1}}}},
		"inf":           {Name: "p", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{math.Inf(1)}}}},
		"nan x":         {Name: "p", Series: []Series{{Name: "s", X: []float64{math.NaN()}, Y: []float64{1}}}},
		"label index":   {Name: "p", XLabels: []string{"a"}, Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{1}}}},
		"two series":    {Name: "p", Series: []Series{{Name: "s"}, {Name: "s"}}},
		"mark":          {Name: "p", Marks: []Mark{{X: math.NaN(), Label: "x"}}},
		"mark log x ≤0": {Name: "p", LogX: true, Marks: []Mark{{X: 0, Label: "x"}}},
	} {
		if _, err := PlotDataFiles([]Plot{p}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := PlotDataFiles([]Plot{{Name: "p"}, {Name: "p"}}); err == nil {
		t.Error("two plots with one name: accepted")
	}
}

// Linear ticks are round (1, 2 or 5 × 10^k, from 4 to 9 labels) and
// printed without exponents; the axis range ends on a labelled tick.
func TestRoundTicks(t *testing.T) {
	for _, c := range []struct{ lo, hi float64 }{{0, 1}, {0, 400}, {0, 13100}, {0, 0.0007}, {-20, 100}, {0, 3.2e9}, {1, 15}, {0, 47.3}} {
		lo, hi, step := niceRange(c.lo, c.hi, 1)
		if lo > c.lo || hi < c.hi {
			t.Errorf("niceRange(%v, %v) = [%v, %v] does not cover it", c.lo, c.hi, lo, hi)
		}
		var labels []string
		for _, tk := range (roundTicks{step: step}).Ticks(lo, hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 4 || len(labels) > 9 {
			t.Errorf("[%v, %v]: labels %v, want 4–9", lo, hi, labels)
		}
		m := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if math.Abs(m-1) > 1e-9 && math.Abs(m-2) > 1e-9 && math.Abs(m-5) > 1e-9 {
			t.Errorf("[%v, %v]: step %v is not 1, 2 or 5 × 10^k", lo, hi, step)
		}
		for _, l := range labels {
			if strings.ContainsAny(l, "e+") {
				t.Errorf("[%v, %v]: label %q has an exponent", lo, hi, l)
			}
		}
		scale, suffix := tickUnit(lo, hi)
		if last := labels[len(labels)-1]; last != formatTick(hi, step, scale, suffix) {
			t.Errorf("[%v, %v]: the top %v is not labelled (labels %v)", lo, hi, hi, labels)
		}
	}
	if got := formatPower(1 << 20); got != "1.048576M" {
		t.Errorf("formatPower(2^20) = %q", got)
	}
	for v, want := range map[float64]string{1e6: "1M", 1e4: "10k", 100: "100", 0.01: "0.01"} {
		if got := formatPower(v); got != want {
			t.Errorf("formatPower(%v) = %q, want %q", v, got, want)
		}
	}
}

var svgText = regexp.MustCompile(`<text x="([-0-9.e]+)" y="([-0-9.e]+)"[^>]*>([^<]*)</text>`)

// The legend is outside the data area (right of its rightmost tick
// label), the marks are dashed lines with their labels, y starts at 0.
func TestRenderLayout(t *testing.T) {
	p := testPlots()[0]
	svg, err := RenderPlotAs(p, "svg")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string][][2]float64{} // text → positions (x, height from the bottom)
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		texts[m[3]] = append(texts[m[3]], [2]float64{x, -y})
	}
	right := 0.0
	for _, l := range []string{"10", "20", "30", "40"} {
		if len(texts[l]) != 1 {
			t.Fatalf("x tick label %q at %v, want once (texts %v)", l, texts[l], texts)
		}
		right = math.Max(right, texts[l][0][0])
	}
	for _, s := range p.Series {
		if pos := texts[s.Name]; len(pos) != 1 || pos[0][0] <= right+10 {
			t.Errorf("legend entry %q at %v, want right of the data (x > %v)", s.Name, pos, right)
		}
	}
	for _, m := range p.Marks {
		if len(texts[m.Label]) != 1 {
			t.Errorf("mark %q: labels at %v, want one", m.Label, texts[m.Label])
		}
	}
	if n := strings.Count(string(svg), "stroke-dasharray"); n < len(p.Marks) {
		t.Errorf("%d dashed paths, want one per mark (%d)", n, len(p.Marks))
	}
	// "0" twice: the x axis's and, left of it and higher, the y axis's.
	if z := texts["0"]; len(z) != 2 || !(z[1][0] < z[0][0] || z[0][0] < z[1][0]) {
		t.Errorf("labels \"0\" at %v, want one on each axis", z)
	}
	// Long legend names go below the data instead.
	q := p
	q.Series = append([]Series(nil), p.Series...)
	q.Series[0].Name = strings.Repeat("a long series name ", 4)
	svg, _ = RenderPlotAs(q, "svg")
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		if m[3] == q.Series[0].Name {
			if y, _ := strconv.ParseFloat(m[2], 64); -y > 60 {
				t.Errorf("long legend entry at height %v, want below the axes", -y)
			}
		}
	}
}
