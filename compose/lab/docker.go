package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/compose/labdocker"
)

// DefaultName is a lab's name when --name is not given.
const DefaultName = "vcluster"

// DefaultDir is the state directory of lab name when --dir is not given:
// ./vcluster-lab for the default name, ./vcluster-lab-NAME otherwise.
func DefaultDir(name string) string {
	if name == DefaultName || name == "" {
		return "vcluster-lab"
	}
	return "vcluster-lab-" + name
}

// engineProbe is how long DefaultRuntime waits for a Docker Engine.
const engineProbe = 2 * time.Second

// DefaultRuntime is the runtime lab up uses without --runtime: docker
// when a Docker Engine answers, process otherwise; why says which and
// why (lab up prints it).
func DefaultRuntime(ctx context.Context) (name, why string) {
	e, err := labdocker.Connect(ctx, engineProbe)
	if err != nil {
		return RuntimeProcess, fmt.Sprintf("%v", err)
	}
	defer e.Close()
	return RuntimeDocker, fmt.Sprintf("Docker Engine %s answers at %s", e.Version, e.Host)
}

// DownOptions are what lab down removes beyond the processes.
type DownOptions struct {
	// Name is the lab's name: with the docker runtime, what carries its
	// label is removed even when the state directory is gone.
	Name string
	// RMI also removes the lab's image (docker).
	RMI bool
}

// Exec runs cmd in process name's container (docker runtime) with the
// given stdio and returns its exit code; the process runtime refuses.
func Exec(ctx context.Context, dir, name string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(cmd) == 0 {
		return -1, invalid("COMMAND: empty (lab exec NAME -- COMMAND [ARG…])")
	}
	st, rt, err := Open(dir)
	if err != nil {
		return -1, err
	}
	d, ok := rt.(*DockerRuntime)
	if !ok {
		return -1, invalid("lab exec needs the docker runtime (the lab in %s runs as %s: its processes are on this machine, run the command here)", st.Dir, rt.Name())
	}
	p, ok := st.Process(name)
	if !ok {
		return -1, invalid("NAME: no process %q in %s (have %s)", name, st.Dir, strings.Join(st.Names(), ", "))
	}
	return d.eng.Exec(ctx, p.Container, cmd, stdin, stdout, stderr)
}

// DockerRuntime runs a lab's processes as containers of a compose project
// on the Docker Engine: lab up creates and starts them (ComposeUp); Start
// starts an existing container again (lab restart, as docker start).
type DockerRuntime struct {
	eng *labdocker.Engine
}

// engineTimeout bounds one Engine request of the runtime's.
const engineTimeout = 10 * time.Second

// newDockerRuntime connects to the Docker Engine.
func newDockerRuntime() (*DockerRuntime, error) {
	e, err := labdocker.Connect(context.Background(), engineTimeout)
	if err != nil {
		return nil, fmt.Errorf("runtime docker: %w", err)
	}
	return &DockerRuntime{eng: e}, nil
}

// Engine is the runtime's connection to the Docker Engine.
func (d *DockerRuntime) Engine() *labdocker.Engine { return d.eng }

// Name is RuntimeDocker.
func (d *DockerRuntime) Name() string { return RuntimeDocker }

// Alive implements Runtime: p's container is running.
func (d *DockerRuntime) Alive(p Process) bool {
	if p.Container == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	c, err := d.eng.Inspect(ctx, p.Container, "")
	return err == nil && c.Running
}

// Stop implements Runtime: docker stop with grace.
func (d *DockerRuntime) Stop(p Process, grace time.Duration) error {
	if !d.Alive(p) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace+engineTimeout)
	defer cancel()
	if err := d.eng.Stop(ctx, p.Container, grace); err != nil {
		return fmt.Errorf("%s (container %s): %w", p.Name, p.Container, err)
	}
	return nil
}

// startPoll is how often Start asks a started container whether it serves.
const startPoll = 100 * time.Millisecond

// Start implements Runtime: it starts p's existing container (exe is the
// image's, not used) and waits until its API answers; p comes back with
// the container's main PID, its API and tunnel addresses.
func (d *DockerRuntime) Start(ctx context.Context, exe string, p Process) (Process, error) {
	if p.Container == "" {
		return p, fmt.Errorf("%s: no container recorded (start the lab with lab up)", p.Name)
	}
	lab := labOfContainer(p)
	if err := d.eng.Start(ctx, p.Container); err != nil {
		return p, fmt.Errorf("%s: starting container %s: %w", p.Name, p.Container, err)
	}
	p.Started = time.Now().UTC()
	for {
		c, err := d.eng.Inspect(ctx, p.Container, lab)
		if err != nil {
			return p, fmt.Errorf("%s: container %s: %w", p.Name, p.Container, err)
		}
		if !c.Running {
			return p, fmt.Errorf("%s: container %s %s (exit code %d) before it was ready", p.Name, p.Container, c.Status, c.ExitCode)
		}
		p = withContainer(p, c)
		if p.API != "" && answers(ctx, p) {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return p, fmt.Errorf("%s: container %s runs but its API %s does not answer: %w", p.Name, p.Container, p.API, context.Cause(ctx))
		case <-time.After(startPoll):
		}
	}
}

