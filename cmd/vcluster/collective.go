package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

func init() { extraCommands = append(extraCommands, newCollectiveCmd) }

// defaultAlgo is the algorithm --algo defaults to for each operation.
var defaultAlgo = map[collectives.Op]string{
	collectives.AllReduce: "ring", collectives.AllGather: "ring", collectives.ReduceScatter: "ring",
	collectives.AllToAll: "pairwise", collectives.Broadcast: "chain",
}

func newCollectiveCmd() *cobra.Command {
	var (
		opName, algo, transport, sizes, check, traceFile, csvFile, jsonFile, workload string
		hosts, ranks, iters, warmup, root                                             int
		chunk                                                                         uint64
		loss, reduceBps                                                               float64
		elide, list                                                                   bool
		deadline                                                                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "collective",
		Short: "Run a collective (all-reduce, all-gather, …) over the simulated cluster and print the nccl-tests table",
		Long: `collective builds the configured cluster (default: preset C, 4 planes × 100G),
makes a communicator over its hosts and runs one collective at each size of
--sizes min:max:factor (nccl-tests' -b, -e and -f: min, then factor × the
size before while it is ≤ max; factor 2 when left out), printing the table
as nccl-tests does: time (virtual µs), algbw and busbw with its rounding,
#wrong against a direct computation, then "# Out of bounds values" and
"# Avg bus bandwidth" (the mean busbw, printed as C's %g). Only the
out-of-place columns are measured: every rank has separate send and receive
buffers here, and a line above the table says so. Sizes take K, M, G, T
(powers of 1024) everywhere, --chunk too.

The transport comes from the config (--transport is --set transport.kind=…;
roce also sets fabric.forwarding=ecmp unless you set it). With --elide the
payload bytes are not carried: results cannot be checked and the check column
says so. --workload runs a sequence of collectives per iteration instead and
prints the iteration time.

--deadline (default 10s) is a limit on virtual time for the whole sweep
(the cluster's clock, from 0): a collective still running then is stopped
and the command fails (exit status 1) naming the size, the iteration and where the
unfinished ranks were; the rows of the sizes done before are printed (and
written to --csv/--json). It does not apply to --workload.

--progress shows the sizes (or workload iterations) as they run, on
stderr; --metrics serves the cluster's counters to Prometheus meanwhile.

--parallel N runs the fabric cut into partitions on N goroutines: every
rank runs on its host's partition, and the table is the same for every
N ≥ 1. Each iteration and size then starts at the synchronisation window
boundary after the previous one finished (at most one fabric link delay
later), so from the second size or iteration on the table differs slightly
from the classic loop's (N = 0, the default); the first is the same.

Exit status: 0 when every row checked (or checking was off); 1 for wrong
elements, an error or the deadline; 2 for invalid flags or config; 130
when interrupted (the complete rows are printed first).`,
		Example: `  vcluster collective --op allreduce --algo ring --hosts 64 --transport mrc --sizes 1M:1G --elide
  vcluster collective --op allreduce --hosts 64 --sizes 1M:1G:4 --elide --progress log
  vcluster collective --op alltoall --algo direct --hosts 16 --sizes 64K:4M --trace a2a.json
  vcluster collective --op allreduce --hosts 32 --sizes 16M --elide --loss 0.01 --deadline 5ms
  vcluster collective --workload allreduce:ring:64M,alltoall:pairwise:16M@8 --hosts 32 --iters 3
  vcluster collective --op allreduce --hosts 64 --sizes 64M --elide --parallel 2 --metrics :9464
  vcluster collective --list`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&opName, "op", "allreduce", "collective: allreduce, allgather, reducescatter, alltoall, broadcast")
	f.StringVar(&algo, "algo", "", "algorithm (default: ring; pairwise for alltoall; chain for broadcast; --list shows all)")
	f.IntVar(&hosts, "hosts", 0, "hosts in the cluster (same as --set fabric.hosts=…)")
	f.IntVar(&ranks, "ranks", 0, "ranks: the first N hosts (default: every host)")
	f.StringVar(&transport, "transport", "", "mrc or roce (same as --set transport.kind=…)")
	f.StringVar(&sizes, "sizes", "1M:64M", "sizes `min:max:factor` (min, then ×factor up to max; nccl-tests' -b:-e:-f), min:max (factor 2) or one size; K, M, G, T are powers of 1024")
	f.IntVar(&iters, "iters", 1, "timed iterations per size")
	f.IntVar(&warmup, "warmup", 0, "untimed iterations before them")
	f.IntVar(&root, "root", 0, "broadcast root rank")
	f.StringVar(&check, "check", "on", "verify results against a direct computation: on or off")
	bytesVar(f, &chunk, "chunk", 1<<20, 4, 2<<30, "pipeline slice: the largest single write, with K, M or G (powers of 1024)")
	f.Float64Var(&reduceBps, "reduce-rate", 0, "float32 reduction speed in bytes/s (0: reductions take no time)")
	f.BoolVar(&elide, "elide", false, "elide payload bytes (same as --set transport.payload=elided; no checking)")
	f.Float64Var(&loss, "loss", 0, "Bernoulli loss rate on every link and direction")
	f.DurationVar(&deadline, "deadline", 10*time.Second, "virtual-time limit of the whole sweep: a collective still running then is stopped (exit status 1); not with --workload")
	f.StringVar(&traceFile, "trace", "", "write every rank's steps as Chrome trace-event JSON to `file` (open in Perfetto)")
	f.StringVar(&csvFile, "csv", "", "write the rows as CSV to `file`")
	f.StringVar(&jsonFile, "json", "", "write the rows as JSON to `file`")
	f.StringVar(&workload, "workload", "", "run op:algo:size[@group],… per iteration instead (group: ranks per concurrent group)")
	f.BoolVar(&list, "list", false, "list the algorithms and exit")
	parallel := addParallelFlag(cmd)
	rf := addRunFlags(cmd)
	limitLinger(f)
	limit(f, "hosts", intIn(0, maxFlagHosts, "0: the preset's"))
	limit(f, "ranks", intIn(0, maxFlagHosts, "0: every host"))
	limit(f, "iters", intIn(1, maxFlagCount, ""))
	limit(f, "warmup", intIn(0, maxFlagCount, ""))
	limit(f, "root", intIn(0, maxFlagHosts, "a rank below --ranks"))
	limit(f, "sizes", sizeRangeIn(1, tib))
	limit(f, "reduce-rate", floatIn(0, 1e15, false, "a reduction speed", "bytes/s (0: reductions take no time)"))
	limit(f, "loss", lossRate())
	limit(f, "deadline", durationIn(0, maxFlagTime, true))

	cmd.RunE = func(cmd *cobra.Command, _ []string) (err error) {
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
		var (
			items []collectives.WorkItem
			op    collectives.Op
			alg   *collectives.Algorithm
			sr    collectives.SizeRange
		)
		if workload != "" {
			if items, err = collectives.ParseWorkload(workload); err != nil {
				return usageError(fmt.Errorf("--workload: %v", err))
			}
			if cmd.Flags().Changed("deadline") {
				return usageError(fmt.Errorf("--deadline: applies to --op/--sizes sweeps only; a --workload run has no deadline (leave --deadline out)"))
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
			if sr, err = collectives.ParseSizeRange(sizes); err != nil { // checked when parsed: cannot fail
				return usageError(fmt.Errorf("--sizes: %v", err))
			}
		}
		// Defaults and shorthands go before the user's --set values, which
		// win. Preset C is the default cluster only when neither a --config
		// file nor --set chooses the fabric: a file's own preset or shape
		// must not be overridden by it.
		var pre []string
		if path, sets, err := configSources(cmd); err == nil && path == "" && !setsPreset(sets) {
			pre = append(pre, "fabric.preset=C")
		}
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
		if workload == "" {
			need = 3 * slices.Max(sr.Sizes())
		}
		for _, it := range items {
			need += 3 * it.Bytes
		}
		if err := checkMemory(cfg, need); err != nil {
			return err
		}
		n := cfg.Fabric.Hosts
		if ranks > 0 {
			if ranks > n {
				return usageError(fmt.Errorf("--ranks %d: the cluster has %d hosts", ranks, n))
			}
			n = ranks
		}
		if n < 2 {
			return usageError(fmt.Errorf("--ranks: %d rank(s); a collective needs at least 2", n))
		}
		if root >= n {
			return usageError(fmt.Errorf("--root: %d is out of range; must be a rank in [0, %d]", root, n-1))
		}
		opt := collectives.Options{Chunk: chunk, ReduceBps: reduceBps, NoCheck: check == "off", Trace: traceFile != ""}
		for h := 0; h < ranks; h++ {
			opt.Hosts = append(opt.Hosts, h)
		}
		if err := checkParallelConfig(*parallel, cfg); err != nil {
			return err
		}
		obs, done, err := rf.startObserved(cmd.ErrOrStderr(), cfg)
		if err != nil {
			return err
		}
		defer done(&err)
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
		m, err := collectives.New(c, opt)
		if err != nil {
			return usageError(err)
		}
		// One cluster for every size: it is watched once, and the sizes
		// are observer steps, not points (Point ends the watched cluster:
		// its counters would stop at the first size); the bar counts them.
		obs.Begin("collective")
		obs.Watch(c)

		fmt.Fprintf(w, "# vcluster collective: %d ranks, %s, %d QP(s) per peer, %d plane(s) × %s, forwarding %s, payload %s, chunk %s, seed %d\n",
			m.Size(), cfg.Transport.Kind, m.Channels(), cfg.Fabric.Planes, cfg.Fabric.HostLinkSpeed, cfg.Fabric.Forwarding, cfg.Transport.Payload,
			units.FormatBytes(chunk), cfg.Seed)
		if check == "on" && !m.RealPayload() {
			fmt.Fprintln(w, "# check: skipped — the payload is elided, there are no bytes to verify")
		}
		start := time.Now()
		ctx := cmd.Context()
		if workload != "" {
			return runWorkload(cmd, obs, m, items, iters, jsonFile, traceFile, start)
		}
		validation := 0
		if check == "on" && m.RealPayload() {
			validation = 1
		}
		// nccl-tests' parameter line, in its words.
		fmt.Fprintf(w, "# minBytes %d maxBytes %d step: %d(factor) warmup iters: %d iters: %d validation: %d\n",
			sr.Min, sr.Max, sr.Factor, warmup, iters, validation)
		fmt.Fprintf(w, "# %s, algorithm %s: %s\n", op, alg.Name, alg.Doc)
		ro := collectives.RunOptions{Iters: iters, Warmup: warmup, Root: root, Deadline: sim.Time(deadline),
			Before: func(i, n int, size uint64) {
				obs.Step(i, n, units.FormatBytes(size))
			}}
		rs, err := m.Sweep(alg, sr.Sizes(), ro)
		where := obs.where()
		obs.End()
		// Whatever stopped the sweep, the rows before it are results.
		collectives.WriteTable(w, rs)
		var de *collectives.DeadlineError
		switch {
		case interrupted(ctx):
			return interruptedError(where, writeCompleteRows(rs, csvFile, jsonFile))
		case errors.As(err, &de):
			return fmt.Errorf("--deadline %v: %w; %s", deadline, err, writeCompleteRows(rs, csvFile, jsonFile))
		case err != nil:
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

// writeCompleteRows writes the rows of a sweep that stopped early to the
// --csv and --json files asked for, and says where they are.
func writeCompleteRows(rs []collectives.Result, csvFile, jsonFile string) string {
	left := fmt.Sprintf("%d complete row(s) above", len(rs))
	if err := writeOut(csvFile, func(f io.Writer) error { return collectives.WriteCSV(f, rs) }); err == nil && csvFile != "" {
		left += ", in " + csvFile
	}
	if err := writeOut(jsonFile, func(f io.Writer) error { return collectives.WriteJSON(f, rs) }); err == nil && jsonFile != "" {
		left += ", in " + jsonFile
	}
	return left
}

// runWorkload runs --workload: iters iterations of items, each a progress
// line, and prints every iteration's time.
func runWorkload(cmd *cobra.Command, obs *observer, m *collectives.Comm, items []collectives.WorkItem, iters int, jsonFile, traceFile string, start time.Time) error {
	w := cmd.OutOrStdout()
	r := collectives.WorkloadResult{Items: items}
	var total sim.Time
	var err error
	for i := 0; i < iters && err == nil; i++ {
		obs.Step(i, iters, fmt.Sprintf("iteration %d", i+1))
		var one collectives.WorkloadResult
		if one, err = m.RunWorkload(items, 1); err == nil {
			r.IterNs = append(r.IterNs, one.IterNs...)
			r.PerItem = append(r.PerItem, one.PerItem...)
			total += one.IterNs[0]
		}
	}
	where := obs.where()
	obs.End()
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
	// The iterations before an interruption or an error are results.
	if interrupted(cmd.Context()) {
		return interruptedError(where, fmt.Sprintf("%d complete iteration(s) above", len(r.IterNs)))
	}
	if err != nil {
		return err
	}
	r.MeanNs = total / sim.Time(len(r.IterNs))
	c := m.C
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

// setsPreset reports whether one of the --set values chooses fabric.preset.
func setsPreset(sets []string) bool {
	for _, kv := range sets {
		if strings.HasPrefix(kv, "fabric.preset=") {
			return true
		}
	}
	return false
}
