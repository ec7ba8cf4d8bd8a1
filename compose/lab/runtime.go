package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labproc"
)

// Runtime starts, watches and stops a lab's processes. The commands know
// only this interface: a Docker runtime (issue lab-compose) implements it
// with containers and leaves the commands as they are.
type Runtime interface {
	// Name is the --runtime value that selects it.
	Name() string
	// Start starts p (Name, Role, Args, Log and ReadyFile set; the ready
	// file absent) as exe, the vcluster binary the lab runs (a container
	// runtime runs its image's instead), and returns it with PID, API, Tunnel and Started
	// filled once its ready file says it serves. If the process ends or
	// ctx ends first, Start stops what it started and says why.
	Start(ctx context.Context, exe string, p Process) (Process, error)
	// Alive reports whether p's process runs and is still the one the
	// lab started (not a reused PID).
	Alive(p Process) bool
	// Stop ends p: a polite signal, then, after grace, by force. A
	// process already gone is not an error; a PID that is no longer the
	// lab's is left alone.
	Stop(p Process, grace time.Duration) error
}

// Runtime names.
const (
	RuntimeProcess = "process"
	RuntimeDocker  = "docker"
)

// RuntimeNames lists the --runtime values, the ones not yet available
// included.
var RuntimeNames = []string{RuntimeProcess, RuntimeDocker}

// NewRuntime returns the runtime called name, or an error that says why
// there is none (docker: no Docker Engine answers).
func NewRuntime(name string) (Runtime, error) {
	switch name {
	case RuntimeProcess:
		return ProcessRuntime{}, nil
	case RuntimeDocker:
		return newDockerRuntime()
	}
	return nil, fmt.Errorf("unknown runtime %q (want %s or %s)", name, RuntimeProcess, RuntimeDocker)
}

// ProcessRuntime runs a lab's processes as children of the vcluster
// binary, each in its own process group (a terminal's ^C to `lab up`
// does not reach them, and they outlive it), stdout and stderr appended
// to its log file.
type ProcessRuntime struct{}

// Name is RuntimeProcess.
func (ProcessRuntime) Name() string { return RuntimeProcess }

// readyPoll is how often Start looks for a ready file.
const readyPoll = 20 * time.Millisecond

// Start implements Runtime.
func (r ProcessRuntime) Start(ctx context.Context, exe string, p Process) (Process, error) {
	os.Remove(p.ReadyFile)
	if err := os.MkdirAll(filepath.Dir(p.Log), 0o755); err != nil {
		return p, err
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return p, err
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "--- %s: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), exe, quoteArgs(p.Args))
	cmd := exec.Command(exe, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return p, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.PID = cmd.Process.Pid
	p.Started = time.Now().UTC()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps it if it ends while lab waits
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if rd, ok := readReady(p.ReadyFile); ok {
			if rd.PID != 0 && rd.PID != p.PID {
				r.Stop(p, time.Second)
				return p, fmt.Errorf("%s: its ready file %s names pid %d, but it is pid %d", p.Name, p.ReadyFile, rd.PID, p.PID)
			}
			p.API, p.Tunnel = rd.API, rd.Tunnel
			return p, nil // the goroutine reaps it whenever it ends
		}
		select {
		case err := <-exited:
			return p, fmt.Errorf("%s (pid %d) ended before it was ready: %v", p.Name, p.PID, exitText(err))
		case <-ctx.Done():
			r.Stop(p, time.Second)
			<-exited
			return p, fmt.Errorf("%s (pid %d) was not ready in time (no ready file %s): %w", p.Name, p.PID, p.ReadyFile, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// exitText says how a process ended.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// readReady reads a ready file; ok only when it is whole and names an API.
func readReady(path string) (labapi.Ready, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return labapi.Ready{}, false
	}
	var rd labapi.Ready
	if json.Unmarshal(b, &rd) != nil || rd.API == "" {
		return labapi.Ready{}, false
	}
	return rd, true
}

// Alive implements Runtime: the PID exists, is not a zombie, and its
// command line holds the ready-file path the lab gave it.
func (ProcessRuntime) Alive(p Process) bool { return labproc.IsOurs(p.PID, p.ReadyFile) }

// Stop implements Runtime: SIGTERM, up to grace for it to end, then
// SIGKILL (and up to 2 s more).
func (r ProcessRuntime) Stop(p Process, grace time.Duration) error {
	return labproc.Stop(p.Name, p.PID, p.ReadyFile, grace, 2*time.Second)
}

// quoteArgs is args as a shell would need them typed (for logs).
func quoteArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" || bytes.ContainsAny([]byte(a), " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			b.WriteString(strconv.Quote(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}