// labOfContainer is the lab name a container's name implies (its prefix
// before "-SERVICE"), for finding its lab network.
func labOfContainer(p Process) string {
	return strings.TrimSuffix(p.Container, "-"+p.Name)
}

// answers reports whether p's API answers (any health state: Start only
// waits for it to serve; lab waits for "up" itself).
func answers(ctx context.Context, p Process) bool {
	if p.Role == RoleFabric {
		_, err := fabricStatus(ctx, p.API)
		return err == nil
	}
	_, err := hostHealth(ctx, p.API)
	return err == nil
}

// withContainer is p with the addresses and PID of its container c.
func withContainer(p Process, c labdocker.Container) Process {
	p.PID, p.API, p.Tunnel = c.PID, "", ""
	if c.IP == "" {
		return p
	}
	if p.Role == RoleFabric {
		p.API = net.JoinHostPort(c.IP, strconv.Itoa(labdocker.FabricAPIPort))
		p.Tunnel = net.JoinHostPort(c.IP, strconv.Itoa(labdocker.FabricTunnelPort))
	} else { // a host's tunnel end is whatever port its socket got
		p.API = net.JoinHostPort(c.IP, strconv.Itoa(labdocker.HostAPIPort))
	}
	return p
}

// refresh reads st's containers' PIDs and addresses from the Engine: a
// container started again may have a new IP.
func (d *DockerRuntime) refresh(ctx context.Context, st *State) error {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	cs, err := d.eng.Containers(ctx, st.Name)
	if err != nil {
		return err
	}
	byName := map[string]labdocker.Container{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	for i, p := range st.Processes {
		c, ok := byName[p.Container]
		if !ok {
			st.Processes[i].PID, st.Processes[i].API = 0, ""
			continue
		}
		q := withContainer(p, c)
		if q.API == "" { // not running: keep the last addresses for ps
			q.API, q.Tunnel = p.API, p.Tunnel
		}
		st.Processes[i] = q
	}
	return nil
}

// logTailer is a runtime that keeps its processes' logs itself.
type logTailer interface {
	LogTail(p Process, n int) string
}

// LogTail is the last n lines of p's container log, indented, with a
// header.
func (d *DockerRuntime) LogTail(p Process, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	var b bytes.Buffer
	if err := d.eng.Logs(ctx, p.Container, strconv.Itoa(n), &b); err != nil {
		return fmt.Sprintf("  (no log of container %s: %v)", p.Container, err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	return fmt.Sprintf("  last lines of docker logs %s:\n    %s", p.Container, strings.Join(lines, "\n    "))
}

// procLogTail is p's log tail as its runtime keeps it.
func procLogTail(rt Runtime, p Process, n int) string {
	if lt, ok := rt.(logTailer); ok {
		return lt.LogTail(p, n)
	}
	return logTail(p.Log, n)
}

// saveContainerLogs writes every container's log of lab name into
// dir/logs/CONTAINER-SERVICE.log (the service's name, as a process lab's).
func (d *DockerRuntime) saveContainerLogs(ctx context.Context, name, dir string, out io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, 4*engineTimeout)
	defer cancel()
	cs, err := d.eng.Containers(ctx, name)
	if err != nil {
		fmt.Fprintf(out, "saving logs: %v\n", err)
		return
	}
	if len(cs) == 0 {
		return
	}
	os.MkdirAll(filepath.Join(dir, LogDir), 0o755)
	for _, c := range cs {
		svc := c.Service
		if svc == "" {
			svc = c.Name
		}
		var b bytes.Buffer
		if err := d.eng.Logs(ctx, c.ID, "all", &b); err != nil {
			fmt.Fprintf(out, "saving %s's log: %v\n", c.Name, err)
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, LogDir, svc+".log"), b.Bytes(), 0o644); err != nil {
			fmt.Fprintf(out, "saving %s's log: %v\n", c.Name, err)
		}
	}
}

// removeLab saves lab name's container logs into dir's logs/ and removes
// everything carrying its label (the image with rmi).
func (d *DockerRuntime) removeLab(name, dir string, rmi bool, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 12*engineTimeout)
	defer cancel()
	d.saveContainerLogs(ctx, name, dir, out)
	var b bytes.Buffer
	err := d.eng.RemoveLab(ctx, name, rmi, &b)
	if b.Len() == 0 && err == nil {
		fmt.Fprintf(out, "lab %s: nothing carries %s=%s on the Docker Engine: nothing to remove\n", name, labdocker.LabLabel, name)
	}
	out.Write(b.Bytes())
	return err
}
