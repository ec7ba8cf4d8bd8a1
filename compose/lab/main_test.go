package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER.
const prSetChildSubreaper = 36

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) != "" && len(os.Args) > 1 && (os.Args[1] == "fabric" || os.Args[1] == "host") {
		runFake(os.Args[1:])
		return
	}
	os.Setenv(fakeEnv, "1")
	// The processes `vcluster lab up` starts outlive it: as the
	// subreaper, this test process inherits them and can reap them, so
	// that a killed one is gone (ESRCH), not a zombie of an init that
	// does not reap.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", e)
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// vclusterBin builds ./cmd/vcluster once for the tests that drive the
// real binary (the first one to need it pays for the build).
func vclusterBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		binDir, binErr = os.MkdirTemp("", "vcluster-lab-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "vcluster")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go") // the toolchain running this test
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		cmd := exec.Command(goTool, "build", "-o", binPath, "./cmd/vcluster")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/vcluster: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// testExe is the test binary, which runs the fake fabric and hosts.
func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// gone reports whether pid no longer exists: reaped if it was a zombie
// child of this process, and then kill(pid, 0) says ESRCH.
func gone(pid int) bool {
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// waitGonePID polls until pid is gone or d has passed.
func waitGonePID(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !gone(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// alivePID reports whether pid runs and is not a zombie.
func alivePID(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S …: the state follows the last ')'.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
		}
	}
	return false
}
