package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
)

// addParallelFlag registers --parallel on cmd and returns where its value
// lands. 0 (the default) is the classic single loop; N ≥ 1 is the
// partitioned model (fabric cut by pod or T0 index, links ranked) on N
// worker goroutines, whose results are the same for every N.
func addParallelFlag(cmd *cobra.Command) *int {
	n := new(int)
	cmd.Flags().IntVar(n, "parallel", 0, "run the fabric cut into partitions (pods / T0 groups) on N goroutines; results are identical for every N, the classic single loop (0) included (collective: from its second size on, N ≥ 1 starts each size at a window boundary)")
	limit(cmd.Flags(), "parallel", intIn(0, maxFlagWorkers, "0: the classic single loop"))
	return n
}

// seedsDefault is --seeds' default. The command tests set it to 1: they
// test the commands' mechanics, and judging verdicts over seeds is
// experiments.TestQuickRunsPass's job (TestSeedsFlag runs --seeds 3).
var seedsDefault = experiments.DefaultSeeds

// addSeedsFlag registers --seeds on cmd (experiment, run) and returns
// where its value goes.
func addSeedsFlag(cmd *cobra.Command) *int {
	n := new(int)
	cmd.Flags().IntVar(n, "seeds", seedsDefault, "judge every check on N seeds (the config's seed, then seed+1, …; the ECMP hash seed moves with it): a check passes when the median of its seeds' values lies in its band; the table and plots show the first seed, results.csv every seed's rows")
	limit(cmd.Flags(), "seeds", intIn(1, experiments.MaxSeeds, "the number of seeds"))
	return n
}

// rejectParallel refuses --parallel N ≥ 1 for a command that cannot run
// partitioned; why says what and why (see unpartitioned).
func rejectParallel(n int, why string) error {
	if n <= 0 {
		return nil
	}
	return usageError(fmt.Errorf("--parallel: %s; run it without --parallel", why))
}

// parallelCluster builds the cluster for --parallel n: cluster.New for 0,
// otherwise the partitioned cluster on n workers with 4n partitions (at
// most one per pod or T0; cluster.NewForWorkers).
func parallelCluster(cfg config.Config, n int) (*cluster.Cluster, error) {
	c, err := cluster.NewForWorkers(cfg, n)
	if err != nil && n > 0 {
		return nil, usageError(err)
	}
	return c, err
}

// parallelNote is what a command's summary line says about how the
// cluster ran ("" for the classic loop).
func parallelNote(c *cluster.Cluster) string {
	p := c.Parallel()
	if p == nil || c.Partitioning() == nil { // --parallel 0: one loop, not cut
		return ""
	}
	return fmt.Sprintf(", partitioned: %d partition(s) on %d goroutine(s)", len(p.Loops), p.Stats.Workers)
}

// checkParallelExperiments refuses --parallel n ≥ 1 (exit status 2) when
// one of es cannot run partitioned (experiments.SerialReason), naming
// each such experiment and the reason.
func checkParallelExperiments(n int, es []experiments.Experiment) error {
	if n <= 0 {
		return nil
	}
	var bad []string
	for _, e := range es {
		if why := experiments.SerialReason(e); why != "" {
			bad = append(bad, fmt.Sprintf("experiment %s cannot run partitioned: %s", e.Name(), why))
		}
	}
	if len(bad) > 0 {
		return usageError(fmt.Errorf("--parallel: %s; run it without --parallel (experiments that can: %s)", strings.Join(bad, "; "), strings.Join(partitionableExperiments(), ", ")))
	}
	return nil
}

// checkParallelConfig refuses --parallel n ≥ 1 (exit status 2) for a
// configuration that cannot run partitioned (cluster.CheckParallel:
// real-time pacing, pcap taps, TCP hosts).
func checkParallelConfig(n int, cfg config.Config) error {
	if n <= 0 {
		return nil
	}
	if err := cluster.CheckParallel(cfg); err != nil {
		return usageError(fmt.Errorf("--parallel: %w", err))
	}
	return nil
}

// partitionableExperiments lists the catalogue's experiments that can run
// partitioned.
func partitionableExperiments() []string {
	var ok []string
	for _, n := range experiments.Names() {
		if e, _ := experiments.Lookup(n); experiments.SerialReason(e) == "" {
			ok = append(ok, n)
		}
	}
	return ok
}

// unpartitioned names the commands that simulate but cannot run
// partitioned, and why; they take --parallel so that asking for it gets
// the reason (exit status 2) instead of "unknown flag". (run, experiment,
// collective and drill run partitioned: experiments say for themselves,
// experiments.SerialReason; fault plans, Clustermapper and samplers act
// as global events between windows, sim.Parallel.At.)
// (ping too: partitioned hosts give each netstack a random stream of its
// own.) Empty today.
var unpartitioned = map[string]string{}

// refuseParallel gives cmd a --parallel flag that only a value of 0
// passes (see unpartitioned).
func refuseParallel(cmd *cobra.Command, why string) {
	n := addParallelFlag(cmd)
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := rejectParallel(*n, why); err != nil {
			return err
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}
