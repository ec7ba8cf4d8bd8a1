package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/internal/hugeheap"
)

func init() { benchCommands = append(benchCommands, newBenchFatTreeCmd) }

func newBenchFatTreeCmd() *cobra.Command {
	var k int
	var size uint64
	var parallel *int
	cmd := markObserved(&cobra.Command{
		Use:   "fattree-perm",
		Short: "htsim's benchmark: a random permutation on a 1024-host k=16 fat-tree under MRC/NSCC with trimming",
		Long: `fattree-perm runs htsim's reference scenario: a k-ary 3-tier fat-tree
(k=16: 1024 hosts, 100 Gb/s, 1 µs per link, uSID forwarding), 4150-byte data
packets, 178 KiB queues with trimming, ECN from 0.2 to 0.8 of the queue, and a
seeded random permutation (a derangement) in which every host sends --bytes
to another, all flows starting at once, MRC with NSCC, payload bytes elided.
It prints the wall-clock and CPU cost, events and packet-hops per second,
peak RSS, and the flow completion times (htsim: mean 196 µs, min 168 µs,
max 206 µs; the ideal is 160 µs + RTT). --set overrides any of the scenario's
settings.`,
		Example: `  vcluster bench fattree-perm
  vcluster bench fattree-perm --k 8 --seed 3
  vcluster bench fattree-perm --set fabric.forwarding=ecmp --cpuprofile cpu.pprof`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfigWith(cmd, cluster.HtsimFatTreeSets(k))
			if err != nil {
				return err
			}
			if err := checkMemory(cfg, size); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			wall0, cpu0 := time.Now(), userCPU()
			adviseHugeHeap(cmd)
			c, err := parallelCluster(cfg, *parallel)
			if err != nil {
				return usageError(err)
			}
			defer c.Close()
			perm := cluster.Derangement(cfg.Seed, len(c.Hosts))
			build := time.Since(wall0)
			fmt.Fprintf(w, "fat-tree k=%d: %d hosts, %d switches, %d links, %s forwarding; %d flows of %d bytes; seed %d; GOMAXPROCS %d\n",
				cfg.Fabric.K, len(c.Hosts), len(c.Topo.Switches), len(c.Topo.Links), cfg.Fabric.Forwarding, len(perm), size, cfg.Seed, runtime.GOMAXPROCS(0))
			r, el, cpu, err := runPermBench(cmd, c, "bench fattree-perm", perm, size)
			if err != nil {
				return err
			}
			mean, lo, hi := r.FCTStats()
			ideal := c.IdealFCT(0, len(c.Hosts)-1, size)
			fmt.Fprintf(w, "build          %v\n", build.Round(time.Millisecond))
			fmt.Fprintf(w, "run wall       %v (user CPU %v; total wall %v, user CPU %v)\n", el.Round(time.Millisecond), cpu.Round(time.Millisecond),
				time.Since(wall0).Round(time.Millisecond), (userCPU() - cpu0).Round(time.Millisecond))
			printPermRun(w, r, el, cpu)
			fmt.Fprintf(w, "peak RSS       %s (%s)\n", peakRSS(), hugeBacked())
			fmt.Fprintf(w, "FCT            mean %v, min %v, max %v (htsim: 196 µs, 168 µs, 206 µs); ideal of the farthest pair %v (serialization + RTT %v)\n",
				mean.Round(100*time.Nanosecond), lo.Round(100*time.Nanosecond), hi.Round(100*time.Nanosecond), ideal.Round(100*time.Nanosecond),
				c.PairRTT(0, len(c.Hosts)-1).Round(100*time.Nanosecond))
			return nil
		},
	})
	parallel = addParallelFlag(cmd)
	cmd.Flags().IntVar(&k, "k", 16, "fat-tree arity (k³/4 hosts)")
	limit(cmd.Flags(), "k", intIn(2, 256, "even"))
	bytesVar(cmd.Flags(), &size, "bytes", cluster.HtsimFlowBytes, 1, tib, "bytes per flow, with K, M, G or T (powers of 1024)")
	addPermBenchFlags(cmd, 1)
	return cmd
}

// loadConfigWith loads the configuration with sets applied before the
// user's --set values (so the user's win).
func loadConfigWith(cmd *cobra.Command, sets []string) (config.Config, error) {
	for i := len(sets) - 1; i >= 0; i-- {
		if err := prependSet(cmd, sets[i]); err != nil {
			return config.Config{}, usageError(err)
		}
	}
	return loadConfig(cmd)
}

