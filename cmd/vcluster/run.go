package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
)

// manifest is <out>/manifest.json: written at the start of every run and
// completed (experiment, parameters, wall time, events) at its end.
type manifest = experiments.Manifest

const (
	manifestFile       = "manifest.json"
	resolvedConfigFile = "config.yaml"
	statusStarted      = "started: fabric check, then the default experiment (" + experiments.DefaultName + ")"
)

func newRunCmd() *cobra.Command {
	var out, manifestPath string
	var quick, full bool
	var rf *runFlags
	var parallel, seeds *int
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the default job: a fabric check (pings), then the default experiment (ring all-reduce, MRC vs RoCE under loss)",
		Long: `run resolves and validates the configuration, builds the cluster it describes
(fabric and virtual hosts), pings across it in every plane as a preflight
(RTTs next to the zero-load latency the topology predicts), then runs the
default experiment, ` + experiments.DefaultName + ` (TARGETS T2/T3): ring all-reduce over
every host with MRC (1 QP, 4 × 100G planes) and RoCE (1, 8 and 16 QPs, one
400G plane with PFC: the published setup) at 0, 0.1% and 1% loss on every
link, on the paper's timing (switch and NIC latency calibrated from T1),
with the experiment's cluster settings applied before --config and --set.
Every check is judged on the median of --seeds seeds (default 3). It prints
the table and the check, and writes a report directory:

  manifest.json       versions, seed, resolved config, parameters, wall time, events
  config.yaml         the resolved configuration (loadable with --config)
  results.csv/.json   the experiment's rows
  report.md/.html     what ran, the preflight, the table, plots, the check
  busbw_vs_loss.png/.svg
  counters.csv        per-port counters of the preflight and of every point
  pings.csv, topology.dot   the preflight
  pathquality_samples.csv, pathquality_adverts.csv, hdc.jsonl, hdc.pcap
                      with fabric.pathQuality on: every switch's sampled
                      ports (utilization, queue, delay, score), its path
                      bandwidth adverts, the high-delay captures (JSON
                      lines, and their 150-byte excerpts for tshark)

Experiment parameters are set with --set exp.<key>=value or in an exp:
section of the --config file (see 'vcluster experiment list'). An invalid
configuration, an experiment parameter out of range or a run that cannot
fit in memory exits with status 2 before anything is created. A failed
row (an error, a stalled job, a QP error, a wrong byte) exits 1 after the
report is written, with what failed on the last line of stderr. SIGINT or
SIGTERM stops the run at the next event boundary: the manifest says
"interrupted", the points done so far are written, and it exits 130.

--manifest dir/manifest.json runs again exactly what that manifest recorded
(experiment, size, parameters, resolved config, seed) into --out: its
results.csv is byte-identical to the recorded run's.

While it runs, stderr shows a progress bar on a terminal (log lines
otherwise); --metrics :9464 serves the fabric and transport counters to
Prometheus.

--parallel N runs the experiment's clusters cut into partitions on N
goroutines (results.csv is the same for every N, the classic loop's, N = 0,
included). The preflight pings go through the
hosts' netstacks, which only the classic loop runs: the preflight keeps
its own classic cluster.`,
		Example: `  vcluster run
  vcluster run --quick --out out/quick
  vcluster run --manifest out/quick/manifest.json --out out/replay
  vcluster run --metrics :9464
  vcluster run --quick --parallel 2`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if manifestPath != "" {
				return replay(cmd, manifestPath, out, "", rf)
			}
			params, err := expParams(cmd)
			if err != nil {
				return err
			}
			e, err := experiments.Lookup(experiments.DefaultName)
			if err != nil {
				return err
			}
			// The default experiment's cluster settings (the paper's
			// timing, cluster C) go before the user's config file and
			// --set, as for 'vcluster experiment'.
			user, _ := cmd.Flags().GetStringArray("set")
			var cfgPath string
			if f := cmd.Flags().Lookup("config"); f != nil {
				cfgPath = f.Value.String()
			}
			if err := cmd.Flags().Lookup("set").Value.(interface{ Replace([]string) error }).Replace(append(clusterSetsUnder(cfgPath, e.Cluster), user...)); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if out != "" {
				cfg.Output.Dir = out
			}
			size, err := sizeFlag(quick, full)
			if err != nil {
				return err
			}
			p, err := experiments.ResolveParams(e, size, params)
			if err != nil {
				return usageError(err)
			}
			if err := checkParallelConfig(*parallel, cfg); err != nil {
				return err
			}
			j := &job{e: e, cfg: cfg, size: size, params: p, preflight: true, m: baseManifest(cmd, cfg, "run"), parallel: *parallel, seeds: *seeds}
			if err := j.check(); err != nil {
				return err
			}
			return j.run(cmd, rf)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output `dir` (default: output.dir from the config, \"out\")")
	cmd.Flags().BoolVar(&quick, "quick", false, "run the experiment at its quick size")
	cmd.Flags().BoolVar(&full, "full", false, "run the experiment at its full size")
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "replay the run recorded in this manifest.json into --out (no --config, --set, --seed, --quick or --full)")
	rf = addRunFlags(cmd)
	limitLinger(cmd.Flags())
	parallel = addParallelFlag(cmd)
	seeds = addSeedsFlag(cmd)
	return cmd
}

