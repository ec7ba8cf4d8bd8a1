// Package labproc is how a lab's own processes (vcluster fabric and host,
// started by `vcluster lab` or by the CNI plugin) are recognised and
// stopped by PID: a PID is the lab's only while its command line holds
// the marker the lab gave it (its ready file's path), so a PID reused by
// another program is never signalled.
//
// It knows nothing of the lab's state, runtimes or APIs: PIDs, markers
// and signals.
package labproc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// IsOurs reports whether pid runs (not a zombie) with marker in its
// command line.
func IsOurs(pid int, marker string) bool {
	if pid <= 0 || marker == "" {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 { // gone, or a zombie (whose cmdline is empty)
		return false
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if string(arg) == marker {
			return true
		}
	}
	return false
}

// poll is how often WaitGone looks whether a process has ended.
const poll = 25 * time.Millisecond

// WaitGone polls until pid is no longer ours (IsOurs) or d has passed,
// and reports whether it is gone.
func WaitGone(pid int, marker string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for IsOurs(pid, marker) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}

// Stop ends process pid, if it is ours: SIGTERM, up to grace for it to
// end, then SIGKILL (re-checked right before, so never a reused PID) and
// up to killWait more. A process already gone is not an error; name
// names it in errors.
func Stop(name string, pid int, marker string, grace, killWait time.Duration) error {
	if !IsOurs(pid, marker) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s (pid %d): SIGTERM: %w", name, pid, err)
	}
	if WaitGone(pid, marker, grace) {
		return nil
	}
	if !IsOurs(pid, marker) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s (pid %d): SIGKILL: %w", name, pid, err)
	}
	if !WaitGone(pid, marker, killWait) {
		return fmt.Errorf("%s (pid %d) is still running after SIGKILL", name, pid)
	}
	return nil
}
