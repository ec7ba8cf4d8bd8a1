package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDrillCommand(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	os.WriteFile(plan, []byte(`events:
  - at: 300us
    duration: 1ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
`), 0o644)
	logf := filepath.Join(dir, "events.jsonl")
	code, out, errOut := runCLI(t, "drill", "--plan", plan, "--preset", "C", "--bytes", "33554432", "--log", logf)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("\n%s", out)
	for _, want := range []string{"1 completed (1 verified byte for byte", "link_down", "bypassed", "→ completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	b, err := os.ReadFile(logf)
	if err != nil || !strings.Contains(string(b), `"event":"inject"`) || !strings.Contains(string(b), `"event":"recovered"`) {
		t.Errorf("event log: %v\n%s", err, b)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("events:\n  - at: 1ms\n    kind: link_down\n    target: link:p1.t0.0-p1.t1.9\n"), 0o644)
	code, _, errOut = runCLI(t, "drill", "--plan", bad, "--preset", "C")
	if code != 2 || !strings.Contains(errOut, "bad.yaml:2:") {
		t.Errorf("bad plan: exit %d, stderr %q", code, errOut)
	}
}
