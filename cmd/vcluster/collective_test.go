package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCollectiveCommand(t *testing.T) {
	dir := t.TempDir()
	tr, csvF, js := filepath.Join(dir, "t.json"), filepath.Join(dir, "r.csv"), filepath.Join(dir, "r.json")
	code, out, errOut := runCLI(t, "collective", "--op", "allreduce", "--algo", "ring", "--hosts", "16", "--ranks", "8",
		"--transport", "mrc", "--sizes", "64K:256K", "--trace", tr, "--csv", csvF, "--json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"8 ranks, mrc", "algbw", "busbw", "#wrong", "65536", "131072", "262144", " ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rows []map[string]any
	b, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(b, &rows) != nil || len(rows) != 3 {
		t.Errorf("JSON rows: %v, %d rows", err, len(rows))
	}
	if b, err := os.ReadFile(csvF); err != nil || strings.Count(string(b), "\n") != 4 {
		t.Errorf("CSV: %v\n%s", err, b)
	}
	var doc struct{ TraceEvents []any }
	if b, err := os.ReadFile(tr); err != nil || json.Unmarshal(b, &doc) != nil || len(doc.TraceEvents) == 0 {
		t.Errorf("trace: %v, %d events", err, len(doc.TraceEvents))
	}

	// RoCE, payload elided: the check is skipped and says why.
	code, out, errOut = runCLI(t, "collective", "--op", "alltoall", "--hosts", "16", "--transport", "roce", "--sizes", "1M", "--elide")
	if code != 0 || !strings.Contains(out, "roce") || !strings.Contains(out, "ecmp") || !strings.Contains(out, "skipped") {
		t.Errorf("roce elided: exit %d\n%s%s", code, out, errOut)
	}

	// A workload.
	code, out, errOut = runCLI(t, "collective", "--hosts", "16", "--ranks", "8", "--workload", "allreduce:ring:256K,alltoall:pairwise:128K@4", "--iters", "2")
	if code != 0 || !strings.Contains(out, "mean iteration time") {
		t.Errorf("workload: exit %d\n%s%s", code, out, errOut)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"collective", "--op", "allsum"},
		{"collective", "--algo", "nosuch"},
		{"collective", "--sizes", "1M:1K"},
		{"collective", "--check", "maybe"},
	} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2", args, code)
		}
	}
}
