package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/experiments"
)

// replay runs again what the manifest at path recorded — experiment, size,
// parameters, resolved config and seed; the fabric preflight too when the
// manifest is from `vcluster run` — into out. name, if not empty, must
// name the manifest's experiment (an alias will do). Everything but
// manifest.json comes out as in the recorded run when the tool and Go
// versions are the same; a different version is warned about.
func replay(cmd *cobra.Command, path, out, name string, rf *runFlags) error {
	for _, f := range []string{"config", "set", "seed", "seeds", "quick", "full"} {
		if fl := cmd.Flags().Lookup(f); fl != nil && fl.Changed {
			return usageError(fmt.Errorf("--manifest runs what the manifest recorded: it cannot be combined with --%s", f))
		}
	}
	if out == "" {
		return usageError(fmt.Errorf("--manifest needs --out: a new directory for the replay"))
	}
	if same, _ := sameDir(out, filepath.Dir(path)); same {
		return usageError(fmt.Errorf("--out %s: is the recorded run's directory; replay into a new one", out))
	}
	m, err := experiments.ReadManifest(path)
	if err != nil {
		return usageError(fmt.Errorf("invalid manifest %s:\n%w", path, err))
	}
	// A partitioned run (manifest parallel ≥ 1) is replayed partitioned,
	// with the recorded worker count unless --parallel says otherwise
	// (results are the same for every N ≥ 1, not for 0 against N ≥ 1).
	parallel := -1
	if f := cmd.Flags().Lookup("parallel"); f != nil && f.Changed {
		if parallel, err = cmd.Flags().GetInt("parallel"); err != nil {
			return usageError(err)
		}
	}
	j, warnings, err := replayPlan(m, path, out, name, parallel)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "replaying %s: %s (%s), seed %d, into %s\n", path, j.e.Name, m.Size, j.cfg.Seed, out)
	return j.run(cmd, rf)
}

// replayPlan turns the manifest m read from path into the job that runs it
// again into out, checked as any run is before it starts (experiment,
// parameters and their ranges, config, --parallel, memory): everything a
// replay does short of running. name, if not empty, must name m's
// experiment; parallel ≥ 0 overrides the recorded --parallel. Problems are
// usage errors naming the manifest field; warnings are for stderr.
func replayPlan(m manifest, path, out, name string, parallel int) (*job, []string, error) {
	e, cfg, err := m.Replay()
	if err != nil {
		return nil, nil, usageError(fmt.Errorf("invalid manifest %s:\n%w", path, err))
	}
	if name != "" {
		want, err := experiments.Lookup(name)
		if err != nil {
			return nil, nil, usageError(err)
		}
		if want.Name != e.Name {
			return nil, nil, usageError(fmt.Errorf("invalid manifest %s:\nexperiment: is %q, the command asks for %q", path, e.Name, want.Name))
		}
	}
	var warnings []string
	v, g, gv := buildVersions()
	if m.Version != v || m.GoVersion != g || m.GvisorVersion != gv {
		warnings = append(warnings, fmt.Sprintf("%s was written by vcluster %s (%s, gvisor %s); this is %s (%s, gvisor %s): results may differ",
			path, m.Version, m.GoVersion, m.GvisorVersion, v, g, gv))
	}
	cfg.Output.Dir = out
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	// Manifests from before the command field: `run` wrote pings.csv.
	preflight := m.Command == "run" || m.Command == "" && slices.Contains(m.Files, "pings.csv")
	base := manifest{Tool: "vcluster", Command: "experiment", ReplayOf: abs, Version: v, GoVersion: g, GvisorVersion: gv,
		ConfigFile: m.ConfigFile, Sets: m.Sets}
	if preflight {
		base.Command = "run"
	}
	if parallel < 0 {
		parallel = m.Parallel
	} else if (parallel > 0) != (m.Parallel > 0) {
		warnings = append(warnings, fmt.Sprintf("%s was run with --parallel %d, this replay uses --parallel %d: the classic loop (0) and partitioned runs (≥ 1) break equal-time ties differently, results may differ", path, m.Parallel, parallel))
	}
	if m.Parallel < 0 || m.Parallel > maxFlagWorkers {
		return nil, nil, usageError(fmt.Errorf("invalid manifest %s:\nparallel: %d is out of range; must be an integer in [0, %d]", path, m.Parallel, maxFlagWorkers))
	}
	if err := checkParallelConfig(parallel, cfg); err != nil {
		return nil, nil, err
	}
	if m.Seeds < 0 || m.Seeds > experiments.MaxSeeds {
		return nil, nil, usageError(fmt.Errorf("invalid manifest %s:\nseeds: %d is out of range; must be an integer in [0, %d] (0: one seed)", path, m.Seeds, experiments.MaxSeeds))
	}
	j := &job{e: e, cfg: cfg, size: m.Size, params: m.Params, preflight: preflight,
		head: "cluster " + clusterHead(cfg), m: base, parallel: parallel, seeds: max(m.Seeds, 1)}
	if err := j.check(); err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return j, warnings, nil
}

// sameDir reports whether a and b are the same existing directory.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
