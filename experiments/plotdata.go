package experiments

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// PlotsFile is the plot index of a run directory: every plot's metadata
// and the CSV file holding its data. `vcluster plot DIR` redraws the plots
// from it (ReadPlots), so a user who edits a CSV gets the edited picture.
const PlotsFile = "plots.json"

// The data of a plot is <name>.csv in tidy long format, one row per
// point, in the order of the series and of their points:
//
//	series,x,y
//	MRC,0,12.5
//
// A plot with XLabels (categorical x) has a fourth column, x_label, after
// x: the label of the category x indexes, so the file reads on its own:
//
//	series,x,x_label,y
//	measured,0,T0 down,12.5
//
// y is empty where the series has no value (NaN: a point that failed);
// numbers are Go's shortest exact decimal form, so they read back equal.
var (
	plotCSVHeader        = []string{"series", "x", "y"}
	plotCSVHeaderLabeled = []string{"series", "x", "x_label", "y"}
)

// plotIndex is plots.json.
type plotIndex struct {
	Plots []plotMeta `json:"plots"`
}

// plotMeta is one plot of plots.json: everything of a Plot but its points,
// and the file that holds those. Series lists the series names in drawing
// order (a series may have no rows: it is then not drawn).
type plotMeta struct {
	Name    string   `json:"name"`
	Title   string   `json:"title"`
	XLabel  string   `json:"xLabel"`
	YLabel  string   `json:"yLabel"`
	LogX    bool     `json:"logX,omitempty"`
	XLabels []string `json:"xLabels,omitempty"`
	Marks   []Mark   `json:"marks,omitempty"`
	Series  []string `json:"series"`
	CSV     string   `json:"csv"`
}

// PlotDataFiles returns the data files of plots: <name>.csv for each plot
// and plots.json. It refuses what could not be read back as it was: a
// name that is not a plain file stem, two plots or two series of a plot
// with the same name, a series whose X and Y differ in length, an
// infinite value, a NaN x, a categorical x that is not an index of the
// labels.
func PlotDataFiles(plots []Plot) ([]File, error) {
	idx := plotIndex{Plots: make([]plotMeta, 0, len(plots))}
	var files []File
	for _, p := range plots {
		m := plotMeta{Name: p.Name, Title: p.Title, XLabel: p.XLabel, YLabel: p.YLabel, LogX: p.LogX,
			XLabels: p.XLabels, Marks: p.Marks, Series: make([]string, 0, len(p.Series)), CSV: p.Name + ".csv"}
		for _, s := range p.Series {
			m.Series = append(m.Series, s.Name)
		}
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("plot %q: %w", p.Name, err)
		}
		for _, o := range idx.Plots {
			if o.Name == m.Name {
				return nil, fmt.Errorf("two plots named %q", p.Name)
			}
		}
		b, err := plotCSV(p)
		if err != nil {
			return nil, fmt.Errorf("plot %q: %w", p.Name, err)
		}
		idx.Plots = append(idx.Plots, m)
		files = append(files, File{Name: m.CSV, Data: b})
	}
	jb, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", PlotsFile, err)
	}
	return append(files, File{Name: PlotsFile, Data: append(jb, '\n')}), nil
}