// printPermRun prints the simulation totals of a permutation run that
// took el of wall time and cpu of user CPU.
func printPermRun(w io.Writer, r cluster.PermResult, el, cpu time.Duration) {
	fmt.Fprintf(w, "simulated      %v\n", time.Duration(r.SimTime))
	fmt.Fprintf(w, "events         %d (%.2f M/s wall, %.2f M/s CPU)\n", r.Events, float64(r.Events)/el.Seconds()/1e6, float64(r.Events)/cpu.Seconds()/1e6)
	fmt.Fprintf(w, "packet-hops    %d (%.2f M/s wall, %.2f M/s CPU)\n", r.PacketHops, float64(r.PacketHops)/el.Seconds()/1e6, float64(r.PacketHops)/cpu.Seconds()/1e6)
	fmt.Fprintf(w, "data packets   %d (+%d retransmitted, %d trimmed, %d timeouts)\n", r.DataPackets, r.Retransmissions, r.Trims, r.Timeouts)
	fmt.Fprintf(w, "losses         %d dropped or lost in the fabric, %d duplicates received, %d timeouts without loss\n", r.Lost, r.Duplicates, r.TimeoutsWithoutLoss())
}

// userCPU returns the user CPU time the process has used.
func userCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano())
}

// peakRSS returns the process's peak resident set (VmHWM), or "n/a".
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	return vmHWM(f)
}

func vmHWM(r io.Reader) string {
	s := bufio.NewScanner(r)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "n/a"
}

func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC() // the profile shows allocations up to the last collection
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// addPermBenchFlags registers the flags runPermBench reads: --cpuprofile,
// --memprofile and --prefetch (the loops' cache prefetching of upcoming
// events; off only to measure what it is worth).
func addPermBenchFlags(cmd *cobra.Command, hugeGiB int) {
	f := cmd.Flags()
	f.Int("huge-pages-gib", hugeGiB, "before building, grow the heap by this much advised for transparent huge pages, which the build then fills (0: leave the heap as the Go runtime maps it)")
	f.String("cpuprofile", "", "write a CPU profile of the run to this file")
	f.String("memprofile", "", "write a heap (allocation) profile after the run to this file")
	f.Bool("prefetch", true, "prefetch the memory of upcoming events (set false to measure what it is worth; results are the same)")
	limit(f, "huge-pages-gib", intIn(0, 1024, "0: leave the heap as the Go runtime maps it"))
}

// adviseHugeHeap grows the heap by --huge-pages-gib advised for huge pages
// (see internal/hugeheap); call it before building the cluster. A refusal
// is reported and the bench goes on with the runtime's pages.
func adviseHugeHeap(cmd *cobra.Command) {
	n, _ := cmd.Flags().GetInt("huge-pages-gib")
	if n <= 0 {
		return
	}
	if _, err := hugeheap.Reserve(n << 30); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "huge pages: %v (going on with the runtime's pages)\n", err)
	}
}

// hugeBacked says how much of the process's memory is in huge pages.
func hugeBacked() string {
	return fmt.Sprintf("%.2f GiB in huge pages", float64(hugeheap.Backed())/(1<<30))
}

// runPermBench runs perm on c with the bench's observer (progress and
// --metrics) and the profiles and prefetching addPermBenchFlags asks for,
// and returns the result with the run's wall and user CPU time.
func runPermBench(cmd *cobra.Command, c *cluster.Cluster, name string, perm []int, size uint64) (r cluster.PermResult, el, cpu time.Duration, err error) {
	f := cmd.Flags()
	cpuProf, _ := f.GetString("cpuprofile")
	memProf, _ := f.GetString("memprofile")
	on, _ := f.GetBool("prefetch")
	c.SetPrefetch(on)
	stopsOnInterrupt()
	obs, stopObs, err := benchObserver(cmd)
	if err != nil {
		return r, 0, 0, err
	}
	defer stopObs()
	stop, err := startCPUProfile(cpuProf)
	if err != nil {
		return r, 0, 0, err
	}
	obs.Begin(name)
	obs.Watch(c) // a partitioned cluster is read between windows
	runWall, runCPU := time.Now(), userCPU()
	r, err = c.RunPermutation(perm, size)
	el, cpu = time.Since(runWall), userCPU()-runCPU
	stop()
	where := virtualAt(c.Now())
	obs.End()
	if interrupted(cmd.Context()) {
		return r, el, cpu, interruptedError(where, "the benchmark did not finish: no result")
	}
	if err != nil {
		return r, el, cpu, err
	}
	return r, el, cpu, writeHeapProfile(memProf)
}
