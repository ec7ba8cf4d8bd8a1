package labproc

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A process is ours only while its command line holds the marker; Stop
// ends ours and leaves any other PID alone.
func TestIsOursAndStop(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "h0.ready")
	ours := exec.Command("sh", "-c", "sleep 30", "sh", marker) // the marker is an argument
	other := exec.Command("sleep", "30")
	for _, c := range []*exec.Cmd{ours, other} {
		if err := c.Start(); err != nil {
			t.Skipf("cannot start %v: %v", c.Args, err)
		}
		go c.Wait() // reap: a zombie is not ours
	}
	t.Cleanup(func() { other.Process.Kill(); ours.Process.Kill() })
	// Right after Start a child may not have exec'd yet (its command line
	// is still the test binary's): wait until both show theirs.
	for deadline := time.Now().Add(10 * time.Second); !(IsOurs(ours.Process.Pid, marker) && IsOurs(other.Process.Pid, "30")); {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !IsOurs(ours.Process.Pid, marker) {
		t.Fatalf("pid %d with %s in its command line is not ours", ours.Process.Pid, marker)
	}
	if IsOurs(other.Process.Pid, marker) || IsOurs(ours.Process.Pid, "") || IsOurs(0, marker) {
		t.Fatal("a PID without the marker (or no marker, or no PID) is ours")
	}
	if err := Stop("other", other.Process.Pid, marker, time.Second, time.Second); err != nil {
		t.Fatal(err)
	}
	if !IsOurs(other.Process.Pid, "30") { // sleep 30 runs on
		t.Fatal("Stop signalled a PID that is not ours")
	}
	if err := Stop("h0", ours.Process.Pid, marker, 5*time.Second, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if IsOurs(ours.Process.Pid, marker) {
		t.Fatal("ours still runs after Stop")
	}
	if !IsOurs(other.Process.Pid, "30") {
		t.Fatal("the other process was stopped")
	}
	if err := Stop("h0", ours.Process.Pid, marker, time.Second, time.Second); err != nil {
		t.Fatalf("Stop of a process already gone: %v", err)
	}
}
