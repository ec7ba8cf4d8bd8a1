package experiments

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// IndexEntry is one experiment of an `experiment all` directory, read
// back from its subdirectory (ReadIndexEntry).
type IndexEntry struct {
	Dir      string // the subdirectory, relative to the index
	Manifest Manifest
	Checks   []Check
	// Report is the report.html to link, relative to the index; "" when
	// the run wrote none (it failed before its report).
	Report string
}

// ReadIndexEntry reads the experiment in subdirectory sub of dir: its
// manifest.json and, when the run wrote them, results.json's checks.
// The manifest is read as it is (a failed run's is incomplete: that is
// what the index shows), but it must be a JSON manifest.
func ReadIndexEntry(dir, sub string) (IndexEntry, error) {
	e := IndexEntry{Dir: sub}
	path := filepath.Join(dir, sub, "manifest.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e.Manifest); err != nil {
		return e, fmt.Errorf("%s: %v", path, err)
	}
	if e.Manifest.Experiment == "" {
		e.Manifest.Experiment = sub
	}
	rpath := filepath.Join(dir, sub, "results.json")
	if rb, err := os.ReadFile(rpath); err == nil {
		var res struct {
			Checks []Check `json:"checks"`
		}
		if err := json.Unmarshal(rb, &res); err != nil {
			return e, fmt.Errorf("%s: %v", rpath, err)
		}
		e.Checks = res.Checks
	}
	if _, err := os.Stat(filepath.Join(dir, sub, "report.html")); err == nil {
		e.Report = sub + "/report.html"
	}
	return e, nil
}

// Verdicts counts e's checks that pass and that differ (a claim the
// setup cannot test is neither).
func (e IndexEntry) Verdicts() (pass, differ int) {
	v := verdictCounts(e.Checks)
	return v.pass, v.differ
}

// State is one word for how the run ended: "pass" (every check holds),
// "differs" (a check differs), "failed", "interrupted", or "no checks".
func (e IndexEntry) State() string {
	st := e.Manifest.Status
	switch {
	case strings.HasPrefix(st, "failed"):
		return "failed"
	case st == StatusInterrupted:
		return StatusInterrupted
	case st == "started" || st == "":
		return "unfinished"
	}
	p, d := e.Verdicts()
	switch {
	case d > 0:
		return "differs"
	case p > 0:
		return "pass"
	}
	return "no checks"
}

var indexHead = []string{"experiment", "TARGETS", "checks", "wall", "events", "status"}

func (e IndexEntry) row() []string {
	return []string{e.Manifest.Experiment, strings.Join(e.Manifest.TargetRows, ","), verdictCounts(e.Checks).String(),
		formatWall(e.Manifest.WallSeconds), strconv.FormatUint(e.Manifest.Events, 10), e.State()}
}

// indexTotals are the entries' summed wall time and events.
func indexTotals(es []IndexEntry) (wall float64, events uint64) {
	for _, e := range es {
		wall += e.Manifest.WallSeconds
		events += e.Manifest.Events
	}
	return wall, events
}

// SummaryTable is the closing table of `experiment all`: one line per
// experiment (TARGETS rows, checks, wall time, events, status) and the
// totals.
func SummaryTable(es []IndexEntry) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(indexHead, "\t"))
	for _, e := range es {
		fmt.Fprintln(tw, strings.Join(e.row(), "\t"))
	}
	wall, events := indexTotals(es)
	fmt.Fprintf(tw, "total (%d)\t\t%s\t%s\t%d\t\n", len(es), allVerdicts(es), formatWall(wall), events)
	tw.Flush()
	return b.String()
}

func allVerdicts(es []IndexEntry) string {
	var v verdictCount
	for _, e := range es {
		for _, c := range e.Checks {
			v.add(c)
		}
	}
	return v.String()
}

// WriteIndex writes dir/index.html and dir/index.md for an `experiment
// all` directory: every experiment (linked to its report) with its
// checks, wall time, events and status, then every check in one table,
// then the totals. It returns the files written.
func WriteIndex(dir string, es []IndexEntry) ([]string, error) {
	wall, events := indexTotals(es)
	var checks [][]string
	var verdicts []string
	for _, e := range es {
		for _, c := range e.Checks {
			checks = append(checks, append([]string{e.Manifest.Experiment}, checkRow(c)...))
			verdicts = append(verdicts, c.verdictClass())
		}
	}
	checkCols := append([]string{"experiment"}, checkHead...)
	totals := fmt.Sprintf("%d experiments, checks %s; wall time %s in all (the experiments' own, summed), %d simulation events.",
		len(es), allVerdicts(es), formatWall(wall), events)

	// index.md
	var md bytes.Buffer
	fmt.Fprintf(&md, "# vcluster experiment all\n\n%s\n\n| %s |\n|%s\n", totals, strings.Join(indexHead, " | "), strings.Repeat("---|", len(indexHead)))
	for _, e := range es {
		row := e.row()
		if e.Report != "" {
			row[0] = fmt.Sprintf("[%s](%s)", row[0], strings.TrimSuffix(e.Report, ".html")+".md")
		}
		fmt.Fprintf(&md, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintf(&md, "\n## Checks\n\n| %s |\n|%s\n", strings.Join(checkCols, " | "), strings.Repeat("---|", len(checkCols)))
	for _, c := range checks {
		fmt.Fprintf(&md, "| %s |\n", strings.Join(c, " | "))
	}

	// index.html
	var h bytes.Buffer
	writePageStart(&h, "vcluster experiment all")
	fmt.Fprintf(&h, "<h1>vcluster experiment all</h1>\n<p class=\"meta\">%s</p>\n<h2>Experiments</h2>\n", esc(totals))
	rows := make([][]string, len(es))
	for i, e := range es {
		rows[i] = e.row()
	}
	writeTable(&h, "experiments", indexHead, rows, func(r, c int) string {
		if c == 0 && es[r].Report != "" {
			return fmt.Sprintf("<a href=\"%s\">%s</a>", esc(es[r].Report), esc(rows[r][0]))
		}
		return ""
	}, func(r, c int) string {
		if c == 5 {
			return es[r].State()
		}
		return ""
	})
	h.WriteString("<h2>Checks</h2>\n<p>Every experiment's check of its TARGETS rows (click a header to sort).</p>\n")
	writeTable(&h, "checks", checkCols, checks, nil, func(r, c int) string {
		if c == 1+verdictCol {
			return verdicts[r]
		}
		return ""
	})
	writePageEnd(&h)

	var files []string
	for _, f := range []File{{"index.html", h.Bytes()}, {"index.md", md.Bytes()}} {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return files, err
		}
		files = append(files, f.Name)
	}
	return files, nil
}
