package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/experiments"
)

func init() { extraCommands = append(extraCommands, newExperimentCmd) }

func newExperimentCmd() *cobra.Command {
	var out string
	var quick, full bool
	cmd := &cobra.Command{
		Use:   "experiment list | all | <name>",
		Short: "Run a named experiment (or all of them) and write its report: results, plots, check against TARGETS",
		Long: `experiment runs one experiment from the catalogue ('list' shows it), or every
one ('all', each into <out>/<name>). Each experiment starts from its own
cluster settings (shown by list), then --config and --set as usual;
experiment parameters are --set exp.<key>=value. --quick and --full pick
the size. Every run writes manifest.json, config.yaml, results.csv,
results.json, report.md, report.html (plots embedded) and the plots as PNG
and SVG. The exit status is 0 when the run completed, whatever the check
says: a shape that differs from the published one is a finding.`,
		Example: `  vcluster experiment list
  vcluster experiment allreduce-loss --quick --out out/ar
  vcluster experiment allreduce-loss --set exp.size=128M --set exp.roceQPs=1,4,16
  vcluster experiment all --quick --out out/all`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("want one argument: list, all or an experiment name (%s)", strings.Join(experiments.Names(), ", ")))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			size, err := sizeFlag(quick, full)
			if err != nil {
				return err
			}
			if args[0] == "list" {
				for _, n := range experiments.Names() {
					e, _ := experiments.Lookup(n)
					fmt.Fprintf(w, "%-16s %-8s %s\n", n, strings.Join(e.TargetRows(), ","), e.Title())
					fmt.Fprintf(w, "%-16s cluster: %s\n", "", strings.Join(e.ClusterSets(), " "))
					for _, p := range e.Params() {
						fmt.Fprintf(w, "%-16s exp.%s=%s (quick %s, full %s): %s\n", "", p.Key, p.Default, p.Value(experiments.Quick), p.Value(experiments.Full), p.Doc)
					}
				}
				return nil
			}
			names := []string{args[0]}
			if args[0] == "all" {
				names = experiments.Names()
			}
			params, err := takeExpSets(cmd)
			if err != nil {
				return err
			}
			user, _ := cmd.Flags().GetStringArray("set")
			var differs []string
			for _, n := range names {
				e, err := experiments.Lookup(n)
				if err != nil {
					return usageError(err)
				}
				// The experiment's cluster settings go before the user's.
				f := cmd.Flags().Lookup("set")
				if err := f.Value.(interface{ Replace([]string) error }).Replace(append(append([]string{}, e.ClusterSets()...), user...)); err != nil {
					return err
				}
				cfg, err := loadConfig(cmd)
				if err != nil {
					return err
				}
				cfg.Output.Dir = outDir(out, cfg.Output.Dir, n, args[0] == "all")
				env, err := newEnv(cmd, e, cfg, size, params)
				if err != nil {
					return err
				}
				m, err := writeManifest(cmd, cfg)
				if err != nil {
					return err
				}
				m.Status, m.Files = "", []string{resolvedConfigFile}
				head := fmt.Sprintf("%s, %d plane(s) × %s, %d hosts, seed %d", cfg.Fabric.Preset, cfg.Fabric.Planes, cfg.Fabric.HostLinkSpeed, cfg.Fabric.Hosts, cfg.Seed)
				if err := runExperiment(w, e, env, "cluster "+head, nil, m); err != nil {
					return err
				}
				fmt.Fprintln(w)
				b, _ := readManifestPassed(cfg.Output.Dir)
				if !b {
					differs = append(differs, n)
				}
			}
			if len(differs) > 0 {
				fmt.Fprintf(w, "shape differs from TARGETS in: %s\n", strings.Join(differs, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output `dir` (default: output.dir/<name>)")
	cmd.Flags().BoolVar(&quick, "quick", false, "quick size (tests, a first look)")
	cmd.Flags().BoolVar(&full, "full", false, "full size")
	return cmd
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
