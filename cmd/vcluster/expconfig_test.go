package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSplitExpSection(t *testing.T) {
	p := writeFile(t, "# comment\nseed: 4\nexperiment:\n  size: 64M\n  losses: [0, 0.001]\n  ring: on\nfabric:\n  planes: 2\n")
	rest, params, err := splitExpSection(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"size=64M", "losses=0,0.001", "ring=on"}; !slices.Equal(params, want) {
		t.Errorf("params = %q, want %q", params, want)
	}
	if strings.Contains(string(rest), "experiment") || !strings.Contains(string(rest), "planes: 2") || !strings.Contains(string(rest), "seed: 4") {
		t.Errorf("rest =\n%s", rest)
	}
	// No section: the file is used as it is.
	if rest, params, err := splitExpSection(writeFile(t, "seed: 4\n")); rest != nil || params != nil || err != nil {
		t.Errorf("no section: %q %q %v", rest, params, err)
	}
	for body, want := range map[string]string{
		"exp:\n  size: 1M\nexperiment:\n  size: 2M\n": "both exp and experiment",
		"exp: 3\n":                     "exp: must be a mapping",
		"exp:\n  size:\n    a: 1\n":    "exp.size: must be a value or a list of values",
		"exp:\n  losses: [[0], [1]]\n": "exp.losses: list items must be values",
	} {
		if _, _, err := splitExpSection(writeFile(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// Experiment parameters in the --config file's exp: section mean what
// --set exp.key=value means; --set wins; an unknown key is a usage error
// naming it; other commands read the same file without complaint.
func TestExpSectionInConfig(t *testing.T) {
	cfg := writeFile(t, "seed: 9\nexp:\n  size: 4M\n  losses: [0, 0.01]\n  roceQPs: 2\nfabric:\n  hosts: 8\n")
	dir := filepath.Join(t.TempDir(), "x")
	code, out, errOut := runCLI(t, "experiment", "allreduce-loss", "--quick", "--config", cfg, "--set", "exp.roceQPs=1", "--out", dir)
	if code != 0 {
		t.Fatalf("exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "parameters: size=4M losses=0,0.01 roceQPs=1 payload=elided") {
		t.Errorf("parameters not from the file and --set:\n%s", out)
	}
	m := readManifest(t, dir)
	if m.Params["size"] != "4M" || m.Params["roceQPs"] != "1" || m.Seed != 9 || m.Config.Fabric.Hosts != 8 || m.ConfigFile != cfg {
		t.Errorf("manifest = %+v", m)
	}
	for _, c := range []struct{ body, want string }{
		{"exp:\n  sise: 4M\n", "exp.sise: allreduce-loss has no such parameter"},
		{"exp:\n  size: {a: 1}\n", "exp.size: must be a value"},
		{"exp:\n  size: 1M\nfabric:\n  plnaes: 2\n", "fabric.plnaes: unknown field"},
	} {
		never := filepath.Join(t.TempDir(), "never")
		code, _, errOut := runCLI(t, "run", "--config", writeFile(t, c.body), "--out", never)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, %s; want 2 and %q", c.body, code, errOut, c.want)
		}
		if _, err := os.Stat(never); !os.IsNotExist(err) {
			t.Errorf("%q: output dir created", c.body)
		}
	}
	if code, out, errOut := runCLI(t, "topo", "--config", cfg); code != 0 || !strings.Contains(out, "hosts      8") {
		t.Errorf("topo with an exp: section exited %d: %s%s", code, out, errOut)
	}
}
