package lab

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"
)

// Process states lab ps shows.
const (
	StateUp       = "up"       // running and its API says so
	StateStarting = "starting" // running, not (yet) up
	StateDown     = "down"     // not running
)

// Row is one line of lab ps.
type Row struct {
	Name, Role string
	PID        int
	State      string
	API        string
	Address    string        // a host's plane-0 address; the fabric's tunnel address
	LagP99     time.Duration // -1 when unknown
	Why        string        // why it is not up, when it is not
}

// Open loads the lab in dir and the runtime that started it.
func Open(dir string) (*State, Runtime, error) {
	st, err := LoadState(dir)
	if err != nil {
		return nil, nil, &InvalidError{Err: fmt.Errorf("--dir: %w", err)}
	}
	rt, err := NewRuntime(st.Runtime)
	if err != nil {
		return nil, nil, invalid("%s: runtime: %v", st.Dir, err)
	}
	if d, ok := rt.(*DockerRuntime); ok {
		// A container started again may have another IP: the Engine's
		// addresses are the lab's, whatever state.json last recorded.
		if err := d.refresh(context.Background(), st); err != nil {
			return nil, nil, fmt.Errorf("%s: asking the Docker Engine for lab %s's containers: %w", st.Dir, st.Name, err)
		}
	}
	return st, rt, nil
}

// Rows asks every process of st how it is, concurrently.
func Rows(ctx context.Context, rt Runtime, st *State) []Row {
	rows := make([]Row, len(st.Processes))
	var wg sync.WaitGroup
	for i, p := range st.Processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i] = rowOf(ctx, rt, p)
		}()
	}
	wg.Wait()
	return rows
}

// rowOf is p's lab ps row.
func rowOf(ctx context.Context, rt Runtime, p Process) Row {
	r := Row{Name: p.Name, Role: p.Role, PID: p.PID, API: p.API, Address: "-", LagP99: -1, State: StateDown}
	if !rt.Alive(p) {
		r.Why = "not running"
		return r
	}
	r.State = StateStarting
	switch p.Role {
	case RoleFabric:
		r.Address = p.Tunnel
		s, err := fabricStatus(ctx, p.API)
		if err != nil {
			r.Why = err.Error()
			return r
		}
		r.State, r.Address, r.LagP99 = StateUp, s.Listen, time.Duration(s.Lag.P99Ns)
		if ap, err := netip.ParseAddrPort(s.Listen); err == nil && ap.Addr().IsUnspecified() && p.Tunnel != "" {
			r.Address = p.Tunnel // a container listens on every address: show the one hosts use
		}
	case RoleHost:
		h, err := hostHealth(ctx, p.API)
		if err != nil {
			r.Why = err.Error()
			return r
		}
		r.Address, r.LagP99 = h.Address, time.Duration(h.Lag.P99Ns)
		if h.State == StateUp {
			r.State = StateUp
		} else {
			r.Why = fmt.Sprintf("health says %q", h.State)
		}
	}
	return r
}

// writePs prints st's processes as lab ps does.
func writePs(ctx context.Context, out io.Writer, rt Runtime, st *State) []Row {
	rows := Rows(ctx, rt, st)
	WriteRows(out, rows)
	return rows
}

// WriteRows prints rows as a table: NAME ROLE PID STATE API ADDRESS
// LAG-p99, then why each process that is starting is not up yet.
func WriteRows(out io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tPID\tSTATE\tAPI\tADDRESS\tLAG-p99")
	for _, r := range rows {
		lag := "-"
		if r.LagP99 >= 0 {
			lag = r.LagP99.Round(time.Microsecond).String()
		}
		pid := "-"
		if r.PID > 0 {
			pid = strconv.Itoa(r.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Role, pid, r.State, orDash(r.API), orDash(r.Address), lag)
	}
	tw.Flush()
	for _, r := range rows {
		if r.State == StateStarting && r.Why != "" {
			fmt.Fprintf(out, "%s is starting: %s\n", r.Name, r.Why)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Ps prints the lab in dir as a table.
func Ps(ctx context.Context, dir string, out io.Writer) ([]Row, error) {
	st, rt, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return writePs(ctx, out, rt, st), nil
}
