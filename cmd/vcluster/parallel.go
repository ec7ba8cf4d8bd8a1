package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// addParallelFlag registers --parallel on cmd and returns where its value
// lands. 0 (the default) is the classic single loop; N ≥ 1 is the
// partitioned model (fabric cut by pod or T0 index, links ranked) on N
// worker goroutines, whose results are the same for every N.
func addParallelFlag(cmd *cobra.Command) *int {
	n := new(int)
	cmd.Flags().IntVar(n, "parallel", 0, "run the fabric cut into partitions (pods / T0 groups) on N goroutines; results are identical for every N ≥ 1 (0: the classic single loop)")
	return n
}

// rejectParallel refuses --parallel for a command whose workload needs one
// place that acts on many hosts at once (collectives posting on remote
// hosts, fault plans, Clustermapper probes, pings through netstack): such
// work would cross partitions in the middle of a window.
func rejectParallel(n int, what string) error {
	if n <= 0 {
		return nil
	}
	return usageError(fmt.Errorf("--parallel: %s cannot run partitioned (it acts on hosts of several partitions at once); only point-to-point transfers and permutations can", what))
}

// parallelCluster builds the cluster for --parallel n: cluster.New for 0,
// otherwise the partitioned cluster on n workers with 4n partitions (at
// most one per pod or T0): results do not depend on the count, and
// smaller partitions run faster even on one worker (smaller event queues)
// and let a worker take over the partitions of one the machine holds
// back.
func parallelCluster(cfg config.Config, n int) (*cluster.Cluster, error) {
	if n <= 0 {
		return cluster.New(cfg, nil)
	}
	c, err := cluster.NewPartitioned(cfg, min(4*n, cluster.MaxPartitions(cfg)), n)
	if err != nil {
		return nil, usageError(err)
	}
	return c, nil
}

// unpartitioned names the commands that simulate but cannot run
// partitioned, and why; they take --parallel so that asking for it gets
// the reason (exit status 2) instead of "unknown flag".
var unpartitioned = map[string]string{
	"run":        "the default experiment (ring all-reduce: collectives post on remote hosts; the preflight pings through netstack)",
	"experiment": "experiments (collectives, fault plans and queue samplers act across partitions)",
	"collective": "collectives (a rank's step posts work on other hosts)",
	"drill":      "drills (the fault injector and Clustermapper act on the whole fabric)",
	"ping":       "ping (netstack traffic shares one random stream across hosts)",
}

// refuseParallel gives cmd a --parallel flag that only a value of 0
// passes (see unpartitioned).
func refuseParallel(cmd *cobra.Command, what string) {
	n := addParallelFlag(cmd)
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := rejectParallel(*n, what); err != nil {
			return err
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
}