// plotCSV is p's points as CSV (see plotCSVHeader).
func plotCSV(p Plot) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	labeled := len(p.XLabels) > 0
	if labeled {
		w.Write(plotCSVHeaderLabeled)
	} else {
		w.Write(plotCSVHeader)
	}
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		for k, x := range s.X {
			y := s.Y[k]
			if math.IsNaN(x) || math.IsInf(x, 0) || math.IsInf(y, 0) {
				return nil, fmt.Errorf("series %q point %d is (%v, %v): want a finite x and a finite or NaN y", s.Name, k, x, y)
			}
			ys := ""
			if !math.IsNaN(y) {
				ys = formatPlotNumber(y)
			}
			rec := []string{s.Name, formatPlotNumber(x), ys}
			if labeled {
				i, ok := labelIndex(x, len(p.XLabels))
				if !ok {
					return nil, fmt.Errorf("series %q point %d: x %v is not an index of the %d x labels", s.Name, k, x, len(p.XLabels))
				}
				rec = []string{s.Name, rec[1], p.XLabels[i], ys}
			}
			w.Write(rec)
		}
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// formatPlotNumber is v's shortest decimal form that parses back to v,
// without an exponent (1048576, not 1.048576e+06: spreadsheets and eyes).
func formatPlotNumber(v float64) string {
	if v == 0 {
		return "0" // and not "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// labelIndex is x as an index into n categorical labels.
func labelIndex(x float64, n int) (int, bool) {
	if x != math.Trunc(x) || x < 0 || x >= float64(n) {
		return 0, false
	}
	return int(x), true
}

// check is what the reader and the writer both require of a plot's
// metadata.
func (m *plotMeta) check() error {
	if err := checkFileStem(m.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if stem, ok := strings.CutSuffix(m.CSV, ".csv"); !ok || checkFileStem(stem) != nil {
		return fmt.Errorf("csv %q: want a file name <stem>.csv in the same directory", m.CSV)
	}
	seen := map[string]bool{}
	for _, s := range m.Series {
		if seen[s] {
			return fmt.Errorf("two series named %q", s)
		}
		seen[s] = true
	}
	for i, mk := range m.Marks {
		if math.IsNaN(mk.X) || math.IsInf(mk.X, 0) {
			return fmt.Errorf("marks[%d].x is %v: want a finite number", i, mk.X)
		}
		if m.LogX && mk.X <= 0 {
			return fmt.Errorf("marks[%d].x is %v: a log axis has only positive values", i, mk.X)
		}
	}
	return nil
}

// checkFileStem accepts a plain file name stem: letters, digits, '_', '-'
// and '.', not starting with '.', at most 100 characters.
func checkFileStem(s string) error {
	if s == "" || len(s) > 100 || s[0] == '.' {
		return fmt.Errorf("%q: want 1–100 characters of [A-Za-z0-9_.-], not starting with '.'", s)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("%q: want 1–100 characters of [A-Za-z0-9_.-], not starting with '.'", s)
		}
	}
	return nil
}

// ReadPlots reads the plots of run directory dir back from plots.json and
// the CSV files it names. Reading is strict: an unknown field or column, a
// wrong count of fields, a number that does not parse, a series that
// plots.json does not list, a label that is not its index's are errors
// naming the file and line.
func ReadPlots(dir string) ([]Plot, error) {
	path := filepath.Join(dir, PlotsFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodePlots(path, b, func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) })
}

// DecodePlots is ReadPlots of plots.json's bytes b read from path (path
// names it in errors); readCSV reads a data file by its base name.
func DecodePlots(path string, b []byte, readCSV func(name string) ([]byte, error)) ([]Plot, error) {
	var idx plotIndex
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&idx); err != nil {
		return nil, jsonError(path, b, d, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s:%d: data after the JSON object", path, lineAt(b, d.InputOffset()))
	}
	if idx.Plots == nil {
		return nil, fmt.Errorf("%s: no \"plots\" list", path)
	}
	plots := make([]Plot, 0, len(idx.Plots))
	names := map[string]bool{}
	for i := range idx.Plots {
		m := &idx.Plots[i]
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("%s: plots[%d]: %w", path, i, err)
		}
		if names[m.Name] {
			return nil, fmt.Errorf("%s: plots[%d]: a second plot named %q", path, i, m.Name)
		}
		names[m.Name] = true
		data, err := readCSV(m.CSV)
		if err != nil {
			return nil, fmt.Errorf("%s: plots[%d] (%s): %w", path, i, m.Name, err)
		}
		series, err := decodePlotCSV(filepath.Join(filepath.Dir(path), m.CSV), data, m)
		if err != nil {
			return nil, err
		}
		plots = append(plots, Plot{Name: m.Name, Title: m.Title, XLabel: m.XLabel, YLabel: m.YLabel,
			XLabels: m.XLabels, LogX: m.LogX, Series: series, Marks: m.Marks})
	}
	return plots, nil
}

