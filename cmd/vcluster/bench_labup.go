package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/compose/lab"
	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/units"
)

func init() { benchCommands = append(benchCommands, newBenchLabUpCmd) }

// labUpStep is one lab size's measurement.
type labUpStep struct {
	hosts            int
	up, first, total time.Duration
	collective       string  // its nccl-tests time, as printed
	hostRSSUp        []int64 // KiB, per host process or container, once up
	hostRSS          []int64 // KiB, the same after the collective
	hostAnon         []int64 // KiB, RssAnon after the collective (RssFile is the binary's text, shared)
	fabricRSS        int64
	lag              labapi.Lag
}

func newBenchLabUpCmd() *cobra.Command {
	var (
		runtime, size, speed, binary string
		sizes                        []int
		keepImage                    bool
	)
	cmd := &cobra.Command{
		Use:   "lab-up",
		Short: "Lab start-up: wall time from lab up to the first verified collective, per-host memory and the fabric's lag, at several sizes",
		Long: `bench lab-up starts a lab of each --hosts size in turn (preset C, the
default scaling: --plane-speed per plane), runs one all-reduce of --size
across every host and checks it verified, then takes it down. It reports
the wall time of lab up (image build, compose up, every host healthy), of
the first collective, and of both; each host's resident memory (VmRSS of
its process: a container's main process under --runtime docker) after the
collective; the fabric's RSS and its real-time loop's lag over its life
(p50/p99/max from /v1/status).`,
		Example: `  vcluster bench lab-up --runtime docker --hosts 4,16,64`,
		Args:    noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&runtime, "runtime", lab.RuntimeDocker, "docker or process")
	f.IntSliceVar(&sizes, "hosts", []int{4, 16, 64}, "lab sizes, comma-separated, each in [4, 64]")
	limit(f, "hosts", listOf(intIn(4, lab.MaxHosts, "")))
	f.StringVar(&size, "size", "64K", "the all-reduce's size (nccl-tests units): the first collective is a check that the lab works")
	f.StringVar(&speed, "plane-speed", "1G", "host-link speed per plane (the lab's default scaling)")
	limit(f, "plane-speed", planeSpeedFlag())
	f.StringVar(&binary, "binary", "", "docker: the static vcluster binary for the image (default: this one, when static)")
	f.BoolVar(&keepImage, "keep-image", false, "docker: keep the image between sizes (default: every lab up builds it, and down --rmi removes it)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		rt, err := lab.NewRuntime(runtime)
		if err != nil {
			return usageError(fmt.Errorf("--runtime: %v", err))
		}
		for _, n := range sizes {
			if n < 4 || n > lab.MaxHosts {
				return usageError(fmt.Errorf("--hosts: %d is out of range; each size must be in [4, %d]", n, lab.MaxHosts))
			}
		}
		if _, err := units.ParseSize(size); err != nil {
			return usageError(fmt.Errorf("--size: %v", err))
		}
		bps, _ := units.ParseSpeed(speed)
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "lab-up: runtime %s, preset C, %s per plane, all-reduce %s\n", runtime, speed, size)
		var steps []labUpStep
		table := func() {
			fmt.Fprintf(w, "\n%6s %9s %11s %9s %14s %18s %18s %18s %10s %24s\n", "hosts", "lab up", "collective", "total", "nccl time(us)",
				"host RSS once up", "RSS after", "anon after", "fabric RSS", "fabric lag p50/p99/max")
			for _, s := range steps {
				fmt.Fprintf(w, "%6d %9v %11v %9v %14s %18s %18s %18s %10s %24s\n", s.hosts, s.up.Round(10*time.Millisecond), s.first.Round(10*time.Millisecond),
					s.total.Round(10*time.Millisecond), s.collective, spread(s.hostRSSUp), spread(s.hostRSS), spread(s.hostAnon), mib(s.fabricRSS),
					fmt.Sprintf("%v/%v/%v", time.Duration(s.lag.P50Ns).Round(time.Microsecond), time.Duration(s.lag.P99Ns).Round(time.Microsecond), time.Duration(s.lag.MaxNs).Round(time.Microsecond)))
			}
			fmt.Fprintln(w, "(RSS: min/median/max over the hosts, MiB)")
		}
		for _, n := range sizes {
			if interrupted(cmd.Context()) {
				return interruptedError("", "")
			}
			s, err := benchLabUp(cmd.Context(), rt, exe, binary, n, bps, size, keepImage, w)
			if err != nil {
				table()
				return fmt.Errorf("%d hosts: %w", n, err)
			}
			steps = append(steps, s)
		}
		table()
		return nil
	}
	return cmd
}

