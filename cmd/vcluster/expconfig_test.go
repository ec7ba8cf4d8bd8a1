package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExpSectionParams(t *testing.T) {
	p := writeFile(t, "# comment\nseed: 4\nexperiment:\n  size: 64M\n  losses: [0, 0.001]\n  ring: on\nfabric:\n  planes: 2\n")
	params, err := expSectionParams(configDoc(p))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"size=64M", "losses=0,0.001", "ring=on"}; !slices.Equal(params, want) {
		t.Errorf("params = %q, want %q", params, want)
	}
	// The rest of the file is the configuration's, with no copy of it.
	cfg, err := loadConfigLayers(p, nil, nil)
	if err != nil || cfg.Fabric.Planes != 2 || cfg.Seed != 4 {
		t.Errorf("config of the file: planes %d, seed %d, %v", cfg.Fabric.Planes, cfg.Seed, err)
	}
	// No section, no file, a file that is not YAML: no parameters.
	for _, path := range []string{writeFile(t, "seed: 4\n"), "", writeFile(t, "a: [\n"), filepath.Join(t.TempDir(), "none.yaml")} {
		if params, err := expSectionParams(configDoc(path)); params != nil || err != nil {
			t.Errorf("%q: %q %v", path, params, err)
		}
	}
	for body, want := range map[string]string{
		"exp:\n  size: 1M\nexperiment:\n  size: 2M\n": "both exp and experiment",
		"exp: 3\n":                     "exp: must be a mapping",
		"exp:\n  size:\n    a: 1\n":    "exp.size: must be a value or a list of values",
		"exp:\n  losses: [[0], [1]]\n": "exp.losses: list items must be values",
	} {
		if _, err := expSectionParams(configDoc(writeFile(t, body))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
		if _, err := loadConfigLayers(writeFile(t, body+"fabric:\n  plnaes: 2\n"), nil, []string{"fabric.bogus=1"}); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%q: loadConfigLayers: %v, want %q alone", body, err, want)
		}
	}
}

// The experiment's settings go under the file, which goes under --set; a
// key the file names, even as null, is the file's.
func TestLoadConfigLayers(t *testing.T) {
	p := writeFile(t, "fabric:\n  planes: 2\n  hosts: ~\n")
	settings := []string{"fabric.planes=4", "fabric.hosts=8", "fabric.hostsPerT0=2", "seed=3"}
	got, err := loadConfigLayers(p, settings, []string{"seed=5"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.Load(p, append(clusterSetsUnder(p, settings), "seed=5"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layers = %+v\nwant     %+v", got.Fabric, want.Fabric)
	}
	if got.Fabric.Planes != 2 || got.Seed != 5 || got.Fabric.HostsPerT0 != 2 {
		t.Errorf("planes %d (file), seed %d (--set), hostsPerT0 %d (setting)", got.Fabric.Planes, got.Seed, got.Fabric.HostsPerT0)
	}
	if want := []string{"fabric.hostsPerT0=2", "seed=3"}; !slices.Equal(clusterSetsUnder(p, settings), want) {
		t.Errorf("clusterSetsUnder = %q, want %q", clusterSetsUnder(p, settings), want)
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
