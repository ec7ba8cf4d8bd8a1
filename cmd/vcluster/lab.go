package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/compose/lab"
	"github.com/vcluster/vcluster/compose/labdocker"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/units"
)

func init() { extraCommands = append(extraCommands, newLabCmd) }

// labError maps compose/lab's errors to exit statuses: a refused request
// is a usage error (2); anything else a failed run (1).
func labError(err error) error {
	var ie *lab.InvalidError
	if errors.As(err, &ie) {
		return usageError(err)
	}
	return err
}

// noConfigFlags refuses the root's --config, --set and --seed on lab
// commands other than up: the lab's config is the one it started with.
func noConfigFlags(cmd *cobra.Command) error {
	for _, name := range []string{"config", "set", "seed"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return usageError(fmt.Errorf("--%s: lab %s takes no config (the lab runs the one lab up was given; see %s in --dir)", name, cmd.Name(), lab.StateFile))
		}
	}
	return nil
}

func newLabCmd() *cobra.Command {
	var dir, name string
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Start, drive and stop a lab: the fabric and the hosts as real processes",
		Long: `lab runs a cluster config as real processes on real-time loops: one
vcluster fabric and one vcluster host per virtual host, attached by
authenticated UDP tunnels, with link speeds scaled so the CPU keeps up
(see docs/lab.md). They run as processes (--runtime process) or as
docker-compose services (--runtime docker, the default when a Docker
Engine answers). Every command works on the lab called --name, whose
state is in --dir.`,
		Args: noArgs,
		// --dir follows --name unless given; a bad name is refused
		// before any command runs.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := labdocker.CheckName(name); err != nil {
				return usageError(err)
			}
			if !cmd.Flags().Changed("dir") {
				dir = lab.DefaultDir(name)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError(errors.New("lab: name a command (up, ps, exec, run-collective, fault, capture, graph, restart, down)"))
		},
	}
	cmd.PersistentFlags().StringVar(&name, "name", lab.DefaultName, "the lab's `name`: its docker-compose project, the vcluster.lab label on all it creates, and the default --dir")
	cmd.PersistentFlags().StringVar(&dir, "dir", lab.DefaultDir(lab.DefaultName), "the lab's state `directory` (state.json, secret, run/, logs/; default ./vcluster-lab, or ./vcluster-lab-NAME with --name)")
	cmd.AddCommand(newLabUpCmd(&dir, &name), newLabPsCmd(&dir), newLabExecCmd(&dir), newLabRunCollectiveCmd(&dir), newLabFaultCmd(&dir),
		newLabCaptureCmd(&dir), newLabGraphCmd(&dir), newLabRestartCmd(&dir), newLabDownCmd(&dir, &name))
	return cmd
}

// labRetryKey is MRC's retry scope, which lab up sets to per packet.
const labRetryKey = "transport.mrc.retryScope"

// setsKey reports whether one of the --set values sets key.
func setsKey(sets []string, key string) bool {
	return slices.ContainsFunc(sets, func(kv string) bool { return strings.HasPrefix(strings.TrimSpace(kv), key+"=") })
}

// labWait is the range of the bounded waits (--timeout of up and restart).
func labWait() flagCheck { return durationIn(0, 30*time.Minute, true) }

