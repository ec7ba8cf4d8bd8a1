package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

func init() { extraCommands = append(extraCommands, newBenchCmd) }

// benchCommands are the `vcluster bench` subcommands; other files add theirs.
var benchCommands []func() *cobra.Command

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure simulator speed and memory (results go in docs/benchmarks.md)",
		Args:  noArgs,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return checkObserved(c)
		},
	}
	(&runFlags{}).register(cmd.PersistentFlags())
	limitLinger(cmd.PersistentFlags())
	cmd.AddCommand(newBenchLoopCmd(), newBenchFabricCmd())
	for _, mk := range benchCommands {
		cmd.AddCommand(mk())
	}
	return cmd
}

func newBenchLoopCmd() *cobra.Command {
	var events int
	cmd := &cobra.Command{
		Use:   "loop",
		Short: "Event-loop throughput (hold model) with 1 000 and 100 000 pending events",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-10s %12s %12s\n", "pending", "events", "Mevents/s")
			for _, pending := range []int{1000, 100000} {
				h := sim.NewHoldModel(1, pending)
				start := time.Now()
				h.Steps(events)
				el := time.Since(start)
				fmt.Fprintf(w, "%-10d %12d %12.2f\n", pending, events, float64(events)/el.Seconds()/1e6)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&events, "events", 20_000_000, "events to run per measurement")
	limit(cmd.Flags(), "events", intIn(1, 100*maxFlagCount, ""))
	return cmd
}

func newBenchFabricCmd() *cobra.Command {
	var hops int
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "Switch forwarding cost per packet-hop (parse, decide, enqueue, serialize, deliver)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%-8s %12s %12s %12s\n", "mode", "hops", "ns/hop", "events/hop")
			for _, m := range fabric.ForwardingModes() {
				b, err := fabric.NewHopBench(m)
				if err != nil {
					return err
				}
				start := time.Now()
				ev := b.Run(hops)
				el := time.Since(start)
				fmt.Fprintf(w, "%-8s %12d %12.1f %12.2f\n", m, b.Hops, float64(el.Nanoseconds())/float64(b.Hops), float64(ev)/float64(b.Hops))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&hops, "hops", 10_000_000, "packet-hops per measurement")
	limit(cmd.Flags(), "hops", intIn(1, 100*maxFlagCount, ""))
	return cmd
}
