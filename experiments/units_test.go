package experiments

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// unitsRuns are the runs TestUnitsAndMarks reads: every experiment at
// quick size, with its slow parameters made smaller (fewer sizes, losses,
// trials, a shorter flapping, a smaller fabric) — the same code builds
// their tables and plots, in a few seconds instead of a minute.
var unitsRuns = map[string][]string{
	"allreduce-loss": {"size=1M,2M", "losses=0,0.01", "roceQPs=1"},
	"alltoall":       {"size=1M", "losses=0,0.01", "roceQPs=1"},
	"blast-radius":   {"topologies=2x100G,1x800G", "t1s=8", "from=100us", "to=150us"},
	"collateral":     {"each=2M", "tail=100us"},
	"dcqcn-tuning":   {"senders=3", "stagger=100us", "hold=200us", "settle=50us"},
	"failover":       nil, // quick as is: under a second
	"flapping":       {"size=4M", "flapAt=300us", "flapFor=500us", "settle=100us", "after=200us"},
	"orderre":        orderreSmall,
	"path-quality":   pathQualitySmall,
	"p2p":            {"writes=4K,32K", "stream=1M"},
	"permutation":    {"trials=1", "bytes=1M"},
}

// faulted are the experiments whose over-time plots show a fault or an
// event (a cut, flapping, an incast, flows joining): each must have at
// least one over-time plot, and every one of them marks it.
var faulted = []string{"collateral", "dcqcn-tuning", "failover", "flapping", "path-quality"}

