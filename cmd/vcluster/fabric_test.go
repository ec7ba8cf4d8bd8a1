package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

func writeTestSecret(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lab.secret")
	if err := os.WriteFile(p, []byte("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad flags are refused before anything runs: exit 2, naming the flag,
// the reason and what is allowed.
func TestFabricBadFlagsExit2(t *testing.T) {
	secret := writeTestSecret(t)
	short := filepath.Join(t.TempDir(), "short.secret")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	base := []string{"fabric", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--set", "fabric.preset=C", "--set", "fabric.hosts=8", "--set", "fabric.planes=2"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"--secret-file", "required"}},
		{[]string{"--secret-file", filepath.Join(t.TempDir(), "nope")}, []string{"--secret-file", "no such file"}},
		{[]string{"--secret-file", short}, []string{"--secret-file", "at least 16"}},
		{[]string{"--secret-file", secret, "--plane-speed", "100"}, []string{"--plane-speed", "[1M, 100G]"}},
		{[]string{"--secret-file", secret, "--plane-speed", "1T"}, []string{"--plane-speed", "out of range", "[1M, 100G]"}},
		{[]string{"--secret-file", secret, "--planes", "0,2"}, []string{"--planes", "plane 2", "0..1"}},
		{[]string{"--secret-file", secret, "--planes", "0,0"}, []string{"--planes", "twice"}},
		{[]string{"--secret-file", secret, "--planes", "x"}, []string{"--planes", `"x"`}},
		{[]string{"--secret-file", secret, "--listen", "7400"}, []string{"--listen", "host:port"}},
		{[]string{"--secret-file", secret, "--api", "127.0.0.1:99999"}, []string{"--api", "0..65535"}},
		{[]string{"--secret-file", secret, "--set", "fabric.planes=0"}, []string{"fabric.planes"}},
		{[]string{"--secret-file", secret, "--ready-file", "/nonexistent/dir/ready.json"}, []string{"--ready-file", "does not exist"}},
		{[]string{"--secret-file", secret, "extra"}, []string{"unknown command", "extra"}},
	} {
		code, _, errOut := runCLI(t, append(append([]string(nil), base...), tc.args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr: %s", tc.args, code, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// vcluster fabric serves, writes its ready file, answers /v1/status and
// exits 0 when stopped (the signal handler cancels the context).
func TestFabricServesAndStops(t *testing.T) {
	secret := writeTestSecret(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- executeContext(ctx, []string{"fabric", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--secret-file", secret,
			"--set", "fabric.preset=C", "--set", "fabric.hosts=8", "--set", "fabric.planes=2", "--planes", "1", "--plane-speed", "2G",
			"--ready-file", ready}, &out, &errOut)
	}()
	var info labapi.Ready
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &info) == nil {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("fabric exited %d before it was ready: %s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready file; stderr: %s", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info.PID != os.Getpid() || !strings.HasPrefix(info.API, "127.0.0.1:") || strings.HasSuffix(info.API, ":0") || !strings.HasPrefix(info.Tunnel, "127.0.0.1:") {
		t.Errorf("ready file %+v", info)
	}
	resp, err := http.Get("http://" + info.API + labapi.FabricStatusPath)
	if err != nil {
		t.Fatal(err)
	}
	var s labapi.FabricStatus
	json.NewDecoder(resp.Body).Decode(&s)
	resp.Body.Close()
	if s.Listen != info.Tunnel || len(s.Planes) != 1 || s.Planes[0] != 1 || s.Hosts != 8 || s.Scaling.HostBps != 2_000_000_000 {
		t.Errorf("status %+v", s)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after stop, want 0; stderr: %s", code, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the fabric did not stop")
	}
	if !strings.Contains(errOut.String(), "planes [1]") || !strings.Contains(errOut.String(), "host links 2G") {
		t.Errorf("start line missing planes or scaling: %s", errOut.String())
	}
}

// bench lab-fabric runs its steps and the 70% run, and prints the table.
func TestBenchLabFabricSmoke(t *testing.T) {
	code, out, errOut := runCLI(t, "bench", "lab-fabric", "--hosts", "4", "--duration", "200ms", "--start-rate", "1000", "--max-rate", "1600")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"offered/s", "capacity: 1500 frames/s", "at 70%", "lag at 70% of capacity: p50"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, _, errOut = runCLI(t, "bench", "lab-fabric", "--start-rate", "1000", "--max-rate", "100")
	if code != 2 || !strings.Contains(errOut, "--max-rate") {
		t.Errorf("max below start: exit %d, %s", code, errOut)
	}
	code, _, errOut = runCLI(t, "bench", "lab-fabric", "--hosts", "1")
	if code != 2 || !strings.Contains(errOut, "--hosts") {
		t.Errorf("--hosts 1: exit %d, %s", code, errOut)
	}
}
