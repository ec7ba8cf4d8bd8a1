package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/fabric"
)

func init() { extraCommands = append(extraCommands, newCollectiveCmd) }

// defaultAlgo is the algorithm --algo defaults to for each operation.
var defaultAlgo = map[collectives.Op]string{
	collectives.AllReduce: "ring", collectives.AllGather: "ring", collectives.ReduceScatter: "ring",
	collectives.AllToAll: "pairwise", collectives.Broadcast: "chain",
}

func newCollectiveCmd() *cobra.Command {
	var (
		opName, algo, transport, sizes, check, traceFile, csvFile, jsonFile, chunk, workload string
		hosts, ranks, iters, warmup, root                                                    int
		loss, reduceBps                                                                      float64
		elide, list                                                                          bool
	)
	cmd := &cobra.Command{
		Use:   "collective",
		Short: "Run a collective (all-reduce, all-gather, …) over the simulated cluster and print the nccl-tests table",
		Long: `collective builds the configured cluster (default: preset C, 4 planes × 100G),
makes a communicator over its hosts and runs one collective at each size from
the --sizes range (doubling), printing time (virtual µs), algbw and busbw as
nccl-tests does, and whether the result matched a direct computation.

The transport comes from the config (--transport is --set transport.kind=…;
roce also sets fabric.forwarding=ecmp unless you set it). With --elide the
payload bytes are not carried: results cannot be checked and the check column
says so. --workload runs a sequence of collectives per iteration instead and
prints the iteration time.

--parallel N runs the fabric cut into partitions on N goroutines: every
rank runs on its host's partition, and the table is the same for every
N ≥ 1 (slightly different from the classic loop's, N = 0, which breaks
equal-time ties differently). Each iteration and size then starts at the
synchronisation window boundary after the previous one finished (at most
one fabric link delay later).`,
		Example: `  vcluster collective --op allreduce --algo ring --hosts 64 --transport mrc --sizes 1M:1G --elide
  vcluster collective --op alltoall --algo direct --hosts 16 --sizes 64K:4M --trace a2a.json
  vcluster collective --workload allreduce:ring:64M,alltoall:pairwise:16M@8 --hosts 32 --iters 3
  vcluster collective --op allreduce --hosts 64 --sizes 64M --elide --parallel 2
  vcluster collective --list`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&opName, "op", "allreduce", "collective: allreduce, allgather, reducescatter, alltoall, broadcast")
	f.StringVar(&algo, "algo", "", "algorithm (default: ring; pairwise for alltoall; chain for broadcast; --list shows all)")
	f.IntVar(&hosts, "hosts", 0, "hosts in the cluster (same as --set fabric.hosts=…)")
	f.IntVar(&ranks, "ranks", 0, "ranks: the first N hosts (default: every host)")
	f.StringVar(&transport, "transport", "", "mrc or roce (same as --set transport.kind=…)")
	f.StringVar(&sizes, "sizes", "1M:64M", "sizes `min:max` (doubling) or one size; K, M, G are powers of 1024")
	f.IntVar(&iters, "iters", 1, "timed iterations per size")
	f.IntVar(&warmup, "warmup", 0, "untimed iterations before them")
	f.IntVar(&root, "root", 0, "broadcast root rank")
	f.StringVar(&check, "check", "on", "verify results against a direct computation: on or off")
	f.StringVar(&chunk, "chunk", "1M", "pipeline slice: the largest single write")
	f.Float64Var(&reduceBps, "reduce-rate", 0, "float32 reduction speed in bytes/s (0: reductions take no time)")
	f.BoolVar(&elide, "elide", false, "elide payload bytes (same as --set transport.payload=elided; no checking)")
	f.Float64Var(&loss, "loss", 0, "Bernoulli loss rate on every link and direction")
	f.StringVar(&traceFile, "trace", "", "write every rank's steps as Chrome trace-event JSON to `file` (open in Perfetto)")
	f.StringVar(&csvFile, "csv", "", "write the rows as CSV to `file`")
	f.StringVar(&jsonFile, "json", "", "write the rows as JSON to `file`")
	f.StringVar(&workload, "workload", "", "run op:algo:size[@group],… per iteration instead (group: ranks per concurrent group)")
	f.BoolVar(&list, "list", false, "list the algorithms and exit")
	parallel := addParallelFlag(cmd)
	limit(f, "hosts", intIn(0, maxFlagHosts, "0: the preset's"))
	limit(f, "ranks", intIn(0, maxFlagHosts, "0: every host"))
	limit(f, "iters", intIn(1, maxFlagCount, ""))
	limit(f, "warmup", intIn(0, maxFlagCount, ""))
	limit(f, "root", intIn(0, maxFlagHosts, "a rank below --ranks"))
	limit(f, "chunk", sizeIn(1, 2<<30))
	limit(f, "sizes", sizeRangeIn(1, tib))
	limit(f, "reduce-rate", floatIn(0, 1e15, false, "a reduction speed", "bytes/s (0: reductions take no time)"))
	limit(f, "loss", lossRate())

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		w := cmd.OutOrStdout()
		if list {
			for _, a := range collectives.Algorithms("") {
				fmt.Fprintf(w, "%-14s %-17s %s\n", a.Op, a.Name, a.Doc)
			}
			return nil
		}
		if check != "on" && check != "off" {
			return usageError(fmt.Errorf("--check: want on or off, got %q", check))
		}
		chunkB, err := collectives.ParseSize(chunk)
		if err != nil {
			return usageError(fmt.Errorf("--chunk: %v", err))
		}
		var items []collectives.WorkItem
		var op collectives.Op
		var alg *collectives.Algorithm
		var sz []uint64
		if workload != "" {
			if items, err = collectives.ParseWorkload(workload); err != nil {
				return usageError(fmt.Errorf("--workload: %v", err))
			}
		} else {
			if op, err = collectives.ParseOp(opName); err != nil {
				return usageError(fmt.Errorf("--op: %v", err))
			}
			if algo == "" {
				algo = defaultAlgo[op]
			}
			if alg, err = collectives.Lookup(op, algo); err != nil {
				return usageError(fmt.Errorf("--algo: %v", err))
			}
			lo, hi, ok := strings.Cut(sizes, ":")
			if !ok {
				hi = lo
			}
			a, err := collectives.ParseSize(lo)
			if err != nil {
				return usageError(fmt.Errorf("--sizes: %v", err))
			}
			b, err := collectives.ParseSize(hi)
			if err != nil {
				return usageError(fmt.Errorf("--sizes: %v", err))
			}
			sz = collectives.Sizes(a, b)
		}
		// Defaults and shorthands go before the user's --set values, which win.
		pre := []string{"fabric.preset=C"}
		if transport == "roce" {
			pre = append(pre, "fabric.forwarding=ecmp")
		}
		if cmd.Flags().Changed("hosts") {
			pre = append(pre, "fabric.hosts="+strconv.Itoa(hosts))
		}
		if transport != "" {
			pre = append(pre, "transport.kind="+transport)
		}
		if elide {
			pre = append(pre, "transport.payload=elided")
		}
		for i := len(pre) - 1; i >= 0; i-- {
			if err := prependSet(cmd, pre[i]); err != nil {
				return usageError(err)
			}
		}
		cfg, err := loadConfig(cmd)
		if err != nil {
			return err
		}
		stopsOnInterrupt()
		// The largest size's send, receive and scratch buffers on every
		// host (all of a workload's items: they share an iteration).
		var need uint64
		for _, b := range sz {
			need = max(need, 3*b)
		}
		for _, it := range items {
			need += 3 * it.Bytes
		}
		if err := checkMemory(cfg, need); err != nil {
			return err
		}
		c, err := parallelCluster(cfg, *parallel)
		if err != nil {
			return usageError(err)
		}
		defer c.Close()
		if loss > 0 {
			for _, l := range c.Topo.Links {
				l.Loss = fabric.NewBernoulli(loss, cfg.Seed, l.Name)
			}
		}
		opt := collectives.Options{Chunk: chunkB, ReduceBps: reduceBps, NoCheck: check == "off", Trace: traceFile != ""}
		if ranks > 0 {
			if ranks > len(c.Hosts) {
				return usageError(fmt.Errorf("--ranks %d: the cluster has %d hosts", ranks, len(c.Hosts)))
			}
			for h := 0; h < ranks; h++ {
				opt.Hosts = append(opt.Hosts, h)
			}
		}
		n := len(c.Hosts)
		if ranks > 0 {
			n = ranks
		}
		if root >= n {
			return usageError(fmt.Errorf("--root: %d is out of range; must be a rank in [0, %d]", root, n-1))
		}
		m, err := collectives.New(c, opt)
		if err != nil {
			return usageError(err)
		}
		fmt.Fprintf(w, "# vcluster collective: %d ranks, %s, %d QP(s) per peer, %d plane(s) × %s, forwarding %s, payload %s, chunk %s, seed %d\n",
			m.Size(), cfg.Transport.Kind, m.Channels(), cfg.Fabric.Planes, cfg.Fabric.HostLinkSpeed, cfg.Fabric.Forwarding, cfg.Transport.Payload,
			collectives.FormatBytes(chunkB), cfg.Seed)
		if check == "on" && !m.RealPayload() {
			fmt.Fprintln(w, "# check: skipped — the payload is elided, there are no bytes to verify")
		}
		start := time.Now()
		ctx := cmd.Context()
		if workload != "" {
			r, err := m.RunWorkload(items, iters)
			if interrupted(ctx) {
				return interruptedError(virtualAt(c.Now())+" (workload)", "no iteration result is complete")
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "# workload per iteration: %v\n", items)
			for i, row := range r.PerItem {
				fmt.Fprintf(w, "iteration %d: %10.2f us  (", i, float64(r.IterNs[i])/1e3)
				for k, x := range row {
					if k > 0 {
						fmt.Fprint(w, ", ")
					}
					fmt.Fprintf(w, "%s %.2f us busbw %.2f GB/s check %s", items[k], float64(x.TimeNs)/1e3, x.BusBW, x.Check)
				}
				fmt.Fprintln(w, ")")
			}
			fmt.Fprintf(w, "# mean iteration time: %.2f us (virtual); wall %v, %d events%s\n", float64(r.MeanNs)/1e3, time.Since(start).Round(time.Millisecond), c.Executed(), parallelNote(c))
			if err := writeOut(jsonFile, func(f io.Writer) error { return collectives.WriteJSON(f, r) }); err != nil {
				return err
			}
			if err := writeTrace(traceFile, m); err != nil {
				return err
			}
			for i, row := range r.PerItem {
				for k, x := range row {
					if x.Check == collectives.CheckFailed {
						return fmt.Errorf("iteration %d, %s: %d wrong elements", i, items[k], x.Wrong)
					}
				}
			}
			return nil
		}
		fmt.Fprintf(w, "# %s, algorithm %s: %s\n", op, alg.Name, alg.Doc)
		rs, err := m.Sweep(alg, sz, collectives.RunOptions{Iters: iters, Warmup: warmup, Root: root})
		if interrupted(ctx) {
			// The size that was running did not finish: only the rows
			// before it are results.
			collectives.WriteTable(w, rs)
			where := fmt.Sprintf("%s (size %d of %d)", virtualAt(c.Now()), len(rs)+1, len(sz))
			left := fmt.Sprintf("%d complete row(s) above", len(rs))
			if werr := writeOut(csvFile, func(f io.Writer) error { return collectives.WriteCSV(f, rs) }); werr == nil && csvFile != "" {
				left += ", in " + csvFile
			}
			if werr := writeOut(jsonFile, func(f io.Writer) error { return collectives.WriteJSON(f, rs) }); werr == nil && jsonFile != "" {
				left += ", in " + jsonFile
			}
			return interruptedError(where, left)
		}
		collectives.WriteTable(w, rs)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# simulated %.3f ms in %v wall, %d events%s\n", float64(c.Now())/1e6, time.Since(start).Round(time.Millisecond), c.Executed(), parallelNote(c))
		if err := writeOut(csvFile, func(f io.Writer) error { return collectives.WriteCSV(f, rs) }); err != nil {
			return err
		}
		if err := writeOut(jsonFile, func(f io.Writer) error { return collectives.WriteJSON(f, rs) }); err != nil {
			return err
		}
		if err := writeTrace(traceFile, m); err != nil {
			return err
		}
		for _, r := range rs {
			if r.Check == collectives.CheckFailed {
				return fmt.Errorf("%s %s: %d wrong elements at %d bytes", r.Op, r.Algo, r.Wrong, r.Bytes)
			}
		}
		return nil
	}
	return cmd
}

func writeTrace(path string, m *collectives.Comm) error {
	if path == "" {
		return nil
	}
	return writeOut(path, m.Trace().WriteTrace)
}

// writeOut creates path (when not empty) and writes it with fn.
func writeOut(path string, fn func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
