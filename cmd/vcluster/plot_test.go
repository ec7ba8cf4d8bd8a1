package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/experiments"
)

// writeRun writes the plot data of plots into dir, as a run would.
func writeRun(t *testing.T, dir string, plots []experiments.Plot) {
	t.Helper()
	files, err := experiments.PlotDataFiles(plots)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o755)
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// `vcluster plot` redraws a run directory's plots from their CSVs (into
// --out, in the asked formats, each subdirectory of an `experiment all`
// directory), draws what an edited CSV says, and refuses broken input
// with exit status 2 naming the file and line, before writing anything.
func TestPlotCommand(t *testing.T) {
	two := experiments.Plot{Name: "over_time", Title: "t", XLabel: "time (µs)", YLabel: "rate (Gb/s)",
		Series: []experiments.Series{{Name: "a", X: []float64{0, 1, 2}, Y: []float64{1, 2, 3}}, {Name: "b", X: []float64{0, 1, 2}, Y: []float64{3, 2, 1}}},
		Marks:  []experiments.Mark{{X: 1, Label: "cut"}}}
	all := t.TempDir()
	writeRun(t, filepath.Join(all, "one"), []experiments.Plot{two})
	writeRun(t, filepath.Join(all, "two"), []experiments.Plot{{Name: "p", Series: []experiments.Series{{Name: "s", X: []float64{1}, Y: []float64{1}}}}})
	os.MkdirAll(filepath.Join(all, "empty"), 0o755) // not a run: skipped

	out := t.TempDir()
	code, stdout, errOut := runCLI(t, "plot", all, "--out", out, "--format", "png")
	if code != 0 {
		t.Fatalf("plot exited %d: %s", code, errOut)
	}
	if !strings.Contains(stdout, "2 pictures from 2 run directories") {
		t.Errorf("stdout: %s", stdout)
	}
	want, _ := experiments.RenderPlotAs(two, "png")
	if got := mustRead(t, filepath.Join(out, "one", "over_time.png")); !bytes.Equal(got, want) {
		t.Error("one/over_time.png is not the plot's picture")
	}
	if _, err := os.Stat(filepath.Join(out, "one", "over_time.svg")); err == nil {
		t.Error("--format png wrote an SVG")
	}

	// Drop series b from the CSV: the picture is the plot without it.
	run := filepath.Join(all, "one")
	csvPath := filepath.Join(run, "over_time.csv")
	var kept []string
	for _, l := range strings.SplitAfter(string(mustRead(t, csvPath)), "\n") {
		if !strings.HasPrefix(l, "b,") {
			kept = append(kept, l)
		}
	}
	os.WriteFile(csvPath, []byte(strings.Join(kept, "")), 0o644)
	page := "<html><body><figure id=\"plot-over_time\">\n<svg>old</svg>\n<figcaption>x</figcaption></figure></body></html>"
	os.WriteFile(filepath.Join(run, "report.html"), []byte(page), 0o644)
	if code, _, errOut := runCLI(t, "plot", run); code != 0 {
		t.Fatalf("plot of the edited run exited %d: %s", code, errOut)
	}
	one := two
	one.Series = []experiments.Series{two.Series[0], {Name: "b"}}
	wantPNG, wantSVG, _ := experiments.RenderPlot(one)
	if !bytes.Equal(mustRead(t, filepath.Join(run, "over_time.png")), wantPNG) || !bytes.Equal(mustRead(t, filepath.Join(run, "over_time.svg")), wantSVG) {
		t.Error("the redrawn pictures are not those of the edited data")
	}
	if bytes.Equal(wantPNG, want) {
		t.Error("dropping a series did not change the picture")
	}
	if h := mustRead(t, filepath.Join(run, "report.html")); bytes.Contains(h, []byte("<svg>old</svg>")) || !bytes.Contains(h, wantSVG[bytes.Index(wantSVG, []byte("<svg")):len(wantSVG)-1]) {
		t.Errorf("report.html does not show the redrawn plot:\n%.300s", h)
	}

	// Broken input: exit 2, the file and line named, nothing written.
	os.WriteFile(csvPath, append(mustRead(t, csvPath), "a,zero,1\n"...), 0o644)
	fresh := filepath.Join(t.TempDir(), "never")
	code, _, errOut = runCLI(t, "plot", all, "--out", fresh)
	if code != 2 || !strings.Contains(errOut, "over_time.csv:5: x \"zero\"") {
		t.Errorf("broken CSV: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Error("a failed plot wrote its --out")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", filepath.Join(all, "empty")}, "no plots.json in it or in its subdirectories"},
		{[]string{"plot", filepath.Join(all, "nothing")}, "no such file"},
		{[]string{"plot", filepath.Join(all, "two"), "--format", "jpg"}, `--format: "jpg" is not a plot format`},
		{[]string{"plot"}, "want one argument"},
	} {
		if code, _, errOut := runCLI(t, c.args...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %s; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
