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
	for _, f := range []string{"config", "set", "seed", "quick", "full"} {
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
	e, cfg, err := m.Replay()
	if err != nil {
		return usageError(fmt.Errorf("invalid manifest %s:\n%w", path, err))
	}
	if name != "" {
		want, err := experiments.Lookup(name)
		if err != nil {
			return usageError(err)
		}
		if want.Name() != e.Name() {
			return usageError(fmt.Errorf("invalid manifest %s:\nexperiment: is %q, the command asks for %q", path, e.Name(), want.Name()))
		}
	}
	v, g, gv := buildVersions()
	if m.Version != v || m.GoVersion != g || m.GvisorVersion != gv {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s was written by vcluster %s (%s, gvisor %s); this is %s (%s, gvisor %s): results may differ\n",
			path, m.Version, m.GoVersion, m.GvisorVersion, v, g, gv)
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
	// A partitioned run (manifest parallel ≥ 1) is replayed partitioned,
	// with the recorded worker count unless --parallel says otherwise
	// (results are the same for every N ≥ 1, not for 0 against N ≥ 1).
	parallel := m.Parallel
	if f := cmd.Flags().Lookup("parallel"); f != nil && f.Changed {
		if parallel, err = cmd.Flags().GetInt("parallel"); err != nil {
			return usageError(err)
		}
		if (parallel > 0) != (m.Parallel > 0) {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s was run with --parallel %d, this replay uses --parallel %d: the classic loop (0) and partitioned runs (≥ 1) break equal-time ties differently, results may differ\n", path, m.Parallel, parallel)
		}
	}
	if err := checkParallelExperiments(parallel, []experiments.Experiment{e}); err != nil {
		return err
	}
	if err := checkParallelConfig(parallel, cfg); err != nil {
		return err
	}
	j := &job{e: e, cfg: cfg, size: m.Size, params: m.Params, preflight: preflight,
		head: "cluster " + clusterHead(cfg), m: base, parallel: parallel}
	fmt.Fprintf(cmd.ErrOrStderr(), "replaying %s: %s (%s), seed %d, into %s\n", path, e.Name(), m.Size, cfg.Seed, out)
	return j.run(cmd, rf)
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