// spread is min/median/max of KiB values, in MiB.
func spread(kib []int64) string {
	if len(kib) == 0 {
		return "-"
	}
	r := slices.Clone(kib)
	slices.Sort(r)
	f := func(v int64) string { return fmt.Sprintf("%.1f", float64(v)/1024) }
	return f(r[0]) + "/" + f(r[len(r)/2]) + "/" + f(r[len(r)-1])
}

// mib formats KiB as MiB.
func mib(kib int64) string { return fmt.Sprintf("%.1fM", float64(kib)/1024) }

// benchLabUp measures one lab of n hosts.
func benchLabUp(ctx context.Context, rt lab.Runtime, exe, binary string, n int, bps uint64, size string, keepImage bool, w io.Writer) (labUpStep, error) {
	s := labUpStep{hosts: n}
	dir, err := os.MkdirTemp("", "vcluster-bench-lab-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	name := "vcbench-" + strconv.Itoa(n)
	sets := []string{"fabric.preset=C", "fabric.hosts=" + strconv.Itoa(n), labRetryKey + "=" + string(mrc.RetryPacket)}
	fmt.Fprintf(w, "\n== %d hosts (lab %s)\n", n, name)
	start := time.Now()
	st, err := lab.Up(ctx, lab.UpOptions{Dir: filepath.Join(dir, "lab"), Runtime: rt, Executable: exe, Sets: sets, PlaneBps: bps,
		Name: name, Binary: binary, ReadyTimeout: 5 * time.Minute, HealthTimeout: 5 * time.Minute}, w)
	s.up = time.Since(start)
	if st != nil {
		defer lab.DownWith(st.Dir, lab.DownOptions{Name: name, RMI: !keepImage}, io.Discard)
	}
	if err != nil {
		return s, err
	}
	for _, p := range st.Processes {
		if p.Role == lab.RoleHost {
			s.hostRSSUp = append(s.hostRSSUp, procStatusKiB(p.PID, "VmRSS:"))
		}
	}
	var table strings.Builder
	t0 := time.Now()
	outs, err := lab.RunCollective(ctx, st.Dir, lab.CollectiveOptions{Op: "allreduce", Size: size, Iters: 1, Timeout: 5 * time.Minute}, &table, w)
	s.first = time.Since(t0)
	s.total = time.Since(start)
	fmt.Fprint(w, table.String())
	if err != nil {
		return s, err
	}
	for _, o := range outs {
		if o.Failed() {
			return s, fmt.Errorf("host %d did not verify", o.Host)
		}
	}
	for _, line := range strings.Split(table.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && !strings.HasPrefix(line, "#") {
			s.collective = f[5]
		}
	}
	for _, p := range st.Processes {
		kib := procStatusKiB(p.PID, "VmRSS:")
		if p.Role == lab.RoleHost {
			s.hostRSS = append(s.hostRSS, kib)
			s.hostAnon = append(s.hostAnon, procStatusKiB(p.PID, "RssAnon:"))
		} else {
			s.fabricRSS = max(s.fabricRSS, kib)
			fs, err := lab.FabricStatus(ctx, p.API)
			if err != nil {
				return s, fmt.Errorf("%s status: %w", p.Name, err)
			}
			if fs.Lag.P99Ns > s.lag.P99Ns {
				s.lag = fs.Lag
			}
		}
	}
	return s, nil
}

// procStatusKiB is a "KEY: N kB" line of /proc/PID/status in KiB (0
// when unknown).
func procStatusKiB(pid int, key string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kib, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kib
		}
	}
	return 0
}
