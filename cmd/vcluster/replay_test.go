package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readManifest(t *testing.T, dir string) manifest {
	t.Helper()
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// sameFiles checks that each file is in a and b, not empty, and the same.
func sameFiles(t *testing.T, a, b string, files ...string) {
	t.Helper()
	for _, f := range files {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) || len(x) == 0 {
			t.Errorf("%s differs between %s and %s (or is empty)", f, a, b)
		}
	}
}

// Replaying a manifest reproduces the run: results.csv byte for byte (and
// the rest of the report), with the experiment, size, parameters, config
// file's exp: section and seed all taken from the manifest, not from
// defaults. A manifest with another seed gives other results, so the
// comparison can fail.
func TestReplayManifest(t *testing.T) {
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfgPath, []byte("exp:\n  losses: [0, 0.01]\n  roceQPs: 1\n"), 0o644)
	a := filepath.Join(t.TempDir(), "a")
	if code, _, errOut := runCLI(t, "experiment", "loss-sweep", "--quick", "--config", cfgPath, "--set", "exp.size=4M", "--seed", "5", "--out", a); code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	ma := readManifest(t, a)
	if ma.Experiment != "allreduce-loss" || ma.Command != "experiment" || ma.Params["losses"] != "0,0.01" || ma.Params["size"] != "4M" || ma.Seed != 5 {
		t.Fatalf("manifest = %+v", ma)
	}
	b := filepath.Join(t.TempDir(), "b")
	code, out, errOut := runCLI(t, "experiment", "--manifest", filepath.Join(a, manifestFile), "--out", b)
	if code != 0 {
		t.Fatalf("replay exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "allreduce-loss") || !strings.Contains(errOut, "replaying") || strings.Contains(errOut, "warning") {
		t.Errorf("replay printed:\n%s\n%s", out, errOut)
	}
	sameFiles(t, a, b, "results.csv", "results.json", "report.md", "report.html", "busbw_vs_loss.svg")
	mb := readManifest(t, b)
	abs, _ := filepath.Abs(filepath.Join(a, manifestFile))
	if mb.ReplayOf != abs || mb.Experiment != ma.Experiment || mb.Size != ma.Size || !reflect.DeepEqual(mb.Params, ma.Params) ||
		mb.Events != ma.Events || mb.Seed != ma.Seed || mb.ConfigFile != cfgPath {
		t.Errorf("replay manifest = %+v\nrecorded %+v", mb, ma)
	}
	mb.Config.Output.Dir = ma.Config.Output.Dir
	if !reflect.DeepEqual(mb.Config, ma.Config) {
		t.Errorf("replay config %+v\nrecorded %+v", mb.Config, ma.Config)
	}
	// The name on the command line may be the experiment's or an alias.
	if code, _, errOut := runCLI(t, "experiment", "allreduce-loss", "--manifest", filepath.Join(a, manifestFile), "--out", filepath.Join(t.TempDir(), "c")); code != 0 {
		t.Errorf("replay with the name exited %d: %s", code, errOut)
	}

	// The same manifest with another seed: different results.csv.
	raw, _ := os.ReadFile(filepath.Join(a, manifestFile))
	var j map[string]any
	json.Unmarshal(raw, &j)
	j["seed"] = 6
	j["config"].(map[string]any)["seed"] = 6
	other := filepath.Join(t.TempDir(), "manifest.json")
	nb, _ := json.Marshal(j)
	os.WriteFile(other, nb, 0o644)
	d := filepath.Join(t.TempDir(), "d")
	if code, _, errOut := runCLI(t, "run", "--manifest", other, "--out", d); code != 0 {
		t.Fatalf("replay of the edited manifest exited %d: %s", code, errOut)
	}
	x, _ := os.ReadFile(filepath.Join(a, "results.csv"))
	y, _ := os.ReadFile(filepath.Join(d, "results.csv"))
	if bytes.Equal(x, y) {
		t.Error("seed 6 gave the same results.csv as seed 5: the comparison above proves nothing")
	}
}

