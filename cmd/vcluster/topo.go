package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

func init() { extraCommands = append(extraCommands, newTopoCmd) }

// presetFlags adds --preset and --hosts, shorthands for --set
// fabric.preset=… and --set fabric.hosts=…, and returns the loader that
// applies them and resolves the config (loadConfig).
func presetFlags(cmd *cobra.Command) func() (config.Config, error) {
	var preset string
	var hosts int
	cmd.Flags().StringVar(&preset, "preset", "", "cluster preset A|B|C|D (same as --set fabric.preset=…)")
	cmd.Flags().IntVar(&hosts, "hosts", 0, "number of hosts (same as --set fabric.hosts=…; 0: the preset's)")
	limit(cmd.Flags(), "hosts", intIn(0, maxFlagHosts, "0: the preset's"))
	return func() (config.Config, error) {
		if preset != "" {
			if err := cmd.Flags().Set("set", "fabric.preset="+preset); err != nil {
				return config.Config{}, usageError(err)
			}
		}
		if hosts != 0 {
			if err := cmd.Flags().Set("set", "fabric.hosts="+strconv.Itoa(hosts)); err != nil {
				return config.Config{}, usageError(err)
			}
		}
		return loadConfig(cmd)
	}
}

func newTopoCmd() *cobra.Command {
	var dot string
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Build the configured fabric, print its shape and optionally write Graphviz DOT",
		Example: `  vcluster topo --preset C --hosts 16 --dot out.dot
  vcluster topo --set fabric.topology=fattree --set fabric.k=4`,
		Args: noArgs,
	}
	load := presetFlags(cmd)
	cmd.Flags().StringVar(&dot, "dot", "", "write the topology as Graphviz DOT to `file`")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := load()
		if err != nil {
			return err
		}
		if err := checkMemory(cfg, 0); err != nil {
			return err
		}
		loop := sim.NewLoop(sim.Options{Seed: cfg.Seed})
		topo, err := cluster.BuildTopology(loop, cfg)
		if err != nil {
			return usageError(err)
		}
		w := cmd.OutOrStdout()
		tiers := map[int]int{}
		for _, s := range topo.Switches {
			tiers[s.Tier]++
		}
		fmt.Fprintf(w, "topology   %s, %d plane(s), forwarding %s\n", topo.Kind, topo.Planes, topo.Mode)
		fmt.Fprintf(w, "hosts      %d (%d NIC ports)\n", topo.Hosts, topo.Hosts*topo.Planes)
		if topo.Kind == fabric.KindClos {
			c := topo.Clos
			fmt.Fprintf(w, "switches   %d T0 + %d T1 per plane (%d in all)\n", c.T0, c.T1, len(topo.Switches))
			fmt.Fprintf(w, "links      host %s / %v, fabric %s / %v\n", fabric.FormatRate(c.HostRate), c.HostDelay, fabric.FormatRate(c.FabricRate), c.FabricDelay)
		} else {
			fmt.Fprintf(w, "switches   %d edge, %d aggregation, %d core (k=%d)\n", tiers[0], tiers[1], tiers[2], topo.FatTree.K)
			fmt.Fprintf(w, "links      %s / %v\n", fabric.FormatRate(topo.FatTree.Rate), topo.FatTree.Delay)
		}
		fmt.Fprintf(w, "cables     %d\n", len(topo.Links)/2)
		if topo.Hosts > 1 {
			far := topo.Hosts - 1
			fmt.Fprintf(w, "paths      %d per plane between h0 and h%d; h0 plane 0 = %s\n", topo.NumPaths(0, far), far, fabric.AddrString(topo.HostAddr(0, 0)))
		}
		if dot != "" {
			f, err := os.Create(dot)
			if err != nil {
				return err
			}
			if err := topo.WriteDOT(f); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(w, "wrote      %s\n", dot)
		}
		return nil
	}
	return cmd
}