// job is one experiment run of the CLI: what to run, where, and the
// provenance that goes into its manifest.
type job struct {
	e         *experiments.Experiment
	cfg       config.Config // Output.Dir is the report directory
	size      experiments.Size
	params    map[string]string // resolved
	preflight bool              // vcluster run: the fabric check first
	head      string            // cluster line of the report (without preflight)
	m         manifest
	parallel  int // --parallel: worker goroutines of partitioned clusters (0: classic loop)
	seeds     int // --seeds: how many seeds the checks are judged on
}

// run writes the manifest (status "started") and config.yaml, runs the
// preflight if asked, then the experiment, and completes the manifest.
func (j *job) run(cmd *cobra.Command, rf *runFlags) error {
	obs, stop, err := rf.startObserver(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer stop()
	return j.runWith(cmd, obs)
}

func (j *job) runWith(cmd *cobra.Command, obs *observer) (err error) {
	stopsOnInterrupt()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	m, err := startManifest(j.m, j.cfg, j.preflight)
	if err != nil {
		return err
	}
	dir := j.cfg.Output.Dir
	// counters.csv gets a block per cluster as the observer folds it (the
	// last one at obs.End), so no point's counters wait in memory.
	counters, err := createCountersCSV(filepath.Join(dir, countersFile))
	if err != nil {
		return j.failed(m, err)
	}
	obs.setCountersCSV(counters)
	defer func() {
		obs.setCountersCSV(nil)
		if cerr := counters.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if len(pathQualityFileNames(j.cfg)) > 0 {
		pq, err := createPathQualityFiles(dir)
		if err != nil {
			return j.failed(m, err)
		}
		obs.setPathQualityFiles(pq)
		defer func() {
			obs.setPathQualityFiles(nil)
			if cerr := pq.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	capt, err := startCapture(obs, j.cfg)
	if err != nil {
		return j.failed(m, err)
	}
	defer func() {
		if cerr := capt.finish(cmd.ErrOrStderr()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	env := j.env(obs)
	head, before := j.head, []experiments.Section(nil)
	if j.preflight {
		// The preflight pings go through the hosts' netstacks, which only
		// the classic loop runs: it builds its own classic cluster whatever
		// --parallel says (the experiment's clusters are partitioned).
		obs.Begin("preflight")
		so, err := smokeRun(cmd.OutOrStdout(), obs, j.cfg)
		where := obs.where()
		obs.End()
		if interrupted(ctx) {
			return j.stopped(m, where+" (preflight)", "the preflight had not finished")
		}
		if err != nil {
			return j.failed(m, fmt.Errorf("preflight: %w", err))
		}
		head, before = so.head, []experiments.Section{so.preflight}
	}
	if j.parallel > 0 {
		head += "; partitioned clusters (--parallel ≥ 1: the same results for every N)"
		if j.preflight {
			head += ", the preflight on the classic loop"
		}
	}

	obs.Begin(j.e.Name)
	r, err := experiments.Execute(ctx, j.e, env, dir, head, before, m)
	where := obs.where()
	obs.End()
	var fe *experiments.FailedError
	switch {
	case errors.Is(err, experiments.ErrInterrupted):
		left := "manifest in " + filepath.Join(dir, manifestFile)
		if r != nil && len(r.Rows) > 0 {
			left = "partial results in " + dir
		}
		return interruptedError(where, left)
	case errors.As(err, &fe):
		printResults(cmd.OutOrStdout(), j.e, env, r)
		return fmt.Errorf("%d of %d rows failed: %s", len(fe.Failed), fe.Points, strings.Join(fe.Failed, "; "))
	case err != nil:
		return err
	}
	printResults(cmd.OutOrStdout(), j.e, env, r)
	return nil
}

// env is the experiment environment of j (obs may be nil: nothing runs).
func (j *job) env(obs *observer) *experiments.Env {
	env := &experiments.Env{Config: j.cfg, Size: j.size, Params: j.params, Parallel: j.parallel, Seeds: j.seeds}
	env.Beside = []string{resolvedConfigFile, countersFile}
	if j.preflight {
		env.Beside = append(env.Beside, "pings.csv", "topology.dot")
	}
	env.Beside = append(env.Beside, pathQualityFileNames(j.cfg)...)
	switch {
	case len(j.cfg.Output.Pcap) == 0:
	case j.cfg.Output.PcapFormat == config.PcapFormatClassic:
		env.Beside = append(env.Beside, "<port>.pcap (one per captured port and point)")
	default:
		env.Beside = append(env.Beside, cluster.CaptureFileNG)
	}
	if obs != nil {
		env.Progress, env.Observer = obs.Log(), obs
	}
	return env
}

// check refuses, before anything runs or is written, a job whose
// experiment parameters are out of range or whose memory would not fit
// (usage errors, exit status 2).
func (j *job) check() error {
	env := j.env(nil)
	if err := experiments.CheckParams(j.e, env); err != nil {
		return usageError(fmt.Errorf("invalid experiment parameters for %s:\n%w", j.e.Name, err))
	}
	cfg := j.cfg
	need := experiments.PayloadBytesPerHost(j.e, env)
	if need > 0 {
		cfg.Transport.Payload = config.PayloadReal
	} else {
		cfg.Transport.Payload = config.PayloadElided
	}
	if err := checkMemory(cfg, need); err != nil {
		return fmt.Errorf("%s: %w", j.e.Name, err)
	}
	return nil
}

// stopped completes the manifest of an interrupted job before its
// experiment ran (status "interrupted") and returns the interrupt error.
func (j *job) stopped(m manifest, where, why string) error {
	m.Status = experiments.StatusInterrupted
	m.Files = append(m.Files, manifestFile)
	if err := experiments.WriteManifest(j.cfg.Output.Dir, m); err != nil {
		return err
	}
	return interruptedError(where, why+"; manifest in "+filepath.Join(j.cfg.Output.Dir, manifestFile))
}

// failed completes the manifest of a job that failed before its
// experiment ran ("failed: …", never "started") and returns err.
func (j *job) failed(m manifest, err error) error {
	m.Status = "failed: " + err.Error()
	m.Files = append(m.Files, manifestFile)
	if werr := experiments.WriteManifest(j.cfg.Output.Dir, m); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

func sizeFlag(quick, full bool) (experiments.Size, error) {
	switch {
	case quick && full:
		return "", usageError(fmt.Errorf("--quick and --full exclude each other"))
	case quick:
		return experiments.Quick, nil
	case full:
		return experiments.Full, nil
	}
	return experiments.Default, nil
}

// takeExpSets removes exp.key=value entries from --set and returns them.
func takeExpSets(cmd *cobra.Command) ([]string, error) {
	f := cmd.Flags().Lookup("set")
	if f == nil {
		return nil, nil
	}
	sets, err := cmd.Flags().GetStringArray("set")
	if err != nil {
		return nil, usageError(err)
	}
	cl, params := experiments.SplitSets(sets)
	if err := f.Value.(interface{ Replace([]string) error }).Replace(cl); err != nil {
		return nil, err
	}
	return params, nil
}

// expParams returns the experiment parameters of the command line: the
// --config file's exp: section, then --set exp.key=value (which win), and
// takes the latter out of --set.
func expParams(cmd *cobra.Command) ([]string, error) {
	var path string
	if f := cmd.Flags().Lookup("config"); f != nil {
		path = f.Value.String()
	}
	fromFile, err := configExpParams(path)
	if err != nil {
		return nil, err
	}
	sets, err := takeExpSets(cmd)
	if err != nil {
		return nil, err
	}
	return append(fromFile, sets...), nil
}

// printResults prints what ran, the table, the check table and where the
// report is.
func printResults(w io.Writer, e *experiments.Experiment, env *experiments.Env, r *experiments.Results) {
	fmt.Fprintf(w, "%s: %s (%s, TARGETS %v)\n%s\n\n%s\n", e.Name, e.Title, env.Size, e.Targets, paramLine(e, env), r.Table)
	fmt.Fprintf(w, "check:\n%s\n", experiments.CheckTable(r.Checks))
	fmt.Fprintf(w, "report: %s\n", filepath.Join(env.Config.Output.Dir, "report.md"))
}

func paramLine(e *experiments.Experiment, env *experiments.Env) string {
	s := "parameters:"
	for _, p := range e.Params {
		s += " " + p.Key + "=" + env.Params[p.Key]
	}
	return s
}

// baseManifest is the provenance part of a run's manifest, from cmd's
// flags: versions, seed, config file, --set values.
func baseManifest(cmd *cobra.Command, cfg config.Config, command string) manifest {
	v, g, gv := buildVersions()
	m := manifest{
		Tool:          "vcluster",
		Command:       command,
		Version:       v,
		GoVersion:     g,
		GvisorVersion: gv,
		Seed:          cfg.Seed,
	}
	if f := cmd.Flags().Lookup("config"); f != nil {
		m.ConfigFile = f.Value.String()
	}
	if sets, err := cmd.Flags().GetStringArray("set"); err == nil {
		m.Sets = sets
	}
	if f := cmd.Flags().Lookup("seed"); f != nil && f.Changed {
		m.Sets = append(m.Sets, "seed="+f.Value.String())
	}
	return m
}

// startManifest creates the output directory and writes manifest.json
// (status "started") and config.yaml. It returns the manifest to complete.
func startManifest(m manifest, cfg config.Config, preflight bool) (manifest, error) {
	dir := cfg.Output.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return manifest{}, fmt.Errorf("create output dir: %w", err)
	}
	m.Seed, m.Config = cfg.Seed, cfg
	m.Status = "started"
	if preflight {
		m.Status = statusStarted
	}
	if err := experiments.WriteManifest(dir, m); err != nil {
		return m, fmt.Errorf("write manifest: %w", err)
	}
	y, err := cfg.YAML()
	if err != nil {
		return m, err
	}
	if err := os.WriteFile(filepath.Join(dir, resolvedConfigFile), y, 0o644); err != nil {
		return m, fmt.Errorf("write resolved config: %w", err)
	}
	m.Status, m.Files = "", []string{resolvedConfigFile, countersFile} // Execute writes the final status
	if preflight {
		m.Files = append(m.Files, "topology.dot", "pings.csv")
	}
	m.Files = append(m.Files, pathQualityFileNames(cfg)...)
	return m, nil
}
