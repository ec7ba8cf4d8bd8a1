package main

import (
	"fmt"

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