// decodePlotCSV reads the points of plot m from its CSV b (path names it
// in errors).
func decodePlotCSV(path string, b []byte, m *plotMeta) ([]Series, error) {
	r := csv.NewReader(bytes.NewReader(b))
	want := plotCSVHeader
	if len(m.XLabels) > 0 {
		want = plotCSVHeaderLabeled
	}
	r.FieldsPerRecord = len(want)
	head, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s:1: empty file, want the header %s", path, strings.Join(want, ","))
	}
	if err != nil {
		return nil, csvError(path, err)
	}
	if strings.Join(head, ",") != strings.Join(want, ",") {
		return nil, fmt.Errorf("%s:1: header %q, want %q", path, strings.Join(head, ","), strings.Join(want, ","))
	}
	series := make([]Series, len(m.Series))
	at := map[string]int{}
	for i, n := range m.Series {
		series[i].Name = n
		at[n] = i
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(path, err)
		}
		line, _ := r.FieldPos(0)
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: %s", path, line, fmt.Sprintf(format, a...))
		}
		i, ok := at[rec[0]]
		if !ok {
			return nil, bad("series %q is not one of plot %s's series in %s (%s)", rec[0], m.Name, PlotsFile, strings.Join(m.Series, ", "))
		}
		x, err := strconv.ParseFloat(rec[1], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, bad("x %q: want a finite number", rec[1])
		}
		ycell := rec[len(rec)-1]
		y := math.NaN()
		if ycell != "" {
			if y, err = strconv.ParseFloat(ycell, 64); err != nil || math.IsNaN(y) || math.IsInf(y, 0) {
				return nil, bad("y %q: want a finite number, or nothing where there is no value", ycell)
			}
		}
		if len(m.XLabels) > 0 {
			k, ok := labelIndex(x, len(m.XLabels))
			if !ok {
				return nil, bad("x %q: want the index (0..%d) of one of the x labels", rec[1], len(m.XLabels)-1)
			}
			if rec[2] != m.XLabels[k] {
				return nil, bad("x_label %q, but x %d is %q in %s", rec[2], k, m.XLabels[k], PlotsFile)
			}
		}
		if m.LogX && x <= 0 {
			return nil, bad("x %s on a log axis: want a positive number", rec[1])
		}
		series[i].X = append(series[i].X, x)
		series[i].Y = append(series[i].Y, y)
	}
	return series, nil
}

func csvError(path string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: %v", path, pe.Line, pe.Err)
	}
	return fmt.Errorf("%s: %v", path, err)
}

// jsonError names path and the line of a decoding error.
func jsonError(path string, b []byte, d *json.Decoder, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%s:%d: %v", path, lineAt(b, se.Offset), se)
	case errors.As(err, &te):
		return fmt.Errorf("%s:%d: %s: want a JSON %s, got %s", path, lineAt(b, te.Offset), te.Field, te.Type, te.Value)
	case err == io.EOF:
		return fmt.Errorf("%s:1: empty file, want a JSON object", path)
	}
	// An unknown field comes without its offset: the line is the first
	// where it is a key.
	off := d.InputOffset()
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if m := regexp.MustCompile(regexp.QuoteMeta(f) + `\s*:`).FindIndex(b); m != nil {
			off = int64(m[0])
		}
	}
	return fmt.Errorf("%s:%d: %v", path, lineAt(b, off), strings.TrimPrefix(err.Error(), "json: "))
}

// lineAt is the line (from 1) of byte offset off in b.
func lineAt(b []byte, off int64) int {
	off = min(max(off, 0), int64(len(b)))
	return 1 + bytes.Count(b[:off], []byte{'\n'})
}
