package lab

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/units"
)

// MaxHosts is the most hosts a process lab runs: one process per host,
// each building the whole cluster (labhost's limit).
const MaxHosts = 64

// Default bounded waits of lab up and lab restart.
const (
	DefaultReadyTimeout  = 60 * time.Second // a process's ready file
	DefaultHealthTimeout = 90 * time.Second // every host "up"
)

// InvalidError is a request refused before anything ran: a bad flag,
// config or state directory (the CLI's exit status 2).
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// invalid is an *InvalidError with a formatted message.
func invalid(format string, args ...any) error {
	return &InvalidError{Err: fmt.Errorf(format, args...)}
}

// UpOptions are what lab up starts.
type UpOptions struct {
	Dir        string  // the state directory
	Runtime    Runtime // how processes run
	Executable string  // the vcluster binary the processes run
	// Config is the --config file ("" for none), Sets the --set values
	// in order (the --preset and --hosts shorthands among them), PlaneBps
	// the host-link speed per plane (labspec.Resolve).
	Config   string
	Sets     []string
	PlaneBps uint64
	// TunNetns[i], when not "", is the network namespace host i's TUN
	// device goes into (--tun-netns of vcluster host).
	TunNetns []string
	// ReadyTimeout bounds each process's start (its ready file) and
	// HealthTimeout the wait for every host to be up; 0 for the defaults.
	ReadyTimeout, HealthTimeout time.Duration

	// Name is the lab's name (DefaultName when ""): the docker runtime's
	// compose project and the value of the vcluster.lab label.
	Name string
	// FabricPerPlane runs one fabric per plane (docker: one container
	// each; planes never interconnect).
	FabricPerPlane bool
	// Monitoring adds prometheus and grafana services (docker, when
	// their images exist locally; skipped with a message otherwise).
	Monitoring bool
	// Binary is the static vcluster binary the docker runtime puts in the
	// lab's image ("": Executable, when it is static).
	Binary string
}

// netnsName is what a network namespace name may look like (ip netns).
var netnsName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// NetnsDir is where ip netns keeps named namespaces.
var NetnsDir = "/run/netns"

// CheckUp validates o and resolves the lab's config, before anything is
// started or written: every problem is an *InvalidError naming the flag.
func CheckUp(o UpOptions) (labspec.Lab, error) {
	if o.Dir == "" {
		return labspec.Lab{}, invalid("--dir: empty (the lab's state directory)")
	}
	if o.Runtime == nil {
		return labspec.Lab{}, invalid("--runtime: none")
	}
	if o.Executable == "" {
		return labspec.Lab{}, invalid("the vcluster executable is unknown")
	}
	if err := labspec.CheckPlaneBps("--plane-speed", o.PlaneBps); err != nil {
		return labspec.Lab{}, &InvalidError{Err: err}
	}
	lab, err := labspec.Resolve(o.Config, o.Sets, o.PlaneBps)
	if err != nil {
		return labspec.Lab{}, &InvalidError{Err: err}
	}
	hosts := lab.Config.Fabric.Hosts
	if hosts < 1 || hosts > MaxHosts {
		return labspec.Lab{}, invalid("--hosts: the config has %d hosts; a process lab runs 1..%d (one process per host)", hosts, MaxHosts)
	}
	if len(o.TunNetns) > hosts {
		return labspec.Lab{}, invalid("--tun-netns: %d namespaces for %d hosts (at most one per host, in host order)", len(o.TunNetns), hosts)
	}
	for i, ns := range o.TunNetns {
		if ns == "" {
			continue
		}
		if strings.Contains(ns, "/") { // a namespace file's path
			if _, err := os.Stat(ns); err != nil {
				return labspec.Lab{}, invalid("--tun-netns: item %d: no network namespace file %s (%v)", i, ns, err)
			}
			continue
		}
		if !netnsName.MatchString(ns) {
			return labspec.Lab{}, invalid("--tun-netns: item %d %q is not a namespace name (1..64 of A-Z a-z 0-9 _ . -) nor a path", i, ns)
		}
		if _, err := os.Stat(filepath.Join(NetnsDir, ns)); err != nil {
			return labspec.Lab{}, invalid("--tun-netns: item %d: no network namespace %q (%v; create it with ip netns add %s)", i, ns, err, ns)
		}
	}
	return lab, nil
}

