package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
)

func init() { extraCommands = append(extraCommands, newExperimentCmd) }

func newExperimentCmd() *cobra.Command {
	var out, manifestPath string
	var quick, full bool
	var rf *runFlags
	var parallel, seeds *int
	cmd := &cobra.Command{
		Use:   "experiment list | all | <name>",
		Short: "Run a named experiment (or all of them) and write its report: results, plots, check against TARGETS",
		Long: `experiment runs one experiment from the catalogue ('list' shows it), or every
one ('all', each into <out>/<name>). Each experiment starts from its own
cluster settings (shown by list), then --config and --set as usual;
experiment parameters are --set exp.<key>=value or an exp: section in the
--config file (--set wins). --quick and --full pick the size. Every run
writes manifest.json, config.yaml, results.csv, results.json, report.md,
report.html (sortable tables, plots as inline SVG), the plots as PNG and
SVG, and their data: <plot>.csv and plots.json ('vcluster plot DIR'
redraws the plots from them). 'all' ends with a summary table (each
experiment's checks, wall time, events, status) and writes index.html and
index.md into --out, linking every report, with every check in one table.

The exit status is 0 when the run completed, whatever the check says: a shape that differs
from the published one is a finding. It is 1 when a row failed (an error,
a stalled job, a QP error, a wrong byte; the report is still written and
the last line of stderr says what failed), 2 for invalid parameters
(checked before anything runs or is written) and 130 when interrupted
(SIGINT/SIGTERM: the manifest says "interrupted").

--manifest dir/manifest.json runs again exactly what that manifest recorded
into --out (the name, if given, must match it); results.csv comes out
byte-identical. Progress goes to stderr (a bar on a terminal, log lines
otherwise); --metrics :9464 serves Prometheus metrics while it runs.

--parallel N runs each cluster cut into partitions on N goroutines (every
experiment can: fault plans, the Clustermapper and queue samplers act
between windows, as global events): results.csv and events.jsonl are the
same for every N, the classic loop's (N = 0, the default) included. With
--parallel the progress display and --metrics update between
windows.`,
		Example: `  vcluster experiment list
  vcluster experiment allreduce-loss --quick --out out/ar
  vcluster experiment allreduce-loss --set exp.size=128M --set exp.roceQPs=1,4,16
  vcluster experiment all --quick --out out/all
  vcluster experiment --manifest out/ar/manifest.json --out out/ar-again`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && manifestPath != "" {
				return nil
			}
			if len(args) != 1 {
				return usageError(fmt.Errorf("want one argument: list, all or an experiment name (%s)", strings.Join(experiments.Names(), ", ")))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if manifestPath != "" {
				name := ""
				if len(args) == 1 {
					name = args[0]
				}
				return replay(cmd, manifestPath, out, name, rf)
			}
			size, err := sizeFlag(quick, full)
			if err != nil {
				return err
			}
			if args[0] == "list" {
				listExperiments(w)
				return nil
			}
			names := []string{args[0]}
			if args[0] == "all" {
				names = experiments.Names()
			}
			params, err := expParams(cmd)
			if err != nil {
				return err
			}
			user, _ := cmd.Flags().GetStringArray("set")
			var cfgPath string
			if f := cmd.Flags().Lookup("config"); f != nil {
				cfgPath = f.Value.String()
			}
			var es []*experiments.Experiment
			for _, n := range names {
				e, err := experiments.Lookup(n)
				if err != nil {
					return usageError(err)
				}
				es = append(es, e)
			}
			// Every configuration is resolved (and checked) before the
			// first experiment runs.
			var jobs []*job
			for _, e := range es {
				// The experiment's cluster settings go before the user's
				// config file and --set.
				f := cmd.Flags().Lookup("set")
				if err := f.Value.(interface{ Replace([]string) error }).Replace(append(clusterSetsUnder(cfgPath, e.Cluster), user...)); err != nil {
					return err
				}
				cfg, err := loadConfig(cmd)
				if err != nil {
					return err
				}
				if err := checkParallelConfig(*parallel, cfg); err != nil {
					return err
				}
				cfg.Output.Dir = outDir(out, cfg.Output.Dir, e.Name, args[0] == "all")
				p, err := experiments.ResolveParams(e, size, params)
				if err != nil {
					return usageError(err)
				}
				j := &job{e: e, cfg: cfg, size: size, params: p, head: "cluster " + clusterHead(cfg), m: baseManifest(cmd, cfg, "experiment"), parallel: *parallel, seeds: *seeds}
				if err := j.check(); err != nil {
					return err
				}
				jobs = append(jobs, j)
			}
			obs, stop, err := rf.startObserver(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer stop()
			var differs, failed []string
			var ran []*job
			for _, j := range jobs {
				err := j.runWith(cmd, obs)
				var ee *exitError
				switch {
				case errors.As(err, &ee) && ee.code == exitInterrupted:
					if args[0] == "all" {
						// What ran, and the one interrupted, go into the index.
						if ierr := writeAllIndex(cmd, append(ran, j)); ierr != nil {
							fmt.Fprintf(cmd.ErrOrStderr(), "vcluster: %v\n", ierr)
						}
					}
					return err // no further experiments
				case err != nil && len(jobs) == 1:
					return err
				case err != nil:
					// The others still run; the exit status says one failed.
					fmt.Fprintf(cmd.ErrOrStderr(), "vcluster: %s: %v\n", j.e.Name, err)
					failed = append(failed, j.e.Name)
					ran = append(ran, j)
					continue
				}
				ran = append(ran, j)
				fmt.Fprintln(w)
				b, _ := readManifestPassed(j.cfg.Output.Dir)
				if !b {
					differs = append(differs, j.e.Name)
				}
			}
			if args[0] == "all" {
				if err := writeAllIndex(cmd, ran); err != nil {
					return err
				}
			}
			if len(differs) > 0 {
				fmt.Fprintf(w, "shape differs from TARGETS in: %s\n", strings.Join(differs, ", "))
			}
			if len(failed) > 0 {
				return fmt.Errorf("%d of %d experiments failed: %s (see above)", len(failed), len(jobs), strings.Join(failed, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output `dir` (default: output.dir/<name>)")
	cmd.Flags().BoolVar(&quick, "quick", false, "quick size (tests, a first look)")
	cmd.Flags().BoolVar(&full, "full", false, "full size")
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "replay the run recorded in this manifest.json into --out (no --config, --set, --seed, --seeds, --quick or --full)")
	rf = addRunFlags(cmd)
	limitLinger(cmd.Flags())
	parallel = addParallelFlag(cmd)
	seeds = addSeedsFlag(cmd)
	return cmd
}

// listExperiments prints the catalogue: names (and aliases), TARGETS rows,
// cluster settings and parameters per size.
func listExperiments(w io.Writer) {
	for _, n := range experiments.Names() {
		e, _ := experiments.Lookup(n)
		fmt.Fprintf(w, "%-16s %-8s %s\n", n, strings.Join(e.Targets, ","), e.Title)
		for _, a := range experiments.Aliases(n) {
			fmt.Fprintf(w, "%-16s also: %s\n", "", a)
		}
		fmt.Fprintf(w, "%-16s cluster: %s\n", "", strings.Join(e.Cluster, " "))
		for _, p := range e.Params {
			fmt.Fprintf(w, "%-16s exp.%s=%s (quick %s, full %s): %s\n", "", p.Key, p.Default, p.Value(experiments.Quick), p.Value(experiments.Full), p.Doc)
		}
	}
}

// clusterHead is the report's cluster line for an experiment run.
// It names the rules a reader comparing MRC and RoCE needs (issue #16):
// the ECN preset, and MRC's PSN window, retry scope and fast-loss rule.
// Experiments that change them per point say so in their own notes.
func clusterHead(cfg config.Config) string {
	return fmt.Sprintf("%s, %d plane(s) × %s, %d hosts, seed %d; %s",
		cfg.Fabric.Preset, cfg.Fabric.Planes, cfg.Fabric.HostLinkSpeed, cfg.Fabric.Hosts, cfg.Seed, transportRules(cfg))
}

// transportRules names the ECN preset and MRC's PSN window, retry scope
// and fast-loss rule of cfg, for report heads.
func transportRules(cfg config.Config) string {
	ecn := "ECN off"
	if e := cfg.Fabric.Queue.ECN; e.Enabled {
		ecn = "ECN preset " + e.Preset
		if e.Preset == config.ECNAuto {
			ecn += fmt.Sprintf(" (%s for MRC, %s for RoCE)", config.ECNPresetFor(e.Preset, config.TransportMRC), config.ECNPresetFor(e.Preset, config.TransportRoCE))
		}
	}
	m := cfg.Transport.MRC
	return fmt.Sprintf("%s; MRC MPR %d × 128 PSNs, retries per %s, fast-loss rule %s", ecn, m.MPRUnits, m.RetryScope, m.LossDetection)
}

func outDir(out, cfgDir, name string, many bool) string {
	switch {
	case out == "":
		return filepath.Join(cfgDir, name)
	case many:
		return filepath.Join(out, name)
	}
	return out
}

// writeAllIndex prints the summary table of an `experiment all` run (one
// line per experiment that ran, from its manifest and results.json) and
// writes index.html and index.md into the directory that holds the
// experiments' directories.
func writeAllIndex(cmd *cobra.Command, jobs []*job) error {
	if len(jobs) == 0 {
		return nil
	}
	dir := filepath.Dir(jobs[0].cfg.Output.Dir)
	var es []experiments.IndexEntry
	for _, j := range jobs {
		sub, err := filepath.Rel(dir, j.cfg.Output.Dir)
		if err != nil || strings.HasPrefix(sub, "..") {
			sub = j.cfg.Output.Dir // not below the first one's parent: named as is
		}
		e, err := experiments.ReadIndexEntry(dir, filepath.ToSlash(sub))
		if err != nil {
			// A run that left no manifest still gets its line.
			e = experiments.IndexEntry{Dir: sub, Manifest: experiments.Manifest{Experiment: j.e.Name, TargetRows: j.e.Targets, Status: "failed: no manifest (" + err.Error() + ")"}}
		}
		es = append(es, e)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "summary:\n%s", experiments.SummaryTable(es))
	files, err := experiments.WriteIndex(dir, es)
	if err != nil {
		return fmt.Errorf("write the index: %w", err)
	}
	fmt.Fprintf(w, "index: %s\n", filepath.Join(dir, files[0]))
	return nil
}

func readManifestPassed(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return false, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return false, err
	}
	return m.ChecksPassed != nil && *m.ChecksPassed, nil
}
