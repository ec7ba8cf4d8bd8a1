package experiments

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/vcluster/vcluster/config"
)

// Manifest is <out>/manifest.json: what ran, with what, and how long it
// took. It is the one output file that is not a function of config and
// seed alone (wall time, versions, paths).
type Manifest struct {
	Tool          string `json:"tool"`
	Command       string `json:"command,omitempty"`  // run or experiment
	ReplayOf      string `json:"replayOf,omitempty"` // the manifest this run replayed
	Version       string `json:"version"`
	GoVersion     string `json:"goVersion"`
	GvisorVersion string `json:"gvisorVersion"`
	Seed          uint64 `json:"seed"`
	// Seeds is how many seeds the checks ran on: Seed, Seed+1, … (0 in
	// manifests from before seeds were counted: one).
	Seeds        int               `json:"seeds,omitempty"`
	ConfigFile   string            `json:"configFile,omitempty"`
	Sets         []string          `json:"sets,omitempty"`
	Status       string            `json:"status"`
	Experiment   string            `json:"experiment,omitempty"`
	TargetRows   []string          `json:"targetRows,omitempty"`
	Size         Size              `json:"size,omitempty"`
	Params       map[string]string `json:"params,omitempty"`
	WallSeconds  float64           `json:"wallSeconds,omitempty"`
	Events       uint64            `json:"events,omitempty"`
	ChecksPassed *bool             `json:"checksPassed,omitempty"`
	Files        []string          `json:"files,omitempty"`
	// Parallel is the run's --parallel: 0 the classic single loop, N ≥ 1
	// a partitioned cluster on N goroutines (the same results for every
	// N, 0 included).
	Parallel int           `json:"parallel,omitempty"`
	Config   config.Config `json:"config"`
}

// WriteManifest writes m as dir/manifest.json.
func WriteManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
}

// CheckTable is the check table as aligned text.
func CheckTable(cs []Check) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(checkHead, "\t"))
	for _, c := range cs {
		fmt.Fprintln(tw, strings.Join(checkRow(c), "\t"))
	}
	tw.Flush()
	return b.String()
}

// checkIntro heads every check table.
const checkIntro = "Each published claim, the band a measurement must fall in to reproduce it (and why that wide), " +
	"and the median over the seeds: pass when the median is inside the band. Numbers are not tuned toward the target; " +
	"a claim this setup cannot test says why."

// WriteReport writes results.csv, results.json, the plots (PNG and SVG)
// with their data (<plot>.csv, plots.json: see PlotDataFiles), report.md
// and report.html into dir and returns the file names written. head is a
// line describing the cluster.
func WriteReport(dir string, e *Experiment, env *Env, r *Results, head string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	put := func(name string, b []byte) error {
		files = append(files, name)
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	// results.csv / results.json
	var cb bytes.Buffer
	cw := csv.NewWriter(&cb)
	cw.Write(r.Columns)
	cw.WriteAll(r.Rows)
	if err := put("results.csv", cb.Bytes()); err != nil {
		return nil, err
	}
	objs := make([]map[string]string, 0, len(r.Rows))
	for _, row := range r.Rows {
		o := map[string]string{}
		for i, c := range r.Columns {
			if i < len(row) {
				o[c] = row[i]
			}
		}
		objs = append(objs, o)
	}
	jb, err := json.MarshalIndent(map[string]any{"experiment": e.Name, "targetRows": e.Targets, "params": env.Params, "rows": objs, "checks": r.Checks}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := put("results.json", append(jb, '\n')); err != nil {
		return nil, err
	}
	// plots, their data, the extra files
	svgs := map[string][]byte{}
	for _, p := range r.Plots {
		png, svg, err := RenderPlot(p)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", p.Name, err)
		}
		svgs[p.Name] = svg
		if err := put(p.Name+".png", png); err != nil {
			return nil, err
		}
		if err := put(p.Name+".svg", svg); err != nil {
			return nil, err
		}
	}
	data, err := PlotDataFiles(r.Plots)
	if err != nil {
		return nil, err
	}
	for _, f := range append(data, r.Files...) {
		if err := put(f.Name, f.Data); err != nil {
			return nil, err
		}
	}
	// report.md
	var md bytes.Buffer
	fmt.Fprintf(&md, "# %s — %s\n\n%s\n\nReproduces: %s (docs TARGETS.md). Size: %s. Parameters: %s.\n\n",
		e.Name, e.Title, head, strings.Join(e.Targets, ", "), env.Size, paramString(e, env.Params))
	for _, s := range r.Before {
		fmt.Fprintf(&md, "## %s\n\n%s\n\n", s.Title, s.Body)
	}
	fmt.Fprintf(&md, "## Setup\n\n%s\n\n## Results\n\n```\n%s```\n\n", e.Setup, r.Table)
	if r.Notes != "" {
		fmt.Fprintf(&md, "%s\n\n", r.Notes)
	}
	for _, p := range r.Plots {
		fmt.Fprintf(&md, "![%s](%s.png)\n\nData: [%s.csv](%s.csv)\n\n", p.Title, p.Name, p.Name, p.Name)
	}
	fmt.Fprintf(&md, "## Check\n\n%s Results table and plots: seed %d; checks: seeds %s.\n\n| %s |\n|%s\n",
		checkIntro, env.Config.Seed, seedList(env), strings.Join(checkHead, " | "), strings.Repeat("---|", len(checkHead)))
	for _, c := range r.Checks {
		fmt.Fprintf(&md, "| %s |\n", strings.Join(checkRow(c), " | "))
	}
	fmt.Fprintf(&md, "\nFiles: results.csv, results.json, report.html, manifest.json")
	for _, p := range r.Plots {
		fmt.Fprintf(&md, ", %s.png, %s.svg, [%s.csv](%s.csv)", p.Name, p.Name, p.Name, p.Name)
	}
	fmt.Fprintf(&md, ", %s", PlotsFile)
	for _, f := range r.Files {
		fmt.Fprintf(&md, ", %s", f.Name)
	}
	for _, f := range env.Beside {
		fmt.Fprintf(&md, ", %s", f)
	}
	md.WriteString(".\n")
	if err := put("report.md", md.Bytes()); err != nil {
		return nil, err
	}
	if err := put("report.html", reportHTML(e, env, r, head, svgs)); err != nil {
		return nil, err
	}
	return files, nil
}

func paramString(e *Experiment, p map[string]string) string {
	var s []string
	for _, q := range e.Params {
		s = append(s, q.Key+"="+p[q.Key])
	}
	return strings.Join(s, ", ")
}

// seedList names the seeds a run of env judges its checks on: "1" or "1–3".
func seedList(env *Env) string {
	n := uint64(env.seeds())
	if n == 1 {
		return strconv.FormatUint(env.Config.Seed, 10)
	}
	return fmt.Sprintf("%d–%d", env.Config.Seed, env.Config.Seed+n-1)
}
