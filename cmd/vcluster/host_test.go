package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/tunnel"
)

func writeSecret(t *testing.T) string {
	t.Helper()
	s, err := tunnel.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, s, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every bad flag of `vcluster host` is a usage error (exit 2) naming the
// flag, before anything starts.
func TestHostBadFlagsExit2(t *testing.T) {
	secret := writeSecret(t)
	small := []string{"--set", "fabric.preset=C", "--set", "fabric.hosts=4"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--secret-file", secret}, "--id: required"},
		{[]string{"--id", "4", "--secret-file", secret}, "--id: 4 is out of range; must be a host in [0, 3]"},
		{[]string{"--id", "-1", "--secret-file", secret}, "--id"},
		{[]string{"--id", "x", "--secret-file", secret}, "--id"},
		{[]string{"--id", "0"}, "--secret-file: required"},
		{[]string{"--id", "0", "--secret-file", filepath.Join(t.TempDir(), "none")}, "--secret-file"},
		{[]string{"--id", "0", "--secret-file", secret, "--fabric", "nowhere"}, "--fabric"},
		{[]string{"--id", "0", "--secret-file", secret, "--api", "8080"}, "--api"},
		{[]string{"--id", "0", "--secret-file", secret, "--plane-speed", "10"}, "--plane-speed"},
		{[]string{"--id", "0", "--secret-file", secret, "--plane-speed", "1T"}, "--plane-speed"},
		{[]string{"--id", "0", "--secret-file", secret, "--set", "fabric.planes=0"}, "fabric.planes"},
		{[]string{"--id", "0", "--secret-file", secret, "--ready-file", "/nonexistent/dir/ready"}, "--ready-file"},
		{[]string{"--id", "0", "--secret-file", secret, "stray"}, "unknown command"},
	} {
		args := append(append([]string{"host"}, small...), c.args...)
		code, _, errOut := runCLI(t, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", c.args, code, errOut, c.want)
		}
	}
}

// A host with good flags listens, writes its ready file, answers
// /v1/health ("starting": no fabric answers) and exits 0 when stopped.
func TestHostRunsAndStopsCleanly(t *testing.T) {
	secret := writeSecret(t)
	ready := filepath.Join(t.TempDir(), "ready.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codec := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		codec <- executeContext(ctx, []string{"host", "--set", "fabric.preset=C", "--set", "fabric.hosts=4", "--id", "2",
			"--secret-file", secret, "--fabric", "127.0.0.1:9", "--api", "127.0.0.1:0", "--ready-file", ready, "--plane-speed", "100M"}, &out, &errb)
	}()
	var info labapi.Ready
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &info) == nil {
			break
		}
		select {
		case code := <-codec:
			t.Fatalf("host exited %d before it was ready: %s", code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready file within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if info.PID != os.Getpid() || info.API == "" || info.Tunnel == "" {
		t.Fatalf("ready file %+v", info)
	}
	resp, err := http.Get("http://" + info.API + labapi.HostHealthPath)
	if err != nil {
		t.Fatal(err)
	}
	var hh labapi.HostHealth
	json.NewDecoder(resp.Body).Decode(&hh)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || hh.State != "starting" || hh.Host != 2 {
		t.Fatalf("health without a fabric: HTTP %d %+v", resp.StatusCode, hh)
	}
	cancel()
	select {
	case code := <-codec:
		if code != 0 {
			t.Fatalf("exit %d after the stop, want 0: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("host did not stop within 20 s")
	}
	if _, err := http.Get("http://" + info.API + labapi.HostHealthPath); err == nil {
		t.Fatal("the API still answers after the host stopped")
	}
}
