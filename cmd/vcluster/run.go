package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

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
	var out string
	var quick, full bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the default job: a fabric check (pings), then the default experiment (ring all-reduce, MRC vs RoCE under loss)",
		Long: `run resolves and validates the configuration, builds the cluster it describes
(fabric and virtual hosts), pings across it in every plane as a preflight
(RTTs next to the zero-load latency the topology predicts), then runs the
default experiment, ` + experiments.DefaultName + ` (TARGETS T2/T3): ring all-reduce over
every host with MRC (1 QP) and RoCE (1 and 8 QPs) at 0, 0.1% and 1% loss on
every link. It prints the table and the check, and writes a report directory:

  manifest.json       versions, seed, resolved config, parameters, wall time, events
  config.yaml         the resolved configuration (loadable with --config)
  results.csv/.json   the experiment's rows
  report.md/.html     what ran, the preflight, the table, plots, the check
  busbw_vs_loss.png/.svg
  pings.csv, counters.csv, topology.dot   the preflight

Experiment parameters are set with --set exp.<key>=value (see
'vcluster experiment list'). An invalid configuration exits with status 2
before anything is created.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			params, err := takeExpSets(cmd)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if out != "" {
				cfg.Output.Dir = out
			}
			e, err := experiments.Lookup(experiments.DefaultName)
			if err != nil {
				return err
			}
			size, err := sizeFlag(quick, full)
			if err != nil {
				return err
			}
			env, err := newEnv(cmd, e, cfg, size, params)
			if err != nil {
				return err
			}
			m, err := writeManifest(cmd, cfg)
			if err != nil {
				return err
			}
			so, err := smokeRun(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
			if err != nil {
				return err
			}
			m.Status = ""
			return runExperiment(cmd.OutOrStdout(), e, env, so.head, []experiments.Section{so.preflight}, m)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output `dir` (default: output.dir from the config, \"out\")")
	cmd.Flags().BoolVar(&quick, "quick", false, "run the experiment at its quick size")
	cmd.Flags().BoolVar(&full, "full", false, "run the experiment at its full size")
	return cmd
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

func newEnv(cmd *cobra.Command, e experiments.Experiment, cfg config.Config, size experiments.Size, params []string) (*experiments.Env, error) {
	p, err := experiments.ResolveParams(e, size, params)
	if err != nil {
		return nil, usageError(err)
	}
	return &experiments.Env{Config: cfg, Size: size, Params: p, Progress: io.Discard}, nil
}

// runExperiment runs e, writes its report into env.Config.Output.Dir and
// prints the table and the check table.
func runExperiment(w io.Writer, e experiments.Experiment, env *experiments.Env, head string, before []experiments.Section, m manifest) error {
	dir := env.Config.Output.Dir
	r, err := experiments.Execute(context.Background(), e, env, dir, head, before, m)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %s (%s, TARGETS %v)\n%s\n\n%s\n", e.Name(), e.Title(), env.Size, e.TargetRows(), paramLine(e, env), r.Table)
	fmt.Fprintf(w, "check:\n%s\n", experiments.CheckTable(r.Checks))
	fmt.Fprintf(w, "report: %s\n", filepath.Join(dir, "report.md"))
	return nil
}

func paramLine(e experiments.Experiment, env *experiments.Env) string {
	s := "parameters:"
	for _, p := range e.Params() {
		s += " " + p.Key + "=" + env.Params[p.Key]
	}
	return s
}

func writeManifest(cmd *cobra.Command, cfg config.Config) (manifest, error) {
	dir := cfg.Output.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return manifest{}, fmt.Errorf("create output dir: %w", err)
	}
	v, g, gv := buildVersions()
	m := manifest{
		Tool:          "vcluster",
		Version:       v,
		GoVersion:     g,
		GvisorVersion: gv,
		Seed:          cfg.Seed,
		Status:        statusStarted,
		Config:        cfg,
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
	m.Files = []string{resolvedConfigFile, "topology.dot", "pings.csv", "counters.csv"}
	return m, nil
}
