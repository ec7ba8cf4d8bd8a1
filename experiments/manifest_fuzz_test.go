package experiments

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vcluster/vcluster/config"
)

// realManifest runs a tiny allreduce-loss and returns its manifest.json,
// the seed of the manifest fuzz corpus.
func realManifest(t testing.TB) []byte {
	e, _ := Lookup(DefaultName)
	cfg, err := config.Load("", e.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ResolveParams(e, Quick, []string{"size=64K", "losses=0", "roceQPs=1"})
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Config: cfg, Size: Quick, Params: p}
	dir := t.TempDir()
	if _, err := Execute(context.Background(), e, env, dir, "fuzz seed", nil, Manifest{Tool: "vcluster", Command: "experiment"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzReadManifest: decoding a manifest for a replay and validating it
// (ReadManifest, Manifest.Replay, the experiment's parameter checks) never
// panics, and whatever it accepts is a runnable plan: a known experiment
// and size, every parameter in range, a config that validates unchanged.
func FuzzReadManifest(f *testing.F) {
	real := realManifest(f)
	f.Add(real)
	var m map[string]any
	if err := json.Unmarshal(real, &m); err != nil {
		f.Fatal(err)
	}
	for _, edit := range []func(map[string]any){
		func(m map[string]any) { m["params"].(map[string]any)["losses"] = "2" },
		func(m map[string]any) { m["params"].(map[string]any)["size"] = "1T" },
		func(m map[string]any) { m["experiment"] = "alltoall" },
		func(m map[string]any) { m["size"] = "full" },
		func(m map[string]any) { m["config"].(map[string]any)["fabric"].(map[string]any)["hosts"] = 100000 },
		func(m map[string]any) { delete(m, "params") },
	} {
		var c map[string]any
		json.Unmarshal(real, &c)
		edit(c)
		b, _ := json.Marshal(c)
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"tool":"vcluster","seed":1,"experiment":"p2p","size":"quick","params":{"writes":"4K","stream":"1M"},"config":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest("fuzz.json", b)
		if err != nil {
			return
		}
		e, cfg, err := m.Replay()
		if err != nil {
			return
		}
		if e == nil || cfg.Seed != m.Seed {
			t.Fatalf("Replay accepted %q with experiment %v, seed %d vs %d", b, e, cfg.Seed, m.Seed)
		}
		env := &Env{Config: cfg, Size: m.Size, Params: m.Params}
		if err := CheckParams(e, env); err != nil {
			return // refused before anything runs: the CLI's exit 2
		}
		_ = PayloadBytesPerHost(e, env)
	})
}
