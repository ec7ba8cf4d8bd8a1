package main

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/config"
)

// extraCommands are subcommand constructors registered by other files of
// this package from their init(), e.g.
//
//	func init() { extraCommands = append(extraCommands, newTopoCmd) }
var extraCommands []func() *cobra.Command

// newRootCmd builds the vcluster command tree. Every call returns a fresh
// tree, so tests can run commands in-process.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "vcluster",
		Short: "Virtual-cluster network simulator",
		Long: `vcluster simulates multi-plane Clos (and fat-tree) fabrics carrying the MRC
and RoCEv2 transports.

Every command that needs a configuration reads it from --config (YAML, see
docs/config.md), on top of the defaults and fabric.preset, then applies each
--set key=value in order, then --seed.`,
		SilenceUsage:  true, // errors are not usage problems unless they say so
		SilenceErrors: true, // execute prints them
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "YAML config `file` (see docs/config.md)")
	pf.StringArray("set", nil, "override one config value as `key=value` with a dotted lowerCamel key, e.g. fabric.planes=8; lists are comma-separated; repeatable, later wins")
	pf.Uint64("seed", 0, "override the config's seed (default: seed from the config, 1)")
	limit(pf, "seed", uintAny())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })

	root.AddCommand(newVersionCmd(), newRunCmd())
	for _, mk := range extraCommands {
		root.AddCommand(mk())
	}
	return root
}

// loadConfig resolves the configuration for cmd from the persistent
// --config, --set and --seed flags (see config.Load). Any problem, an
// unreadable file included, is returned as a usage error (exit status 2)
// whose message lists one problem per line.
func loadConfig(cmd *cobra.Command) (config.Config, error) {
	path, sets, err := configSources(cmd)
	if err != nil {
		return config.Config{}, err
	}
	cfg, err := loadConfigFrom(path, sets)
	if err != nil {
		return config.Config{}, usageError(flagConfigError(cmd, err))
	}
	return cfg, nil
}

// configSources returns cmd's --config path and its --set values with
// --seed appended.
func configSources(cmd *cobra.Command) (path string, sets []string, err error) {
	flags := cmd.Flags()
	if f := flags.Lookup("config"); f != nil {
		path = f.Value.String()
	}
	if f := flags.Lookup("set"); f != nil {
		s, err := flags.GetStringArray("set")
		if err != nil {
			return "", nil, usageError(err)
		}
		sets = append(sets, s...)
	}
	if f := flags.Lookup("seed"); f != nil && f.Changed {
		seed, err := flags.GetUint64("seed")
		if err != nil {
			return "", nil, usageError(err)
		}
		sets = append(sets, "seed="+strconv.FormatUint(seed, 10))
	}
	return path, sets, nil
}

// loadConfigFrom is config.Load of the file at path (without its exp
// section) and sets; the error lists one problem per line.
func loadConfigFrom(path string, sets []string) (config.Config, error) {
	return loadConfigLayers(path, nil, sets)
}

// noArgs is cobra.NoArgs as a usage error (exit status 2).
func noArgs(cmd *cobra.Command, args []string) error {
	return usageError(cobra.NoArgs(cmd, args))
}
