package config

import (
	"reflect"
	"strings"
	"testing"
)

// Parse gives what Load gives for the document, and its experiment
// section as written, unread.
func TestParse(t *testing.T) {
	body := "seed: 7\nexp:\n  size: 64M\n  losses: [0, 1e-3]\nfabric:\n  planes: 2\n"
	cfg, extra, err := Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	want, err := load("c.yaml", func() ([]byte, error) { return []byte("seed: 7\nfabric:\n  planes: 2\n"), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*cfg, want) {
		t.Errorf("Parse = %+v, want %+v", cfg.Fabric, want.Fabric)
	}
	if extra.Key != "exp" || extra.Value == nil || extra.Value.Line != 3 || len(extra.Value.Content) != 4 || extra.Value.Content[3].Content[1].Value != "1e-3" {
		t.Errorf("extra = %+v", extra)
	}
	if _, extra, err := Parse(strings.NewReader("seed: 1\n")); err != nil || extra.Key != "" || extra.Value != nil {
		t.Errorf("no section: %+v, %v", extra, err)
	}
	// Whatever the section holds is not the config's business.
	if _, extra, err := Parse(strings.NewReader("experiment: 3\n")); err != nil || extra.Key != "experiment" {
		t.Errorf("scalar section: %+v, %v", extra, err)
	}
	for body, want := range map[string]string{
		"exp: {}\nexperiment: {}\n": "both exp and experiment: give experiment parameters in one section",
		"exp: {}\nplnaes: 1\n":      "plnaes: unknown field",
		"[1, 2]\n":                  "config: the top level must be a mapping",
		"a: [\n":                    "config: yaml:",
	} {
		if _, _, err := Parse(strings.NewReader(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// Build's layers: settings under the file (a key the file names at all is
// the file's) under the sets; the same as the sets filtered by hand, and a
// Doc builds the same config every time.
func TestBuildLayers(t *testing.T) {
	body := []byte("fabric:\n  planes: 2\n  hosts: null\noutput:\n  dir: file\n")
	doc := parseDoc("c.yaml", body)
	settings := []string{"fabric.planes=4", "fabric.hosts=8", "fabric.hostsPerT0=2", "output.dir=setting", "fabric.mtu=9000", "seed=3"}
	sets := []string{"seed=5"}
	for _, k := range []string{"fabric", "fabric.planes", "fabric.hosts", "output", "output.dir"} {
		if !doc.Names(k) {
			t.Errorf("Names(%q) = false", k)
		}
	}
	if doc.Names("fabric.hostsPerT0") || doc.Names("seed") {
		t.Error("Names reports keys the file does not name")
	}
	var kept []string
	for _, s := range settings {
		if k, _, _ := strings.Cut(s, "="); !doc.Names(k) {
			kept = append(kept, s)
		}
	}
	want, err := load("c.yaml", func() ([]byte, error) { return body, nil }, append(kept, sets...))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		got, err := Build(Layers{Settings: settings, File: doc, Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("build %d = %+v, want %+v", i, got.Fabric, want.Fabric)
		}
	}
	if want.Fabric.Planes != 2 || want.Seed != 5 || want.Fabric.HostsPerT0 != 2 || want.Fabric.MTU != 9000 || want.Output.Dir != "file" {
		t.Errorf("layers: %+v seed %d", want.Fabric, want.Seed)
	}
	// No file: settings, then sets.
	got, err := Build(Layers{Settings: []string{"seed=3", "fabric.planes=4"}, Sets: []string{"seed=9"}})
	if err != nil || got.Seed != 9 || got.Fabric.Planes != 4 {
		t.Errorf("no file: seed %d planes %d, %v", got.Seed, got.Fabric.Planes, err)
	}
}

// Load sets a document's experiment section aside; the errors of the sets
// come before the file's, as they always have.
func TestLoadExpSectionAndErrorOrder(t *testing.T) {
	c, err := load("c.yaml", func() ([]byte, error) { return []byte("exp:\n  size: 1M\nseed: 2\n"), nil }, nil)
	if err != nil || c.Seed != 2 {
		t.Errorf("exp section: seed %d, %v", c.Seed, err)
	}
	_, err = load("c.yaml", func() ([]byte, error) { return []byte("plnaes: 1\n"), nil }, []string{"fabric.bogus=1"})
	if err == nil || !strings.Contains(err.Error(), "fabric.bogus") || strings.Index(err.Error(), "fabric.bogus") > strings.Index(err.Error(), "plnaes") {
		t.Errorf("order: %v", err)
	}
	_, err = load("c.yaml", func() ([]byte, error) { return []byte("a: [\n"), nil }, []string{"fabric.bogus=1"})
	if err == nil || !strings.Contains(err.Error(), "fabric.bogus") || !strings.Contains(err.Error(), "config: c.yaml: yaml:") {
		t.Errorf("fatal: %v", err)
	}
}
