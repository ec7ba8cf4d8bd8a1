package labcni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labproc"
)

// quickTimeout bounds one API request.
const quickTimeout = 3 * time.Second

// stopGrace is how long a host has to end after SIGTERM.
const stopGrace = 5 * time.Second

// getJSON GETs http://addr/path into v.
func getJSON(addr, path string, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), quickTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", req.URL, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: not JSON of the lab API: %v", req.URL, err)
	}
	return nil
}

func fabricStatus(api string) (labapi.FabricStatus, error) {
	var s labapi.FabricStatus
	err := getJSON(api, labapi.FabricStatusPath, &s)
	return s, err
}

func hostHealth(api string) (labapi.HostHealth, error) {
	var h labapi.HostHealth
	err := getJSON(api, labapi.HostHealthPath, &h)
	return h, err
}

// hostArgs is the `vcluster host` command line of host id in netns.
func hostArgs(c *NetConf, id int, fabric, netns, ifname, ready string) []string {
	args := []string{"host", "--id", strconv.Itoa(id), "--fabric", fabric,
		"--secret-file", c.SecretFile, "--api", "127.0.0.1:0", "--plane-speed", c.PlaneSpeed,
		"--ready-file", ready, "--tun-netns", netns, "--tun-name", ifname}
	if c.LabConfig != "" {
		args = append(args, "--config", c.LabConfig)
	}
	for _, s := range c.Sets {
		args = append(args, "--set", s)
	}
	return args
}

// startHost starts `vcluster host` in its own session (it outlives the
// plugin and no signal to the runtime's process group reaches it),
// output appended to logPath, and waits until its ready file names its
// API and /v1/health says "up", within c.timeout. On failure it stops
// the process and says why, with the log's last lines.
func startHost(c *NetConf, args []string, ready, logPath string) (pid int, api string, err error) {
	os.Remove(ready)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, "", err
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "--- %s: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), c.Vcluster, strings.Join(args, " "))
	cmd := exec.Command(c.Vcluster, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, "", fmt.Errorf("starting %s: %v", c.Vcluster, err)
	}
	pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fail := func(why string) (int, string, error) {
		stopPID(pid, ready)
		return 0, "", fmt.Errorf("host (pid %d) %s%s", pid, why, logTail(logPath))
	}
	deadline := time.After(c.timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if err == nil {
				err = errors.New("exit status 0")
			}
			return 0, "", fmt.Errorf("host (pid %d) ended before it was up: %v%s", pid, err, logTail(logPath))
		case <-deadline:
			if api == "" {
				return fail(fmt.Sprintf("was not ready within %v (no ready file %s)", c.timeout, ready))
			}
			return fail(fmt.Sprintf("was not up within %v (GET %s/v1/health never said \"up\")", c.timeout, api))
		case <-tick.C:
		}
		if api == "" {
			var rd labapi.Ready
			if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &rd) == nil && rd.API != "" {
				if rd.PID != 0 && rd.PID != pid {
					return fail(fmt.Sprintf("wrote a ready file naming pid %d", rd.PID))
				}
				api = rd.API
			}
			continue
		}
		if h, err := hostHealth(api); err == nil && h.State == "up" {
			return pid, api, nil // the plugin exits; init reaps the host later
		}
	}
}

// logTail is the last lines of a log, indented, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n  last lines of " + path + ":\n    " + strings.Join(lines, "\n    ")
}

// stopPID ends our host (its ready file's path in its command line: a
// reused PID is never signalled): SIGTERM, stopGrace, SIGKILL. Gone
// already is fine.
func stopPID(pid int, marker string) error {
	return labproc.Stop("host", pid, marker, stopGrace, 3*time.Second)
}