var (
	// axisUnit is the unit an axis label ends with, in parentheses.
	axisUnit = regexp.MustCompile(`\(([^()]+)\)$`)
	// goDuration is time.Duration's String() ("360.609µs", "2ms", "1.5s"):
	// no space before the unit, unlike every other number with a unit in
	// a report. A digit inside a word (T1s, T0s) is not one.
	goDuration = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?(ns|µs|ms|s)\b`)
	// unitInCell is a number with its unit in a table cell: the unit
	// belongs in the column's header.
	unitInCell = regexp.MustCompile(`[0-9] ?(%|µs|ms|ns|GB/s|Gb/s|KB|MB)`)
)

// numericUnits are the units a numeric axis may carry (the first word of
// its parenthesised suffix): "(µs)", "(% of line rate)", "(fraction of all
// flows)".
var numericUnits = []string{"ns", "µs", "ms", "s", "Gb/s", "GB/s", "KB", "bytes", "%", "fraction", "count"}

// Every experiment's tables and plots, as its (smaller) quick run builds
// them: every axis label ends with its unit in parentheses (a numeric axis
// with a known unit; a categorical one says what its categories are);
// every over-time plot of an experiment with a fault or event marks it
// inside its x range, marks sorted and labelled; no text of the results
// holds a Go duration string; no table cell carries a unit (the header
// does); and the run reports its points to the progress display.
func TestUnitsAndMarks(t *testing.T) {
	for _, name := range Names() {
		if _, ok := unitsRuns[name]; !ok {
			t.Errorf("experiment %s has no entry in unitsRuns: its plots and tables go untested", name)
		}
	}
	for name, sets := range unitsRuns {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			env := quickEnv(t, e, sets...)
			rec := &recorder{}
			env.Observer = rec
			r, err := e.run(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			rec.check(t)
			if len(rec.points) == 0 {
				t.Error("reports no points: the progress display shows no point count")
			}
			if len(r.Plots) == 0 {
				t.Fatal("no plots")
			}
			overTime := 0
			for _, p := range r.Plots {
				checkAxes(t, p)
				checkMarks(t, p)
				if strings.Contains(p.XLabel, "virtual time") {
					overTime++
					if slices.Contains(faulted, name) && !marksInside(p) {
						t.Errorf("%s: over-time plot of an experiment with a fault or event has no mark inside its x range (marks %v)", p.Name, p.Marks)
					}
				}
			}
			if slices.Contains(faulted, name) && overTime == 0 {
				t.Error("no over-time plot (x label \"virtual time (…)\")")
			}
			checkText(t, r)
			checkTable(t, r.Table)
		})
	}
}

func checkAxes(t *testing.T, p Plot) {
	t.Helper()
	for _, a := range []struct {
		axis, label string
		categorical bool
	}{{"x", p.XLabel, len(p.XLabels) > 0}, {"y", p.YLabel, false}} {
		m := axisUnit.FindStringSubmatch(a.label)
		switch {
		case m == nil:
			t.Errorf("%s: %s label %q has no unit in parentheses at its end", p.Name, a.axis, a.label)
		case strings.TrimSpace(strings.TrimSuffix(a.label, m[0])) == "":
			t.Errorf("%s: %s label %q is only a unit: say what is measured", p.Name, a.axis, a.label)
		case !a.categorical && !slices.Contains(numericUnits, strings.Fields(m[1])[0]):
			t.Errorf("%s: %s label %q: unit %q is none of %v", p.Name, a.axis, a.label, m[1], numericUnits)
		}
	}
}

// checkMarks: marks are sorted by x and labelled, and a plot with
// categories has none (its x values are indices, not times).
func checkMarks(t *testing.T, p Plot) {
	t.Helper()
	if !slices.IsSortedFunc(p.Marks, func(a, b Mark) int {
		switch {
		case a.X < b.X:
			return -1
		case a.X > b.X:
			return 1
		}
		return 0
	}) {
		t.Errorf("%s: marks not sorted by x: %v", p.Name, p.Marks)
	}
	for _, m := range p.Marks {
		if m.Label == "" || math.IsNaN(m.X) || math.IsInf(m.X, 0) {
			t.Errorf("%s: mark %+v: want a label and a finite x", p.Name, m)
		}
	}
	if len(p.XLabels) > 0 && len(p.Marks) > 0 {
		t.Errorf("%s: categorical plot with marks %v", p.Name, p.Marks)
	}
}

// marksInside reports whether one of p's marks lies within the x range of
// its series.
func marksInside(p Plot) bool {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, x := range s.X {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	for _, m := range p.Marks {
		if m.X >= lo && m.X <= hi {
			return true
		}
	}
	return false
}

// checkText: no Go duration string anywhere a report shows text.
func checkText(t *testing.T, r *Results) {
	t.Helper()
	texts := map[string]string{"table": r.Table, "notes": r.Notes}
	for _, c := range r.Checks {
		texts["check "+c.Claim] = c.Claim + "\n" + c.Measured
	}
	for i, f := range r.Failed {
		texts[fmt.Sprintf("failed %d", i)] = f
	}
	for _, p := range r.Plots {
		s := p.Title + "\n" + p.XLabel + "\n" + p.YLabel
		for _, m := range p.Marks {
			s += "\n" + m.Label
		}
		texts["plot "+p.Name] = s
	}
	for where, s := range texts {
		if d := goDuration.FindAllString(s, -1); d != nil {
			t.Errorf("%s: Go duration strings %q (write a number, a space and the unit)", where, d)
		}
	}
}

// checkTable: in the human table, units are in the headers (the first
// line of each block), never in a cell.
func checkTable(t *testing.T, table string) {
	t.Helper()
	if table == "" {
		t.Fatal("empty table")
	}
	header := true
	for _, line := range strings.Split(table, "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			header = true
		case header:
			header = false
		default:
			if u := unitInCell.FindAllString(line, -1); u != nil {
				t.Errorf("table cell carries a unit %q (put it in the header): %s", u, line)
			}
		}
	}
}

// durText writes durations as the tables and titles want them, and the
// pattern TestUnitsAndMarks looks for finds time.Duration's String() and
// never durText's.
func TestDurText(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0 ns"}, {500, "500 ns"}, {768084 * time.Nanosecond, "768.084 µs"}, {100 * time.Microsecond, "100 µs"},
		{2 * time.Millisecond, "2 ms"}, {4300113 * time.Nanosecond, "4.300113 ms"}, {1500 * time.Millisecond, "1.5 s"},
	} {
		if got := durText(c.d); got != c.want {
			t.Errorf("durText(%d ns) = %q, want %q", int64(c.d), got, c.want)
		}
		if c.d > 0 && !goDuration.MatchString("job "+c.d.String()+" done") {
			t.Errorf("goDuration misses %q", c.d.String())
		}
		if goDuration.MatchString(durText(c.d)) {
			t.Errorf("goDuration matches durText's %q", durText(c.d))
		}
	}
	for _, s := range []string{"32 T1s per plane", "2 T0s × 8", "23.0 µs", "(µs)"} {
		if goDuration.MatchString(s) {
			t.Errorf("goDuration matches %q", s)
		}
	}
	if usCell(-1) != "never" || usCell(23000) != "23.0" || usCell(360609) != "360.6" {
		t.Errorf("usCell: %q %q %q", usCell(-1), usCell(23000), usCell(360609))
	}
}
