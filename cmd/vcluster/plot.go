package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/experiments"
)

func init() { extraCommands = append(extraCommands, newPlotCmd) }

func newPlotCmd() *cobra.Command {
	var out string
	var formats []string
	cmd := &cobra.Command{
		Use:   "plot DIR",
		Short: "Redraw the plots of a run directory from its plots.json and CSV files",
		Long: `plot redraws every plot of a run directory (the --out of run or experiment)
from the data the run wrote beside each picture: plots.json (titles, axis
labels, marks, which CSV holds each plot) and one <plot>.csv per plot
(series,x,y — or series,x,x_label,y for categorical x). Edit a CSV (drop a
series, change values) or plots.json (a title, a label) and plot draws the
edited picture, without running anything again. A directory of
'experiment all' (no plots.json of its own) redraws each experiment's
subdirectory.

The pictures overwrite DIR's own, or go to --out (one subdirectory per
experiment for an 'experiment all' directory). With svg among the formats,
report.html is written again with the redrawn plots in it (into --out, if
given). Everything is read and checked before anything is written: a file that does not parse is an error
(exit status 2) naming the file and line.`,
		Example: `  vcluster plot out/ar
  vcluster plot out/all --format svg --out out/all-svg`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("want one argument: the run directory"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(formats) == 0 {
				return usageError(fmt.Errorf("--format: empty; must be png, svg or png,svg"))
			}
			for _, f := range formats {
				if !slices.Contains(experiments.PlotFormats, f) {
					return usageError(fmt.Errorf("--format: %q is not a plot format; must be png or svg (comma-separated)", f))
				}
			}
			dirs, err := plotDirs(args[0])
			if err != nil {
				return usageError(err)
			}
			type run struct {
				out   string
				plots []experiments.Plot
			}
			var runs []run
			for _, d := range dirs {
				plots, err := experiments.ReadPlots(d)
				if err != nil {
					return usageError(err)
				}
				o := d
				if out != "" {
					rel, _ := filepath.Rel(args[0], d)
					o = filepath.Join(out, rel)
				}
				runs = append(runs, run{o, plots})
			}
			w := cmd.OutOrStdout()
			n := 0
			for i, r := range runs {
				if err := os.MkdirAll(r.out, 0o755); err != nil {
					return err
				}
				svgs := map[string][]byte{}
				for _, p := range r.plots {
					for _, f := range formats {
						b, err := experiments.RenderPlotAs(p, f)
						if err != nil {
							return fmt.Errorf("%s: plot %s: %w", r.out, p.Name, err)
						}
						path := filepath.Join(r.out, p.Name+"."+f)
						if err := os.WriteFile(path, b, 0o644); err != nil {
							return err
						}
						fmt.Fprintln(w, path)
						n++
						if f == "svg" {
							svgs[p.Name] = b
						}
					}
				}
				// The report shows the redrawn plots too.
				if page, err := os.ReadFile(filepath.Join(dirs[i], "report.html")); err == nil && len(svgs) > 0 {
					page, k := experiments.ReplaceReportSVGs(page, svgs)
					if k > 0 {
						path := filepath.Join(r.out, "report.html")
						if err := os.WriteFile(path, page, 0o644); err != nil {
							return err
						}
						fmt.Fprintf(w, "%s (%d plots)\n", path, k)
					}
				}
			}
			fmt.Fprintf(w, "%d pictures from %d run directories\n", n, len(runs))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the pictures under this `dir` instead of DIR")
	cmd.Flags().StringSliceVar(&formats, "format", []string{"png", "svg"}, "picture `formats`: png, svg or both")
	return cmd
}

// plotDirs are the run directories under dir: dir itself if it has a
// plots.json, else each subdirectory that has one (an `experiment all`
// directory), sorted.
func plotDirs(dir string) ([]string, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, err
	} else if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, experiments.PlotsFile)); err == nil {
		return []string{dir}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range ents {
		sub := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(sub, experiments.PlotsFile)); e.IsDir() && err == nil {
			dirs = append(dirs, sub)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%s: no %s in it or in its subdirectories (is it the --out of a run or an experiment?)", dir, experiments.PlotsFile)
	}
	sort.Strings(dirs)
	return dirs, nil
}
