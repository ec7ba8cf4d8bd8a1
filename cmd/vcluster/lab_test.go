package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every bad lab flag or argument exits 2 naming the flag (or the
// argument) with why, before anything starts: the state directory is not
// even created.
func TestLabBadFlagsExit2(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "lab.yaml")
	os.WriteFile(cfg, []byte("fabric:\n  preset: C\n"), 0o644)
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(plan, []byte("events: []\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lab"}, "name a command"},
		{[]string{"lab", "nonsense"}, "unknown command"},
		{[]string{"lab", "up", "--runtime", "process", "--monitoring"}, "--monitoring: needs --runtime docker"},
		{[]string{"lab", "up", "--runtime", "process", "--binary", "/bin/true"}, "--binary: needs --runtime docker"},
		{[]string{"lab", "up", "--runtime", "docker", "--binary", "/nonexistent/vcluster"}, "--binary: "},
		{[]string{"lab", "--name", "Bad Name", "ps"}, "--name: "},
		{[]string{"lab", "--name", "", "down"}, "--name: "},
		{[]string{"lab", "exec", "h0"}, "takes NAME -- CMD"},
		{[]string{"lab", "exec", "h0", "true"}, "takes NAME -- CMD"},
		{[]string{"lab", "exec", "h0", "--", "true"}, "--dir: no lab in"},
		{[]string{"lab", "up", "--runtime", "k8s"}, `--runtime: unknown runtime "k8s"`},
		{[]string{"lab", "up", "--preset", "X"}, `--preset: unknown preset "X" (want one of A, B, C, D)`},
		{[]string{"lab", "up", "--hosts", "65"}, `"--hosts" flag: 65 is out of range; must be an integer in [0, 64]`},
		{[]string{"lab", "up", "--hosts", "-1"}, `"--hosts" flag`},
		{[]string{"lab", "up", "--hosts", "6"}, "--hosts: 6 is not possible here"},
		{[]string{"lab", "up", "--plane-speed", "1k"}, `"--plane-speed" flag: 1k is out of range; must be a speed in [1M, 100G]`},
		{[]string{"lab", "up", "--plane-speed", "200G"}, `"--plane-speed" flag`},
		{[]string{"lab", "up", "--plane-speed", "fast"}, "fast is not a speed"},
		{[]string{"lab", "up", "--timeout", "0s"}, `"--timeout" flag`},
		{[]string{"lab", "up", "--config", cfg, "--preset", "C"}, "--preset: conflicts with --config"},
		{[]string{"lab", "up", "--preset", "C", "--set", "fabric.preset=D"}, "--preset: conflicts with --set fabric.preset"},
		{[]string{"lab", "up", "--hosts", "4", "--set", "fabric.hosts=8"}, "--hosts: conflicts with --set fabric.hosts"},
		{[]string{"lab", "up", "--config", "/nonexistent/lab.yaml"}, "--config: "},
		{[]string{"lab", "up", "--set", "fabric.planes=0"}, "fabric.planes"},
		{[]string{"lab", "up", "--tun-netns", "vcluster-no-such-ns"}, "--tun-netns: item 0: no network namespace"},
		// 2 hosts on preset C (4 per T0) share one T0: the config is
		// fine, and the next check is the one that refuses.
		{[]string{"lab", "up", "--preset", "C", "--hosts", "2", "--tun-netns", "vcluster-no-such-ns"}, "--tun-netns: item 0: no network namespace"},
		{[]string{"lab", "up", "extra"}, "unknown command"},
		{[]string{"lab", "ps", "--set", "fabric.planes=2"}, "--set: lab ps takes no config"},
		{[]string{"lab", "ps"}, "--dir: no lab in"},
		{[]string{"lab", "run-collective", "--op", "allsum"}, `--op: unknown collective "allsum"`},
		{[]string{"lab", "run-collective", "--algo", "nope"}, `--algo: no algorithm "nope" for allreduce`},
		{[]string{"lab", "run-collective", "--size", "0"}, `"--size" flag`},
		{[]string{"lab", "run-collective", "--iters", "0"}, `"--iters" flag`},
		{[]string{"lab", "run-collective", "--warmup", "-1"}, `"--warmup" flag`},
		{[]string{"lab", "run-collective", "--timeout", "0s"}, `"--timeout" flag`},
		{[]string{"lab", "run-collective", "--timeout", "2h"}, `"--timeout" flag`},
		{[]string{"lab", "run-collective", "--hosts", "0,x"}, `"--hosts" flag`},
		{[]string{"lab", "run-collective", "--hosts", "0,64"}, `"--hosts" flag`},
		{[]string{"lab", "run-collective"}, "--dir: no lab in"},
		{[]string{"lab", "fault"}, "takes one PLAN.yaml, got 0"},
		{[]string{"lab", "fault", "a.yaml", "b.yaml"}, "takes one PLAN.yaml, got 2"},
		{[]string{"lab", "fault", "/nonexistent/plan.yaml"}, "PLAN: "},
		{[]string{"lab", "fault", plan}, "--dir: no lab in"},
		{[]string{"lab", "capture"}, "takes one PORT, got 0"},
		{[]string{"lab", "capture", "p0.t0.0/1", "--count", "-1"}, `"--count" flag`},
		{[]string{"lab", "graph", "--format", "png"}, `--format: "png"; want dot or svg`},
		{[]string{"lab", "restart"}, "takes one NAME"},
		{[]string{"lab", "restart", "h2", "--timeout", "-1s"}, `"--timeout" flag`},
		{[]string{"lab", "restart", "h2"}, "--dir: no lab in"},
		{[]string{"lab", "down", "extra"}, "unknown command"},
	} {
		dir := filepath.Join(t.TempDir(), "lab")
		args := append(append([]string(nil), tc.args...), "--dir", dir)
		code, _, errOut := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2; stderr:\n%s", tc.args, code, errOut)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, errOut, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: created %s", tc.args, dir)
		}
	}
}

// lab down in a directory without a lab says so and exits 0.
func TestLabDownNoLab(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lab")
	code, out, errOut := runCLI(t, "lab", "down", "--dir", dir)
	if code != 0 || !strings.Contains(out, "no lab in "+dir) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Every `vcluster lab …` line docs/lab.md shows names a lab command and
// only flags it has (or inherits), and every lab command has a section.
func TestLabDocCommandsExist(t *testing.T) {
	doc := readDoc(t, "../../docs/lab.md")
	root := newRootCmd()
	n := 0
	for _, line := range docCommands(doc) {
		if !strings.HasPrefix(line, "lab ") {
			continue
		}
		c := commandFor(root, line)
		if c.Name() == "lab" && !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(line, "lab")), "-") {
			t.Errorf("docs/lab.md: `vcluster %s`: no such lab command", line)
			continue
		}
		for _, m := range docFlag.FindAllStringSubmatch(line, -1) {
			n++
			if c.Flags().Lookup(m[1]) == nil && c.InheritedFlags().Lookup(m[1]) == nil {
				t.Errorf("docs/lab.md: `vcluster %s`: %s has no flag --%s", line, c.CommandPath(), m[1])
			}
		}
	}
	if n < 15 {
		t.Errorf("only %d flags found in docs/lab.md's command lines", n)
	}
	lab, _, _ := root.Find([]string{"lab"})
	for _, c := range lab.Commands() {
		if c.Name() != "help" && c.Name() != "completion" && !strings.Contains(doc, "### lab "+c.Name()+"\n") {
			t.Errorf("docs/lab.md has no section \"### lab %s\"", c.Name())
		}
	}
}
