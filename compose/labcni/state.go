package labcni

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Record is one attachment as the plugin keeps it in its state
// directory: <stateDir>/<network>/<containerID>_<ifname>.json.
type Record struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
	Netns       string `json:"netns"`
	Host        int    `json:"host"`
	PID         int    `json:"pid"`
	API         string `json:"api"`
	Address     string `json:"address"` // the host's plane-0 address/64
	Log         string `json:"log"`
	ReadyFile   string `json:"readyFile"` // also the marker in the host's command line
	// Result is the ADD's result, given again to a repeated ADD.
	Result json.RawMessage `json:"result,omitempty"`
}

// store is one network's state directory.
type store struct{ dir string }

func newStore(c *NetConf) store { return store{filepath.Join(c.StateDir, c.Name)} }

// key names an attachment's files; skel has checked both parts (letters,
// digits, '_', '.', '-'; no '/').
func key(containerID, ifname string) string { return containerID + "_" + ifname }

func (s store) recordPath(k string) string { return filepath.Join(s.dir, k+".json") }
func (s store) readyPath(k string) string  { return filepath.Join(s.dir, k+".ready") }
func (s store) logPath(k string) string    { return filepath.Join(s.dir, k+".log") }

// lock takes the network's lock (flock on <dir>/lock) until unlock:
// ADDs, DELs and GCs of one network run one at a time, so two ADDs never
// pick the same host.
func (s store) lock() (unlock func(), err error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("stateDir: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("stateDir: %v", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("stateDir: lock: %v", err)
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// load reads an attachment's record; ok false when there is none.
func (s store) load(k string) (Record, bool, error) {
	b, err := os.ReadFile(s.recordPath(k))
	if errors.Is(err, os.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, false, fmt.Errorf("record %s: %v", s.recordPath(k), err)
	}
	return r, true, nil
}

// save writes a record atomically.
func (s store) save(r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	p := s.recordPath(key(r.ContainerID, r.IfName))
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// remove deletes an attachment's record and ready file (the log stays,
// for whoever asks what happened; GC removes logs without a record).
func (s store) remove(k string) error {
	for _, p := range []string{s.recordPath(k), s.readyPath(k)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// all lists every record, sorted by key.
func (s store) all() ([]Record, error) {
	names, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Record
	for _, n := range names {
		r, ok, err := s.load(strings.TrimSuffix(filepath.Base(n), ".json"))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// orphanLogs lists logs no record names.
func (s store) orphanLogs() []string {
	logs, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	var out []string
	for _, l := range logs {
		if _, err := os.Stat(strings.TrimSuffix(l, ".log") + ".json"); errors.Is(err, os.ErrNotExist) {
			out = append(out, l)
		}
	}
	return out
}
