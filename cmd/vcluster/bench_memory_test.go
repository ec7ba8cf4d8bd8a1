package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestBenchMemory(t *testing.T) {
	code, out, errOut := runCLI(t, "bench", "memory", "--sizes", "2M,3M", "--chains", "1,4", "--reads", "20000", "--lines", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Two sizes × two page kinds, each with a positive figure per chain
	// count; 3M is measured as the 4 MiB of whole 2 MiB pages it maps.
	rows := regexp.MustCompile(`(?m)^(\d+) MiB\s+(4 KiB|2 MiB)\s+([0-9.]+)\s+([0-9.]+)$`).FindAllStringSubmatch(out, -1)
	if len(rows) != 4 {
		t.Fatalf("want 4 table rows, got %d:\n%s", len(rows), out)
	}
	for i, r := range rows {
		if want := []string{"2", "2", "4", "4"}[i]; r[1] != want {
			t.Errorf("row %d is for %s MiB, want %s MiB", i, r[1], want)
		}
		if r[3] == "0.0" || r[4] == "0.0" {
			t.Fatalf("zero time per line in %q", r[0])
		}
	}
	if !regexp.MustCompile(`best at 4 MiB: [0-9.]+ ns per line; a packet-hop touching 10 lines: ≤ [0-9.]+ M hops/s\n`).MatchString(out) {
		t.Fatalf("no ceiling line:\n%s", out)
	}
	for _, bad := range [][]string{{"--chains", "0"}, {"--sizes", "-1"}, {"--reads", "10"}, {"--lines", "0"}} {
		code, _, errOut := runCLI(t, append([]string{"bench", "memory"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, bad[0]) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming the flag", bad, code, errOut)
		}
	}
}