// checkNoLab refuses a state directory that holds a lab with a process
// still running.
func checkNoLab(dir string, rt Runtime) error {
	st, err := LoadState(dir)
	if errors.Is(err, ErrNoLab) {
		return nil
	}
	if err != nil {
		return invalid("--dir %s: %v (remove it, or use another --dir)", dir, err)
	}
	var alive []string
	for _, p := range st.Processes {
		if rt.Alive(p) {
			alive = append(alive, fmt.Sprintf("%s pid %d", p.Name, p.PID))
		}
	}
	if len(alive) > 0 {
		return invalid("--dir %s: a lab is up there (%s): stop it with lab down --dir %s, or use another --dir", dir, strings.Join(alive, ", "), dir)
	}
	return nil
}

// Up starts a lab: it checks everything first (CheckUp, no lab running in
// o.Dir), writes a fresh secret, starts the fabric, then every host, and
// waits until each host is up. It records the lab in state.json as it
// goes and prints a summary to out. When something fails, it stops what
// it started, says what failed with the tail of its log, and keeps the
// logs.
func Up(ctx context.Context, o UpOptions, out io.Writer) (*State, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, invalid("--dir %s: %v", o.Dir, err)
	}
	o.Dir = dir
	lab, err := CheckUp(o)
	if err != nil {
		return nil, err
	}
	if err := checkNoLab(dir, o.Runtime); err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	docker, isDocker := o.Runtime.(*DockerRuntime)
	var binary string // the static binary of a docker lab's image
	switch {
	case isDocker:
		if binary, err = checkDockerUp(ctx, docker, o, name); err != nil {
			return nil, err
		}
		if err := checkARPRoom(labContainers(o, lab)); err != nil {
			return nil, err
		}
	case o.FabricPerPlane:
		return nil, invalid("--fabric-per-plane: needs --runtime docker (a process lab runs one fabric process for every plane)")
	case o.Monitoring:
		return nil, invalid("--monitoring: needs --runtime docker (it adds prometheus and grafana containers)")
	}
	var configBytes []byte // read before anything is written
	if o.Config != "" {
		if configBytes, err = os.ReadFile(o.Config); err != nil {
			return nil, invalid("--config: %v", err)
		}
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = DefaultHealthTimeout
	}
	for _, d := range []string{dir, filepath.Join(dir, RunDir), filepath.Join(dir, LogDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	st := &State{
		Version: StateVersion, Name: name, Dir: dir, Runtime: o.Runtime.Name(), Executable: o.Executable,
		Created: time.Now().UTC(), Secret: filepath.Join(dir, SecretFile),
		Sets: append([]string(nil), o.Sets...), PlaneBps: o.PlaneBps,
		Hosts: lab.Config.Fabric.Hosts, Planes: lab.Config.Fabric.Planes, Transport: lab.Config.Transport.Kind,
		Digest: hex.EncodeToString(lab.Digest[:]), Scaling: lab.Scaling,
	}
	secret, err := tunnel.NewSecret()
	if err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(st.Secret, secret, 0o600); err != nil {
		return nil, err
	}
	if o.Config != "" {
		st.Config = filepath.Join(dir, RunDir, ConfigCopy)
		if err := WriteFileAtomic(st.Config, configBytes, 0o644); err != nil {
			return nil, err
		}
	}
	if isDocker {
		return upDocker(ctx, docker, o, lab, st, binary, out)
	}
	// The processes run a copy of the binary kept in the run directory:
	// `go run` deletes its temporary binary when lab up exits, and lab
	// restart needs one later (lab down removes the copy with run/).
	st.Executable = filepath.Join(dir, RunDir, ExecutableCopy)
	if err := copyExecutable(o.Executable, st.Executable); err != nil {
		return nil, fmt.Errorf("lab up: copying the vcluster executable %s: %w", o.Executable, err)
	}
	fail := func(err error) (*State, error) {
		stopAll(o.Runtime, st, io.Discard)
		removeRunFiles(dir)
		return nil, fmt.Errorf("%w\n(logs kept in %s)", err, filepath.Join(dir, LogDir))
	}

	fab, err := startChecked(ctx, o.Runtime, st, fabricProcess(st), o.ReadyTimeout)
	if err != nil {
		return fail(err)
	}
	st.put(fab)
	if err := st.Save(); err != nil {
		return fail(err)
	}
	if fab.Tunnel == "" {
		return fail(fmt.Errorf("fabric: its ready file %s names no tunnel address", fab.ReadyFile))
	}

	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for h := range st.Hosts {
		ns := ""
		if h < len(o.TunNetns) {
			ns = o.TunNetns[h]
		}
		p := hostProcess(st, h, fab.Tunnel, ns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := startChecked(ctx, o.Runtime, st, p, o.ReadyTimeout)
			mu.Lock()
			defer mu.Unlock()
			if q.PID != 0 {
				st.put(q)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	sortProcesses(st)
	if err := st.Save(); err != nil {
		return fail(err)
	}
	if len(errs) > 0 {
		return fail(errors.Join(errs...))
	}
	if err := waitHostsUp(ctx, o.Runtime, st, st.hostsOf(), o.HealthTimeout); err != nil {
		return fail(err)
	}
	writeUpSummary(ctx, out, o.Runtime, st, lab)
	return st, nil
}

// writeUpSummary prints what lab up started: the processes, topology,
// scaling and the ps table.
func writeUpSummary(ctx context.Context, out io.Writer, rt Runtime, st *State, lab labspec.Lab) {
	f := lab.Config.Fabric
	fabrics := 0
	for _, p := range st.Processes {
		if p.Role == RoleFabric {
			fabrics++
		}
	}
	fmt.Fprintf(out, "lab up in %s: %s + %d hosts, runtime %s, transport %s\n", st.Dir, plural(fabrics, "fabric"), st.Hosts, st.Runtime, st.Transport)
	if f.Topology == config.TopologyClos {
		fmt.Fprintf(out, "topology: clos, %s × %d T0 (%d hosts each) × %d T1\n", plural(f.Planes, "plane"), f.T0PerPlane, f.HostsPerT0, f.T1PerPlane)
	} else {
		fmt.Fprintf(out, "topology: %s, k=%d, %s\n", f.Topology, f.K, plural(f.Planes, "plane"))
	}
	fmt.Fprintf(out, "scaling: %s\n", st.Scaling)
	writePs(ctx, out, rt, st)
	down := "vcluster lab down --dir " + st.Dir
	if st.Runtime == RuntimeDocker {
		down += " (logs are saved there then; lab exec NAME -- CMD runs a command in a container)"
	}
	fmt.Fprintf(out, "logs in %s; stop it with: %s\n", filepath.Join(st.Dir, LogDir), down)
}

// configArgs are the --config and --set arguments every process gets.
func configArgs(st *State) []string {
	var a []string
	if st.Config != "" {
		a = append(a, "--config", st.Config)
	}
	for _, s := range st.Sets {
		a = append(a, "--set", s)
	}
	return a
}

// readyFileOf is process name's ready file in the lab's run directory.
func readyFileOf(st *State, name string) string {
	return filepath.Join(st.Dir, RunDir, name+".ready")
}

// logFileOf is process name's log file.
func logFileOf(st *State, name string) string {
	return filepath.Join(st.Dir, LogDir, name+".log")
}

// fabricProcess is the fabric process lab up starts.
func fabricProcess(st *State) Process {
	p := Process{Name: FabricName, Role: RoleFabric, Host: -1, ReadyFile: readyFileOf(st, FabricName), Log: logFileOf(st, FabricName)}
	p.Args = append([]string{"fabric", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0",
		"--secret-file", st.Secret, "--plane-speed", units.FormatSpeed(st.PlaneBps), "--ready-file", p.ReadyFile}, configArgs(st)...)
	return p
}

// hostProcess is host h's process, attached to the fabric's tunnel
// address, with its TUN in netns when that is not "".
func hostProcess(st *State, h int, fabricTunnel, netns string) Process {
	name := labspec.HostName(h)
	p := Process{Name: name, Role: RoleHost, Host: h, ReadyFile: readyFileOf(st, name), Log: logFileOf(st, name)}
	p.Args = []string{"host", "--id", strconv.Itoa(h), "--fabric", fabricTunnel, "--secret-file", st.Secret,
		"--api", "127.0.0.1:0", "--plane-speed", units.FormatSpeed(st.PlaneBps), "--ready-file", p.ReadyFile}
	if netns != "" {
		p.Args = append(p.Args, "--tun-netns", netns)
	}
	p.Args = append(p.Args, configArgs(st)...)
	return p
}

// startChecked starts p within timeout; a failure says so with the tail
// of its log.
func startChecked(ctx context.Context, rt Runtime, st *State, p Process, timeout time.Duration) (Process, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no ready file after %s", timeout))
	defer cancel()
	q, err := rt.Start(ctx, st.Executable, p)
	if err != nil {
		return q, fmt.Errorf("%v\n%s", err, procLogTail(rt, p, 15))
	}
	return q, nil
}

// healthPoll is how often lab up asks a host whether it is up.
const healthPoll = 100 * time.Millisecond

// waitHostsUp waits until every host of hosts answers "up" on its health
// endpoint, within timeout; an error names the hosts that were not, with
// why and the tail of their logs.
func waitHostsUp(ctx context.Context, rt Runtime, st *State, hosts []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := map[int]string{}
	for _, h := range hosts {
		pending[h] = "not asked yet"
	}
	for len(pending) > 0 {
		for _, h := range hosts {
			if _, ok := pending[h]; !ok {
				continue
			}
			p, _ := st.HostProcess(h)
			if !rt.Alive(*p) {
				return fmt.Errorf("%s (pid %d) ended before it was up\n%s", p.Name, p.PID, procLogTail(rt, *p, 15))
			}
			hh, err := hostHealth(ctx, p.API)
			switch {
			case err != nil:
				pending[h] = err.Error()
			case hh.State != "up":
				pending[h] = fmt.Sprintf("health says %q", hh.State)
			default:
				delete(pending, h)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, h := range hosts {
				if why, ok := pending[h]; ok {
					p, _ := st.HostProcess(h)
					fmt.Fprintf(&b, "%s (pid %d) not up after %s: %s\n%s\n", p.Name, p.PID, timeout, why, procLogTail(rt, *p, 15))
				}
			}
			return errors.New(strings.TrimRight(b.String(), "\n"))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(healthPoll):
		}
	}
	return nil
}

// logTail is the last n lines of the log at path, indented, with a header.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("  (no log %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("  last lines of %s:\n    %s", path, strings.Join(lines, "\n    "))
}

// sortProcesses puts the fabric first and the hosts in id order.
func sortProcesses(st *State) {
	ps := st.Processes
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && procLess(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func procLess(a, b Process) bool {
	if a.Role != b.Role {
		return a.Role == RoleFabric
	}
	return a.Host < b.Host
}

// ExecutableCopy is the name of the binary copy in the run directory.
const ExecutableCopy = "vcluster"

// copyExecutable copies the binary at src to dst (mode 0755), atomically.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomicFrom(dst, in, 0o755)
}
