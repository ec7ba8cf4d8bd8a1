package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vcluster/vcluster/compose/labdocker"
)

// StopGrace is how long lab down waits after SIGTERM before SIGKILL.
const StopGrace = 5 * time.Second

// Down stops every process st records — hosts first, then the fabric —
// and nothing else (Runtime.Stop leaves a PID alone that is no longer
// the lab's), then removes state.json, the secret and the run files. The
// logs stay; out says where. A directory without a lab is not an error.
func Down(dir string, out io.Writer) error { return DownWith(dir, DownOptions{}, out) }

// DownWith is Down with options. A docker lab (or, without a state
// directory, lab o.Name when a Docker Engine answers) is removed from the
// Engine by its label — containers (their logs saved in logs/ first),
// network, volumes, and the image with o.RMI; the process runtime
// ignores RMI.
func DownWith(dir string, o DownOptions, out io.Writer) error {
	st, rt, err := Open(dir)
	if errors.Is(err, ErrNoLab) {
		if o.Name != "" {
			if d, derr := newDockerRuntime(); derr == nil {
				defer d.eng.Close()
				fmt.Fprintf(out, "no lab in %s; removing what carries %s=%s on the Docker Engine\n", dir, labdocker.LabLabel, o.Name)
				return d.removeLab(o.Name, dir, o.RMI, out)
			}
		}
		fmt.Fprintf(out, "no lab in %s: nothing to stop\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	if d, ok := rt.(*DockerRuntime); ok {
		if err := d.removeLab(st.Name, st.Dir, o.RMI, out); err != nil {
			return fmt.Errorf("%w\n(state kept in %s: run lab down again)", err, filepath.Join(st.Dir, StateFile))
		}
		removeDockerFiles(st.Dir)
		removeRunFiles(st.Dir)
		fmt.Fprintf(out, "lab down: logs kept in %s\n", filepath.Join(st.Dir, LogDir))
		return nil
	}
	if err := stopAll(rt, st, out); err != nil {
		return fmt.Errorf("%w\n(state kept in %s: run lab down again)", err, filepath.Join(st.Dir, StateFile))
	}
	removeRunFiles(st.Dir)
	fmt.Fprintf(out, "lab down: logs kept in %s\n", filepath.Join(st.Dir, LogDir))
	return nil
}

// stopAll stops st's processes, hosts (concurrently) before the fabric,
// printing one line per process to out.
func stopAll(rt Runtime, st *State, out io.Writer) error {
	var hosts, fabric []Process
	for _, p := range st.Processes {
		if p.Role == RoleFabric {
			fabric = append(fabric, p)
		} else {
			hosts = append(hosts, p)
		}
	}
	var errs []error
	for _, group := range [][]Process{hosts, fabric} {
		lines := make([]string, len(group))
		errc := make(chan error, len(group))
		for i, p := range group {
			go func() {
				was := rt.Alive(p)
				err := rt.Stop(p, StopGrace)
				switch {
				case err != nil:
					lines[i] = fmt.Sprintf("%s (pid %d): %v", p.Name, p.PID, err)
				case was:
					lines[i] = fmt.Sprintf("stopped %s (pid %d)", p.Name, p.PID)
				default:
					lines[i] = fmt.Sprintf("%s (pid %d) was not running", p.Name, p.PID)
				}
				errc <- err
			}()
		}
		for range group {
			if err := <-errc; err != nil {
				errs = append(errs, err)
			}
		}
		for _, l := range lines {
			fmt.Fprintln(out, l)
		}
	}
	return errors.Join(errs...)
}

// removeRunFiles removes a lab's state.json, secret and run directory.
func removeRunFiles(dir string) {
	os.Remove(filepath.Join(dir, StateFile))
	os.Remove(filepath.Join(dir, SecretFile))
	os.RemoveAll(filepath.Join(dir, RunDir))
}

// RestartOptions bound lab restart's waits (0: the defaults).
type RestartOptions struct {
	ReadyTimeout, HealthTimeout time.Duration
}

// Restart starts process name of the lab in dir again with its recorded
// arguments, if its process is gone, waits until it is up and records its
// new PID and addresses. The fabric keeps its tunnel and API addresses
// (the hosts know them).
func Restart(ctx context.Context, dir, name string, o RestartOptions, out io.Writer) error {
	st, rt, err := Open(dir)
	if err != nil {
		return err
	}
	p, ok := st.Process(name)
	if !ok {
		return invalid("lab restart: no process %q in %s (have %s)", name, st.Dir, strings.Join(st.Names(), ", "))
	}
	if rt.Alive(*p) {
		return invalid("lab restart: %s is running (pid %d); restart starts a process that is gone (stop it first, e.g. kill %d)", name, p.PID, p.PID)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = DefaultHealthTimeout
	}
	q := *p
	q.PID, q.API, q.Tunnel = 0, "", ""
	if p.Role == RoleFabric {
		q.Args = withFlag(withFlag(p.Args, "--listen", p.Tunnel), "--api", p.API)
	}
	q, err = startChecked(ctx, rt, st, q, o.ReadyTimeout)
	if err != nil {
		return err
	}
	*p = q
	if err := st.Save(); err != nil {
		return err
	}
	if p.Role == RoleHost {
		if err := waitHostsUp(ctx, rt, st, []int{p.Host}, o.HealthTimeout); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "restarted %s (pid %d)\n", p.Name, p.PID)
	WriteRows(out, []Row{rowOf(ctx, rt, *p)})
	return nil
}

// withFlag is args with flag's value set to v (v "" leaves args alone).
func withFlag(args []string, flag, v string) []string {
	if v == "" {
		return args
	}
	a := slices.Clone(args)
	for i := 0; i+1 < len(a); i++ {
		if a[i] == flag {
			a[i+1] = v
			return a
		}
	}
	return append(a, flag, v)
}
