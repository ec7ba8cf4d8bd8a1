package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
)

func init() { benchCommands = append(benchCommands, newBenchClusterBCmd) }

func newBenchClusterBCmd() *cobra.Command {
	var perT0 int
	var size uint64
	var memLimit int64
	var buildOnly bool
	var parallel *int
	cmd := markObserved(&cobra.Command{
		Use:   "clusterB",
		Short: "The paper's cluster B at full scale (8 planes, 131 072 NICs): build cost and packet-hops per second",
		Long: `clusterB builds the paper's cluster B — 8 planes of 100 Gb/s, 512 T0 and
256 T1 switches per plane, 256 hosts per T0 (131 072 NICs), SRv6 uSID
forwarding, hosts without netstack — and reports the build time and memory.
Then --hosts-per-t0 hosts under every T0 (4096 T0s over the 8 planes share
the same host set) run a random permutation (a derangement among them),
--bytes per flow, MRC with NSCC, payload elided, all flows starting at once,
and it reports events and packet-hops per second. --set overrides any
setting.`,
		Example: `  vcluster bench clusterB
  vcluster bench clusterB --build-only
  vcluster bench clusterB --hosts-per-t0 4 --bytes 4194304`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfigWith(cmd, cluster.ClusterBSets())
			if err != nil {
				return err
			}
			if err := checkMemory(cfg, 0); err != nil {
				return err
			}
			if memLimit > 0 {
				// Collect only near the limit: a collection marks the whole
				// multi-GiB fabric, and the run allocates little (pools,
				// event slots, first-use port queues) — spending the memory
				// budget instead of CPU on it.
				debug.SetMemoryLimit(memLimit << 30)
				defer debug.SetGCPercent(debug.SetGCPercent(-1))
			}
			w := cmd.OutOrStdout()
			wall0, cpu0 := time.Now(), userCPU()
			adviseHugeHeap(cmd)
			c, err := parallelCluster(cfg, *parallel)
			if err != nil {
				return usageError(err)
			}
			defer c.Close()
			build, buildCPU := time.Since(wall0), userCPU()-cpu0
			ports := 0
			for _, s := range c.Topo.Switches {
				ports += len(s.Ports)
			}
			ports += len(c.Topo.HostPorts) * c.Topo.Planes
			fmt.Fprintf(w, "cluster B: %d planes, %d hosts, %d switches, %d ports, %d links; GOMAXPROCS %d\n",
				c.Topo.Planes, len(c.Hosts), len(c.Topo.Switches), ports, len(c.Topo.Links), runtime.GOMAXPROCS(0))
			fmt.Fprintf(w, "build          %v (user CPU %v), peak RSS %s, live heap %.2f GiB, %s\n", build.Round(time.Millisecond),
				buildCPU.Round(time.Millisecond), peakRSS(), float64(liveHeap())/(1<<30), hugeBacked())
			if buildOnly {
				return nil
			}
			perm := c.SpreadPermutation(cfg.Seed, perT0)
			flows := 0
			for h, p := range perm {
				if h != p {
					flows++
				}
			}
			fmt.Fprintf(w, "workload       %d flows (%d hosts under each of %d T0s per plane) of %d bytes\n", flows, perT0, c.Topo.Clos.T0, size)
			r, el, cpu, err := runPermBench(cmd, c, "bench clusterB", perm, size)
			if err != nil {
				return err
			}
			mean, lo, hi := r.FCTStats()
			fmt.Fprintf(w, "run wall       %v (user CPU %v)\n", el.Round(time.Millisecond), cpu.Round(time.Millisecond))
			printPermRun(w, r, el, cpu)
			fmt.Fprintf(w, "FCT            mean %v, min %v, max %v\n", mean.Round(100*time.Nanosecond), lo.Round(100*time.Nanosecond), hi.Round(100*time.Nanosecond))
			fmt.Fprintf(w, "peak RSS       %s, %s (total wall %v, user CPU %v)\n", peakRSS(), hugeBacked(), time.Since(wall0).Round(time.Millisecond), (userCPU() - cpu0).Round(time.Millisecond))
			return nil
		},
	})
	parallel = addParallelFlag(cmd)
	cmd.Flags().IntVar(&perT0, "hosts-per-t0", 16, "hosts under each T0 that take part in the permutation")
	bytesVar(cmd.Flags(), &size, "bytes", 12<<20, 1, tib, "bytes per flow, with K, M, G or T (powers of 1024)")
	cmd.Flags().Int64Var(&memLimit, "mem-limit-gib", 15, "Go soft memory limit in GiB; the collector runs only near it (0: no limit, the default collector pacing)")
	limit(cmd.Flags(), "hosts-per-t0", intIn(1, 256, "cluster B has 256 hosts under each T0"))
	limit(cmd.Flags(), "mem-limit-gib", intIn(0, 1<<20, "0: no limit"))
	cmd.Flags().BoolVar(&buildOnly, "build-only", false, "build the cluster, report, and stop")
	addPermBenchFlags(cmd, 12)
	return cmd
}
