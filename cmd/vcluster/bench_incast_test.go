package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchIncast(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.csv")
	if err := os.WriteFile(other, []byte("t_us,bytes\n0,0\n1.5,4150\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runCLI(t, "bench", "incast", "--senders", "2", "--size", "100K", "--out", out, "--compare", other, "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"incast 2:1 into host 0", "FCT            mean", "flow 1→0", "flow 2→0", "trimmed", "last-hop queue peak"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	csv, err := os.ReadFile(filepath.Join(out, "queue.csv"))
	if err != nil || !strings.HasPrefix(string(csv), "t_us,bytes\n0.000,") {
		t.Errorf("queue.csv: %v %.40q", err, csv)
	}
	for _, f := range []string{"queue.png", "queue.svg"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := os.WriteFile(other, []byte("t_us,bytes\nx,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "bench", "incast", "--compare", other, "--progress", "none"); code != 2 || !strings.Contains(stderr, "want t_us,bytes") {
		t.Errorf("bad --compare: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "bench", "incast", "--senders", "16", "--progress", "none"); code != 2 || !strings.Contains(stderr, "--senders 16") {
		t.Errorf("16 senders on 16 hosts: exit %d, %s", code, stderr)
	}
}
