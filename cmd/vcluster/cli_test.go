package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
)

// runCLI executes the root command in-process and returns the exit status
// and what it wrote.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersion(t *testing.T) {
	code, out, errOut := runCLI(t, "version")
	if code != 0 {
		t.Fatalf("version exited %d: %s", code, errOut)
	}
	re := regexp.MustCompile(`^vcluster \S+ \(go1\.\S+, gvisor [^)]+\)\n$`)
	if !re.MatchString(out) {
		t.Errorf("version printed %q, want it to match %s", out, re)
	}
	if code, _, _ := runCLI(t, "version", "extra"); code != 2 {
		t.Errorf("version with an argument exited %d, want 2", code)
	}
}

func TestRunInvalidConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never")
	code, out, errOut := runCLI(t, "run", "--out", dir, "--set", "fabric.planes=0", "--set", "transport.kind=udp")
	if code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	for _, want := range []string{"fabric.planes: must be 1..16, got 0", `transport.kind: must be one of "mrc", "roce", "mprdma", "random", "orderre", got "udp"`} {
		if !strings.Contains(errOut, want+"\n") {
			t.Errorf("stderr does not have the line %q:\n%s", want, errOut)
		}
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("output dir was created for an invalid config (stat: %v)", err)
	}

	// The same through the error value, for other callers of the root command.
	root := newRootCmd()
	root.SetArgs([]string{"run", "--out", dir, "--set", "fabric.planes=0"})
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "fabric.planes") {
		t.Errorf("Execute() = %v, want an error naming fabric.planes", err)
	}

	// Unknown keys, a missing file and bad flags are usage errors too.
	for _, args := range [][]string{
		{"run", "--set", "fabric.plnaes=8"},
		{"run", "--config", filepath.Join(t.TempDir(), "missing.yaml")},
		{"run", "--no-such-flag"},
		{"run", "--seed", "minus-one"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 2 {
			t.Errorf("%v exited %d, want 2; stderr:\n%s", args, code, errOut)
		}
	}
}

func TestRunWritesManifest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run1")
	cfgPath := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(cfgPath, []byte("fabric:\n  preset: D\nrun:\n  duration: 5ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "run", "--quick", "--out", dir, "--config", cfgPath, "--set", "fabric.mtu=9000", "--seed", "42")
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "vcluster run: clos fabric, 1 plane(s), 16 hosts") || !strings.Contains(out, "zero-load") {
		t.Errorf("stdout = %q", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest.json does not parse: %v\n%s", err, b)
	}
	// run puts the default experiment's cluster settings under the file.
	e, _ := experiments.Lookup(experiments.DefaultName)
	want, err := config.Load(cfgPath, append(clusterSetsUnder(cfgPath, e.Cluster), "fabric.mtu=9000", "seed=42"))
	if err != nil {
		t.Fatal(err)
	}
	want.Output.Dir = dir
	if !reflect.DeepEqual(m.Config, want) {
		t.Errorf("manifest config = %+v\nwant %+v", m.Config, want)
	}
	if m.Seed != 42 || m.Config.Seed != 42 || m.Version == "" || !strings.HasPrefix(m.GoVersion, "go1.") ||
		m.ConfigFile != cfgPath || m.Status == "" {
		t.Errorf("manifest = %+v", m)
	}
	// The resolved config.yaml reproduces the run's config.
	back, err := config.Load(filepath.Join(dir, "config.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("config.yaml reloads as %+v\nwant %+v", back, want)
	}
}

func TestExtraCommands(t *testing.T) {
	saved := extraCommands
	defer func() { extraCommands = saved }()
	var got config.Config
	extraCommands = append(extraCommands, func() *cobra.Command {
		return &cobra.Command{
			Use: "probe",
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := loadConfig(cmd)
				got = c
				return err
			},
		}
	})
	if code, _, errOut := runCLI(t, "probe", "--set", "fabric.planes=8", "--seed", "3"); code != 0 {
		t.Fatalf("probe exited %d: %s", code, errOut)
	}
	if got.Fabric.Planes != 8 || got.Seed != 3 {
		t.Errorf("loadConfig gave planes %d seed %d, want 8 and 3", got.Fabric.Planes, got.Seed)
	}
	if code, _, errOut := runCLI(t, "probe", "--set", "fabric.planes=0"); code != 2 || !strings.Contains(errOut, "fabric.planes") {
		t.Errorf("probe with a bad config exited %d: %s", code, errOut)
	}
}

// Same config and seed → byte-identical outputs (manifest.json carries the
// output path and is left out); a different seed with loss would differ,
// which the fabric's own determinism test covers.
func TestRunDeterministicOutputs(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, dir := range []string{a, b} {
		if code, _, errOut := runCLI(t, "run", "--quick", "--out", dir, "--set", "output.pcap=p0.t1.0/0,h0/p0", "--seed", "7"); code != 0 {
			t.Fatalf("run exited %d: %s", code, errOut)
		}
	}
	sameFiles(t, a, b, "topology.dot", "pings.csv", "counters.csv", "report.md", "results.csv", "results.json", "capture.pcapng")
	x, _ := os.ReadFile(filepath.Join(a, "config.yaml"))
	y, _ := os.ReadFile(filepath.Join(b, "config.yaml"))
	if x, y = bytes.ReplaceAll(x, []byte(a), nil), bytes.ReplaceAll(y, []byte(b), nil); !bytes.Equal(x, y) || len(x) == 0 {
		t.Error("config.yaml differs between two runs with the same seed (or is empty)")
	}
	if code, _, errOut := runCLI(t, "run", "--out", filepath.Join(t.TempDir(), "c"), "--set", "output.pcap=nope/1"); code != 2 || !strings.Contains(errOut, `output.pcap: no port named "nope/1"`) {
		t.Errorf("unknown pcap port: exit %d, %s", code, errOut)
	}
}