// `vcluster run --manifest` replays a `vcluster run`: the preflight too.
func TestReplayRunManifest(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	args := []string{"run", "--quick", "--set", "exp.size=2M", "--set", "exp.losses=0.01", "--set", "exp.roceQPs=2", "--set", "fabric.hosts=8", "--out", a}
	if code, _, errOut := runCLI(t, args...); code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	b := filepath.Join(t.TempDir(), "b")
	code, out, errOut := runCLI(t, "run", "--manifest", filepath.Join(a, manifestFile), "--out", b)
	if code != 0 {
		t.Fatalf("replay exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "zero-load") {
		t.Errorf("the replay of a run has no preflight:\n%s", out)
	}
	sameFiles(t, a, b, "results.csv", "results.json", "report.md", "pings.csv", "counters.csv", "topology.dot")
	if m := readManifest(t, b); m.Command != "run" || m.Config.Fabric.Hosts != 8 || m.Params["roceQPs"] != "2" {
		t.Errorf("replay manifest = %+v", m)
	}
}

// A bad, missing or mismatched manifest is a usage error (exit 2) naming
// the field and the reason, before anything is written.
func TestReplayRejects(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a")
	if code, _, errOut := runCLI(t, append(append([]string{}, quickExp...), "--set", "exp.losses=0", "--out", a)...); code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	good := filepath.Join(a, manifestFile)
	raw, _ := os.ReadFile(good)
	edited := func(edit func(map[string]any)) string {
		var j map[string]any
		json.Unmarshal(raw, &j)
		edit(j)
		b, _ := json.Marshal(j)
		p := filepath.Join(t.TempDir(), "manifest.json")
		os.WriteFile(p, b, 0o644)
		return p
	}
	garbage := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(garbage, []byte("{\"tool\": "), 0o644)
	out := filepath.Join(t.TempDir(), "never")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--manifest", filepath.Join(t.TempDir(), "none.json"), "--out", out}, "no such file"},
		{[]string{"run", "--manifest", garbage, "--out", out}, "not a JSON object"},
		{[]string{"run", "--manifest", good}, "--manifest needs --out"},
		{[]string{"run", "--manifest", good, "--out", a}, "recorded run's directory"},
		{[]string{"run", "--manifest", good, "--out", out, "--set", "fabric.planes=2"}, "cannot be combined with --set"},
		{[]string{"experiment", "allreduce-loss", "--manifest", good, "--out", out, "--full"}, "cannot be combined with --full"},
		{[]string{"experiment", "p2p", "--manifest", good, "--out", out}, `experiment: is "allreduce-loss", the command asks for "p2p"`},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { j["params"].(map[string]any)["size"] = nil }), "--out", out}, "params.size: want a JSON string"},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { delete(j["params"].(map[string]any), "payload") }), "--out", out}, "params.payload: missing"},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { j["params"].(map[string]any)["qps"] = "1" }), "--out", out}, "params.qps: allreduce-loss has no such parameter"},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { j["size"] = "medium" }), "--out", out}, `size: must be quick, default or full, got "medium"`},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { j["seed"] = 2 }), "--out", out}, "seed: disagrees with config.seed"},
		{[]string{"run", "--manifest", edited(func(j map[string]any) { delete(j, "experiment") }), "--out", out}, "experiment: missing"},
		{[]string{"run", "--manifest", edited(func(j map[string]any) {
			j["config"].(map[string]any)["transport"].(map[string]any)["kind"] = "udp"
		}), "--out", out}, `config.transport.kind: must be one of "mrc", "roce", "mprdma", "random", "orderre", got "udp"`},
	} {
		code, stdout, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
		if stdout != "" {
			t.Errorf("%v: stdout %q", c.args, stdout)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a rejected replay created its output dir (%v)", err)
	}
}