func newLabUpCmd(dir, name *string) *cobra.Command {
	var (
		runtime, preset, speed, binary string
		hosts                          int
		netns                          []string
		wait                           time.Duration
		perPlane, monitoring           bool
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a lab: the fabric, then every host, and wait until they are up",
		Example: `  vcluster lab up --preset C --hosts 4
  vcluster lab up --config lab.yaml --plane-speed 100M --dir /tmp/lab1
  vcluster lab up --runtime docker --name lab2 --hosts 8 --fabric-per-plane --monitoring`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&runtime, "runtime", "", "how the lab runs: docker (docker-compose services) or process (children of vcluster); default docker when a Docker Engine answers, else process")
	f.StringVar(&preset, "preset", "", "cluster preset A|B|C|D (default C when no --config; same as --set fabric.preset=…)")
	f.IntVar(&hosts, "hosts", 0, "number of hosts, one process each (same as --set fabric.hosts=…; 0: the config's)")
	limit(f, "hosts", intIn(0, lab.MaxHosts, "0: the config's"))
	f.StringVar(&speed, "plane-speed", "1G", "host-link speed per plane the lab runs at (fabric links scaled by the same factor)")
	limit(f, "plane-speed", planeSpeedFlag())
	f.StringSliceVar(&netns, "tun-netns", nil, "network `namespaces`, comma-separated, in host order: host i's TUN goes into the i-th (an empty item: none)")
	f.DurationVar(&wait, "timeout", lab.DefaultHealthTimeout, "bound on each process's start and on the wait for every host to be up")
	limit(f, "timeout", labWait())
	f.BoolVar(&perPlane, "fabric-per-plane", false, "run one fabric per plane (docker: one container each; planes never interconnect)")
	f.BoolVar(&monitoring, "monitoring", false, "docker: add prometheus and grafana services with a vcluster dashboard (skipped, saying so, when their images are not on this machine)")
	f.StringVar(&binary, "binary", "", "docker: the static vcluster `binary` to put in the lab's image (default: this one, when it is static)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if runtime == "" {
			var why string
			runtime, why = lab.DefaultRuntime(cmd.Context())
			fmt.Fprintf(cmd.OutOrStdout(), "runtime %s (no --runtime): %s\n", runtime, why)
		}
		rt, err := lab.NewRuntime(runtime)
		if err != nil {
			return usageError(fmt.Errorf("--runtime: %v", err))
		}
		if runtime != lab.RuntimeDocker {
			for _, fl := range []string{"monitoring", "binary"} {
				if cmd.Flags().Changed(fl) {
					return usageError(fmt.Errorf("--%s: needs --runtime docker (this lab runs as processes)", fl))
				}
			}
		}
		if binary != "" {
			if _, err := os.Stat(binary); err != nil {
				return usageError(fmt.Errorf("--binary: %v", err))
			}
		}
		path, sets, err := configSources(cmd)
		if err != nil {
			return err
		}
		var pre []string
		if preset != "" {
			if !slices.Contains(config.PresetNames(), preset) {
				return usageError(fmt.Errorf("--preset: unknown preset %q (want one of %s)", preset, strings.Join(config.PresetNames(), ", ")))
			}
			if path != "" {
				return usageError(fmt.Errorf("--preset: conflicts with --config %s (the file chooses the cluster; override it with --set fabric.preset=%s)", path, preset))
			}
			if setsPreset(sets) {
				return usageError(errors.New("--preset: conflicts with --set fabric.preset=…; give one of them"))
			}
			pre = append(pre, "fabric.preset="+preset)
		} else if path == "" && !setsPreset(sets) {
			pre = append(pre, "fabric.preset=C")
		}
		if hosts != 0 {
			if setsKey(sets, "fabric.hosts") {
				return usageError(errors.New("--hosts: conflicts with --set fabric.hosts=…; give one of them"))
			}
			// Fewer hosts than the cluster puts under one T0 share one
			// T0 (a lab of 2 on preset C), unless the config says how
			// many a T0 takes.
			if base, err := loadConfigFrom(path, append(slices.Clone(pre), sets...)); err == nil &&
				hosts < base.Fabric.HostsPerT0 && !setsKey(sets, "fabric.hostsPerT0") {
				pre = append(pre, "fabric.hostsPerT0="+strconv.Itoa(hosts))
			}
			pre = append(pre, "fabric.hosts="+strconv.Itoa(hosts))
		}
		if path != "" {
			if _, err := os.Stat(path); err != nil {
				return usageError(fmt.Errorf("--config: %v", err))
			}
		}
		// A lab's loops run late when its machine is busy, and every
		// packet in flight then times out at once: MRC's per-connection
		// retry count (the spec's) fails a healthy QP at the 13th of them
		// (seen in the live-fault test beside two busy cores). A lab
		// counts per packet unless the config or --set says otherwise; a
		// host that dies is noticed by its peers' API watch, not its QPs.
		if !setsKey(sets, labRetryKey) && (path == "" || !config.ReadFile(path).Names(labRetryKey)) {
			pre = append(pre, labRetryKey+"="+string(mrc.RetryPacket))
		}
		// The config as given (before the lab scales it), so that a
		// problem is reported against the flag typed (--hosts 6).
		if _, err := loadConfigFrom(path, append(pre, sets...)); err != nil {
			return usageError(flagConfigError(cmd, err))
		}
		bps, _ := units.ParseSpeed(speed) // checked by the flag's range
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("lab up: the vcluster executable: %w", err)
		}
		stopsOnInterrupt()
		_, err = lab.Up(cmd.Context(), lab.UpOptions{Dir: *dir, Runtime: rt, Executable: exe, Config: path,
			Sets: append(pre, sets...), PlaneBps: bps, TunNetns: netns, ReadyTimeout: wait, HealthTimeout: wait,
			Name: *name, FabricPerPlane: perPlane, Monitoring: monitoring, Binary: binary}, cmd.OutOrStdout())
		if err != nil && interrupted(cmd.Context()) {
			return interruptedError("during lab up", "the processes it had started are stopped; logs kept in "+*dir+"/"+lab.LogDir)
		}
		return labError(err)
	}
	return cmd
}

func newLabPsCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:     "ps",
		Short:   "List the lab's processes: name, role, pid, state (up/starting/down), API, address, lag p99",
		Example: `  vcluster lab ps`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noConfigFlags(cmd); err != nil {
				return err
			}
			_, err := lab.Ps(cmd.Context(), *dir, cmd.OutOrStdout())
			return labError(err)
		},
	}
}

func newLabRunCollectiveCmd(dir *string) *cobra.Command {
	var (
		o     lab.CollectiveOptions
		size  uint64
		hosts []int
	)
	cmd := &cobra.Command{
		Use:   "run-collective",
		Short: "Run one collective on the lab's hosts and print its nccl-tests row",
		Example: `  vcluster lab run-collective --op allreduce --size 16M
  vcluster lab run-collective --op alltoall --size 1M --hosts 0,1,2,3 --iters 5 --warmup 1`,
		Args: noArgs,
	}
	f := cmd.Flags()
	f.StringVar(&o.Op, "op", "allreduce", "collective: allreduce, allgather, reducescatter, alltoall, broadcast")
	f.StringVar(&o.Algo, "algo", "", "algorithm (default: the op's)")
	bytesVar(f, &size, "size", 16<<20, 1, tib, "nccl-tests size (bytes, or with K, M, G, T)")
	f.IntVar(&o.Iters, "iters", 1, "timed iterations")
	limit(f, "iters", intIn(1, 1_000_000, ""))
	f.IntVar(&o.Warmup, "warmup", 0, "untimed iterations first")
	limit(f, "warmup", intIn(0, 1_000_000, ""))
	f.DurationVar(&o.Timeout, "timeout", 60*time.Second, "wall-time bound of the whole run on every member")
	limit(f, "timeout", durationIn(0, lab.MaxCollectiveTimeout, true))
	f.IntSliceVar(&hosts, "hosts", nil, "members in rank order, comma-separated host ids (default: every host)")
	limit(f, "hosts", listOf(intIn(0, lab.MaxHosts-1, "")))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := noConfigFlags(cmd); err != nil {
			return err
		}
		o.Size, o.Hosts = fmtBytes(size), hosts
		_, err := lab.RunCollective(cmd.Context(), *dir, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		return labError(err)
	}
	return cmd
}

func newLabFaultCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:     "fault PLAN.yaml",
		Short:   "Apply a fault plan to the running fabric (its times count from now)",
		Example: `  vcluster lab fault examples/faults/gray-link.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("lab fault: takes one PLAN.yaml, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := noConfigFlags(cmd); err != nil {
				return err
			}
			_, err := lab.Fault(cmd.Context(), *dir, args[0], cmd.OutOrStdout())
			return labError(err)
		},
	}
}

func newLabCaptureCmd(dir *string) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "capture PORT",
		Short: "Stream a fabric port's frames as pcapng to stdout",
		Example: `  vcluster lab capture p0.t0.0/1 | tshark -r -
  vcluster lab capture p0.t0.0/1 --count 100 > t0.pcapng`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("lab capture: takes one PORT, got %d arguments", len(args)))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many frames (0: until interrupted or the fabric ends)")
	limit(cmd.Flags(), "count", intIn(0, maxFlagCount, "0: until interrupted"))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := noConfigFlags(cmd); err != nil {
			return err
		}
		stopsOnInterrupt()
		_, err := lab.Capture(cmd.Context(), *dir, args[0], count, cmd.OutOrStdout())
		return labError(err)
	}
	return cmd
}

func newLabGraphCmd(dir *string) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:     "graph",
		Short:   "Print the fabric's topology (links down marked) as DOT or SVG",
		Example: `  vcluster lab graph --format svg > fabric.svg`,
		Args:    noArgs,
	}
	cmd.Flags().StringVar(&format, "format", "dot", "dot or svg")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := noConfigFlags(cmd); err != nil {
			return err
		}
		return labError(lab.Graph(cmd.Context(), *dir, format, cmd.OutOrStdout()))
	}
	return cmd
}

func newLabRestartCmd(dir *string) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:     "restart NAME",
		Short:   "Start a lab process that is gone (e.g. h2) again with its recorded arguments",
		Example: `  vcluster lab restart h2`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(fmt.Errorf("lab restart: takes one NAME (fabric, h0, h1, …), got %d arguments", len(args)))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&wait, "timeout", lab.DefaultHealthTimeout, "bound on its start and on the wait for it to be up")
	limit(cmd.Flags(), "timeout", labWait())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := noConfigFlags(cmd); err != nil {
			return err
		}
		err := lab.Restart(cmd.Context(), *dir, args[0], lab.RestartOptions{ReadyTimeout: wait, HealthTimeout: wait}, cmd.OutOrStdout())
		return labError(err)
	}
	return cmd
}

func newLabDownCmd(dir, name *string) *cobra.Command {
	var rmi bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop every process of the lab and remove what it created (and nothing else); keep the logs",
		Long: `down stops the lab's processes, hosts first, and removes its state but
its logs. A docker lab's containers, networks and volumes are found by their
vcluster.lab=NAME label (even when --dir is gone) and removed, with its image
too under --rmi.`,
		Example: `  vcluster lab down
  vcluster lab down --name lab2 --rmi`,
		Args: noArgs,
	}
	cmd.Flags().BoolVar(&rmi, "rmi", false, "docker: also remove the lab's image")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := noConfigFlags(cmd); err != nil {
			return err
		}
		return labError(lab.DownWith(*dir, lab.DownOptions{Name: *name, RMI: rmi}, cmd.OutOrStdout()))
	}
	return cmd
}

func newLabExecCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "exec NAME -- CMD [ARG]...",
		Short: "Run a command in a lab container (docker runtime), e.g. ping -6 from one host to another",
		Long: `exec runs CMD in the container of the lab's process NAME (fabric, h0, …)
with this terminal's stdin, stdout and stderr, and exits with CMD's exit
status. The image holds the vcluster binary at /vcluster and, when the machine
that built it had busybox-static, busybox's tools (sh, ping, ip, …).`,
		Example: `  vcluster lab exec h0 -- ping -6 -c 3 fd00::2
  vcluster lab exec h1 -- ip -6 addr`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || cmd.ArgsLenAtDash() != 1 {
				return usageError(errors.New("lab exec: takes NAME -- CMD [ARG]... (e.g. lab exec h0 -- ping -6 -c 3 fd00::2)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := noConfigFlags(cmd); err != nil {
				return err
			}
			code, err := lab.Exec(cmd.Context(), *dir, args[0], args[1:], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return labError(err)
			}
			if code != 0 {
				return &exitError{code: code, err: fmt.Errorf("lab exec %s: %s exited with status %d", args[0], args[1], code)}
			}
			return nil
		},
	}
}
