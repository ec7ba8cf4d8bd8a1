package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/faults"
)

func init() { extraCommands = append(extraCommands, newDrillCmd) }

func newDrillCmd() *cobra.Command {
	var (
		planPath, scenario, logPath, pattern string
		at, dur, deadline                    time.Duration
		src, dst                             int
		size                                 uint64
		mapper, baseline, asJSON, hold       bool
		period                               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Run a workload under a fault plan and print what failed, what noticed and how fast",
		Long: `drill builds the configured cluster, starts a workload of RDMA transfers,
applies a fault plan (YAML, see docs/faults.md) on the event loop, runs
Clustermapper and the policy controller (uSID Clos fabrics), and prints a
summary: per fault the time to first loss, to detection, to bypass, to
location and to the denylist push; the job's completion, byte-for-byte
verification, retransmissions and slowdown against a fault-free run.

With --parallel N the cluster runs partitioned on N goroutines: the plan,
Clustermapper, the controller and the recorder act between windows, with
every partition stopped, at exactly their times. The summary and the
event log are the same for every N, the classic loop (0, the default)
included: every loop orders simultaneous frame arrivals by link rank and
runs in the same synchronisation windows.

Exit status: 0 when the job completed with every byte verified and no QP
in error; 1 when it stalled, a QP errored or a byte was wrong (the last
line of stderr says which); 2 for invalid flags, config or plan; 130 when
interrupted (SIGINT/SIGTERM: the event log so far is flushed).

--progress shows the baseline and the run under the plan as two points
(virtual time and events/s of the latter) on stderr; --metrics serves the
faulted cluster's counters to Prometheus meanwhile. --bytes takes K, M, G,
T (powers of 1024).`,
		Example: `  vcluster drill --plan plan.yaml --preset C
  vcluster drill --scenario t1-reboot --at 300us --duration 500us --workload shift
  vcluster drill --plan plan.yaml --set fabric.forwarding=ecmp --set transport.kind=roce --log events.jsonl
  vcluster drill --scenario t1-reboot --preset C --parallel 2
  vcluster drill --scenario t1-reboot --workload alltoall --bytes 4M --progress log --metrics :9464`,
		Args: noArgs,
	}
	load := presetFlags(cmd)
	parallel := addParallelFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&planPath, "plan", "", "fault plan YAML `file`")
	f.StringVar(&scenario, "scenario", "", fmt.Sprintf("named scenario instead of a plan: %v", faults.ScenarioNames()))
	f.DurationVar(&at, "at", 300*time.Microsecond, "scenario start (virtual time)")
	f.DurationVar(&dur, "duration", time.Millisecond, "scenario length / boot time")
	f.StringVar(&pattern, "workload", "p2p", "p2p (--src → --dst), shift (host i → i+n/2) or alltoall")
	f.IntVar(&src, "src", 0, "p2p source host")
	f.IntVar(&dst, "dst", -1, "p2p destination host (default: the last host)")
	bytesVar(f, &size, "bytes", 16<<20, 1, tib, "bytes per transfer, with K, M, G or T (powers of 1024)")
	f.BoolVar(&mapper, "mapper", true, "run Clustermapper and the policy controller (uSID Clos only)")
	f.DurationVar(&period, "period", time.Second, "policy controller period")
	f.BoolVar(&baseline, "baseline", true, "also run without faults, for the slowdown")
	f.DurationVar(&deadline, "deadline", time.Second, "virtual-time limit")
	f.StringVar(&logPath, "log", "", "write the event log (JSON lines) to `file`")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	f.BoolVar(&hold, "hold-until-plan-end", false, "keep the workload running (the same transfers again) until the plan's last fault is over, so every fault is judged under traffic; off, a fault that starts after the job ended is reported after_job_end")
	limit(f, "at", durationIn(0, maxFlagTime, false))
	limit(f, "duration", durationIn(0, maxFlagTime, true))
	limit(f, "src", intIn(0, maxFlagHosts, ""))
	limit(f, "dst", intIn(-1, maxFlagHosts, "-1: the last host"))
	limit(f, "period", durationIn(0, maxFlagTime, true))
	limit(f, "deadline", durationIn(0, maxFlagTime, true))
	rf := addRunFlags(cmd)
	limitLinger(f)
	cmd.RunE = func(cmd *cobra.Command, _ []string) (err error) {
		cfg, err := load()
		if err != nil {
			return err
		}
		if err := checkParallelConfig(*parallel, cfg); err != nil {
			return err
		}
		if !slices.Contains(faults.WorkloadPatterns, pattern) {
			return usageError(fmt.Errorf("--workload: unknown pattern %q; must be one of %s", pattern, strings.Join(faults.WorkloadPatterns, ", ")))
		}
		var plan *faults.Plan
		switch {
		case planPath != "" && scenario != "":
			return usageError(fmt.Errorf("--plan and --scenario: choose one"))
		case planPath != "":
			plan, err = faults.LoadPlan(planPath)
		case scenario != "":
			plan, err = faults.Scenario(scenario, at, dur)
		default:
			return usageError(fmt.Errorf("--plan or --scenario is required"))
		}
		if err != nil {
			return usageError(fmt.Errorf("invalid fault plan:\n%w", err))
		}
		if dst < 0 {
			dst = cfg.Fabric.Hosts - 1
		}
		if src >= cfg.Fabric.Hosts || dst >= cfg.Fabric.Hosts {
			return usageError(fmt.Errorf("--src %d / --dst %d: must be hosts in [0, %d]", src, dst, cfg.Fabric.Hosts-1))
		}
		// Every host of shift and alltoall sends and receives: source and
		// destination buffers of --bytes each.
		if err := checkMemory(cfg, 2*size); err != nil {
			return err
		}
		stopsOnInterrupt()
		obs, done, err := rf.startObserved(cmd.ErrOrStderr(), cfg)
		if err != nil {
			return err
		}
		defer done(&err)
		// Two points with the baseline: it runs first, on a cluster of
		// its own; then the run under the plan.
		points, label := 1, "under the fault plan"
		obs.Begin("drill")
		if baseline {
			points = 2
		}
		var c *cluster.Cluster
		o := faults.DrillOptions{Plan: plan, Workload: faults.Workload{Pattern: pattern, Src: src, Dst: dst, Bytes: size},
			Mapper: mapper, Period: period, Baseline: baseline, Deadline: deadline, Parallel: *parallel, HoldUntilPlanEnd: hold,
			OnBaseline: func(cl *cluster.Cluster) {
				obs.Point(0, points, "fault-free baseline")
				obs.Watch(cl)
			},
			OnCluster: func(cl *cluster.Cluster) {
				c = cl
				obs.Point(points-1, points, label)
				obs.Watch(cl)
			}}
		if logPath != "" {
			lf, err := os.Create(logPath)
			if err != nil {
				return err
			}
			defer lf.Close()
			o.Log = lf
		}
		s, err := faults.Drill(cfg, o)
		where := "in the fault-free baseline run"
		if c != nil {
			where = obs.where()
		}
		obs.End()
		if interrupted(cmd.Context()) {
			left := "the summary is incomplete and not printed"
			if logPath != "" {
				left += "; event log so far in " + logPath
			}
			return interruptedError(where, left)
		}
		if err != nil {
			if _, ok := err.(faults.Errors); ok {
				return usageError(fmt.Errorf("invalid fault plan:\n%w", err))
			}
			return err
		}
		w := cmd.OutOrStdout()
		if asJSON {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			if err := e.Encode(s); err != nil {
				return err
			}
		} else {
			s.WriteSummary(w)
		}
		// A stalled job, a QP error or a wrong byte is a failed drill
		// (exit status 1), said on the last line.
		if err := s.Failed(); err != nil {
			return fmt.Errorf("drill failed: %w", err)
		}
		return nil
	}
	return cmd
}
