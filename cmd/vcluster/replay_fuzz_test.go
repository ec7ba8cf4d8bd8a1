package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vcluster/vcluster/experiments"
)

// FuzzReplayPlan: turning any manifest into a replay plan — ReadManifest,
// Manifest.Replay, the name and --parallel checks, the parameter ranges
// and the memory estimate (replayPlan, everything a replay does before it
// runs) — never panics, refuses with a usage error (exit status 2), and a
// plan it accepts is complete. Seeded with real manifests of `run` and
// `experiment`.
func FuzzReplayPlan(f *testing.F) {
	for _, args := range [][]string{
		{"experiment", "p2p", "--quick", "--set", "exp.writes=4K", "--set", "exp.stream=64K"},
		{"run", "--set", "exp.size=64K", "--set", "exp.losses=0", "--set", "exp.roceQPs=1", "--set", "fabric.hosts=4", "--set", "fabric.hostsPerT0=2"},
	} {
		dir := filepath.Join(f.TempDir(), "seed")
		var out, errb nopWriter
		if code := execute(append(args, "--out", dir, "--progress", "none"), &out, &errb); code != 0 {
			f.Fatalf("%v: exit %d", args, code)
		}
		b, err := os.ReadFile(filepath.Join(dir, manifestFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "", -1)
		f.Add(b, "allreduce-loss", 2)
	}
	out := filepath.Join(f.TempDir(), "replay")
	f.Fuzz(func(t *testing.T, b []byte, name string, parallel int) {
		m, err := experiments.DecodeManifest("m.json", b)
		if err != nil {
			return
		}
		j, _, err := replayPlan(m, "m.json", out, name, parallel)
		if err != nil {
			if !isUsage(err) {
				t.Fatalf("replayPlan refused %q with %v, not a usage error", b, err)
			}
			return
		}
		if j.e == nil || j.cfg.Output.Dir != out || j.params == nil {
			t.Fatalf("replayPlan accepted %q as an incomplete job %+v", b, j)
		}
	})
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func isUsage(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.code == 2
}
