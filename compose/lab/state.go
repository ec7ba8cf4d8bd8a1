package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vcluster/vcluster/compose/labspec"
)

// Roles of a lab's processes.
const (
	RoleFabric = "fabric"
	RoleHost   = "host"
)

// FabricName is the fabric process's name in a lab.
const FabricName = "fabric"

// StateVersion is the version of state.json this package writes and reads.
const StateVersion = 1

// Files and folders of a lab's state directory.
const (
	StateFile  = "state.json"
	SecretFile = "secret"
	RunDir     = "run"
	LogDir     = "logs"
	// ConfigCopy is the copy of --config under RunDir the processes read
	// (so a restart reads what the lab started with).
	ConfigCopy = "config.yaml"
)

// Process is one process of a lab as state.json records it.
type Process struct {
	Name string `json:"name"` // "fabric", "h0", "h1", …
	Role string `json:"role"` // RoleFabric or RoleHost
	Host int    `json:"host"` // the host id; -1 for the fabric
	PID  int    `json:"pid"`
	// API is the process's HTTP API (host:port); Tunnel its tunnel UDP
	// address (the fabric's is what hosts attach to).
	API    string `json:"api"`
	Tunnel string `json:"tunnel,omitempty"`
	// Args are the arguments after the executable: a restart runs them
	// again.
	Args []string `json:"args"`
	// Log is the file its stdout and stderr go to; ReadyFile the file it
	// writes once serving (an absolute path, also in its command line:
	// that is how lab down knows a PID is still this lab's).
	Log       string    `json:"log"`
	ReadyFile string    `json:"ready_file"`
	Started   time.Time `json:"started"`
	// Container is the process's container (docker runtime: its name).
	Container string `json:"container,omitempty"`
}

// State is a lab's state.json.
type State struct {
	Version int    `json:"version"`
	Name    string `json:"name,omitempty"` // the lab's name (--name)
	Dir     string `json:"dir"`            // the state directory, absolute
	Runtime string `json:"runtime"`        // the runtime that started it
	// Executable is the vcluster binary the processes run.
	Executable string    `json:"executable"`
	Created    time.Time `json:"created"`
	Secret     string    `json:"secret"` // the secret file
	// Config is the config file the processes read ("" for none), Sets
	// the --set values they get, PlaneBps their --plane-speed.
	Config    string          `json:"config,omitempty"`
	Sets      []string        `json:"sets,omitempty"`
	PlaneBps  uint64          `json:"plane_bps"`
	Hosts     int             `json:"hosts"`
	Planes    int             `json:"planes"`
	Transport string          `json:"transport"`
	Digest    string          `json:"digest"` // hex labspec digest
	Scaling   labspec.Scaling `json:"scaling"`
	Processes []Process       `json:"processes"`
}

// Process returns the process named name.
func (s *State) Process(name string) (*Process, bool) {
	for i := range s.Processes {
		if s.Processes[i].Name == name {
			return &s.Processes[i], true
		}
	}
	return nil, false
}

// HostProcess returns host h's process.
func (s *State) HostProcess(h int) (*Process, bool) {
	for i := range s.Processes {
		if s.Processes[i].Role == RoleHost && s.Processes[i].Host == h {
			return &s.Processes[i], true
		}
	}
	return nil, false
}

// Names lists the processes' names in state order.
func (s *State) Names() []string {
	var ns []string
	for _, p := range s.Processes {
		ns = append(ns, p.Name)
	}
	return ns
}

// put records p, replacing the process of the same name.
func (s *State) put(p Process) {
	if q, ok := s.Process(p.Name); ok {
		*q = p
		return
	}
	s.Processes = append(s.Processes, p)
}

// ErrNoLab is LoadState's error for a directory without state.json.
var ErrNoLab = errors.New("no lab")

// LoadState reads dir's state.json. A missing file is ErrNoLab (wrapped,
// with the path); a malformed one says what is wrong.
func LoadState(dir string) (*State, error) {
	path := filepath.Join(dir, StateFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s: start one with lab up)", ErrNoLab, dir, StateFile)
	}
	if err != nil {
		return nil, err
	}
	return decodeState(path, b)
}

// decodeState parses and checks a state.json's bytes (path names it in
// errors).
func decodeState(path string, b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: not a lab state: %v", path, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("%s: version %d, this vcluster reads version %d", path, s.Version, StateVersion)
	}
	seen := map[string]bool{}
	for i, p := range s.Processes {
		switch {
		case p.Name == "" || seen[p.Name]:
			return nil, fmt.Errorf("%s: processes[%d]: name %q is empty or repeated", path, i, p.Name)
		case p.Role != RoleFabric && p.Role != RoleHost:
			return nil, fmt.Errorf("%s: processes[%d] (%s): role %q is neither %s nor %s", path, i, p.Name, p.Role, RoleFabric, RoleHost)
		case p.PID < 0:
			return nil, fmt.Errorf("%s: processes[%d] (%s): pid %d is negative", path, i, p.Name, p.PID)
		}
		seen[p.Name] = true
	}
	return &s, nil
}

// Save writes s to its directory's state.json atomically (a reader sees
// the old or the new file, never half of one).
func (s *State) Save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(s.Dir, StateFile), append(b, '\n'), 0o644)
}

// WriteFileAtomic writes data to a temporary file beside path and renames
// it over path (mode perm): a reader sees the old file or the whole new
// one. The lab's state, secret and config copy, and the ready files of
// vcluster fabric and host, are written this way.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeAtomicFrom(path, bytes.NewReader(data), perm)
}

// writeAtomicFrom is WriteFileAtomic with the content read from r.
func writeAtomicFrom(path string, r io.Reader, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// hostsOf lists the state's host ids in order.
func (s *State) hostsOf() []int {
	var hs []int
	for _, p := range s.Processes {
		if p.Role == RoleHost {
			hs = append(hs, p.Host)
		}
	}
	slices.Sort(hs)
	return hs
}
