package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
)

// Every experiment checks its parameters up front (Typed.Read): its
// defaults pass at every size, and a nonsense value of any parameter is
// refused naming exp.<key> and the allowed values.
func TestCheckParamsEveryExperiment(t *testing.T) {
	for _, n := range Names() {
		e, _ := Lookup(n)
		cfg, err := config.Load("", e.Cluster)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Size{Quick, Default, Full} {
			p, _ := ResolveParams(e, s, nil)
			if err := CheckParams(e, &Env{Config: cfg, Size: s, Params: p}); err != nil {
				t.Errorf("%s at %s: defaults refused: %v", n, s, err)
			}
		}
		for _, q := range e.Params {
			for _, bad := range []string{"bogus", "", "NaN", "-1"} {
				p, _ := ResolveParams(e, Default, []string{q.Key + "=" + bad})
				err := CheckParams(e, &Env{Config: cfg, Size: Default, Params: p})
				if err == nil {
					t.Errorf("%s: exp.%s=%q accepted", n, q.Key, bad)
					continue
				}
				if !strings.Contains(err.Error(), "exp."+q.Key+": ") || !strings.Contains(err.Error(), "must be") {
					t.Errorf("%s: exp.%s=%q: error %q does not name the parameter and its range", n, q.Key, bad, err)
				}
			}
		}
	}
}

// Execute checks the parameters before it creates anything.
func TestExecuteChecksParamsFirst(t *testing.T) {
	e, _ := Lookup(DefaultName)
	env := quickEnv(t, e, "losses=2")
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{Tool: "vcluster"}); err == nil || !strings.Contains(err.Error(), "exp.losses") {
		t.Fatalf("Execute = %v, want the exp.losses error", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the report directory was created (stat: %v)", err)
	}
}

func readStatus(t *testing.T, dir string) string {
	t.Helper()
	m, err := DecodeManifestFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m.Status
}

// DecodeManifestFile reads a manifest without the completeness checks.
func DecodeManifestFile(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, err
	}
	m, err := DecodeManifest(path, b)
	var fe *config.FieldError
	if errors.As(err, &fe) {
		err = nil // incomplete manifests are what some tests look at
	}
	return m, err
}

// A run with failed points writes its whole report, says so in the
// manifest and returns a *FailedError listing them.
func TestExecuteFailedPoints(t *testing.T) {
	e, _ := Lookup(DefaultName)
	env := quickEnv(t, e, "size=64K", "losses=0.3", "roceQPs=1", "payload=real")
	cfg, err := config.Load("", append(e.Cluster, "fabric.hosts=4", "fabric.hostsPerT0=2"))
	if err != nil {
		t.Fatal(err)
	}
	env.Config = cfg
	dir := t.TempDir()
	r, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{Tool: "vcluster"})
	var fe *FailedError
	if !errors.As(err, &fe) || r == nil {
		t.Fatalf("Execute = %v, %v; want a *FailedError and the results", r, err)
	}
	if fe.Points != 2 || len(fe.Failed) == 0 || !strings.Contains(strings.Join(fe.Failed, ";"), "RoCE, 1 QP, 64K, loss 30%") {
		t.Errorf("FailedError %+v: want the RoCE row of 2", fe)
	}
	if s := readStatus(t, dir); !strings.HasPrefix(s, "failed: ") {
		t.Errorf("manifest status %q, want failed: …", s)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.csv")); err != nil {
		t.Errorf("no results.csv: %v", err)
	}
}

// failingExp is allreduce-loss with a run that fails.
func failingExp() *Experiment {
	e, _ := Lookup("allreduce-loss")
	s := *e
	s.Args = Typed[grid]{Read: transportGrid, Run: func(context.Context, *Env, grid) (*Results, error) {
		return nil, fmt.Errorf("the fabric caught fire")
	}}
	return &s
}

// A run that fails leaves a manifest that says so, never "started".
func TestExecuteRunErrorStatus(t *testing.T) {
	e := failingExp()
	env := quickEnv(t, e)
	dir := t.TempDir()
	if _, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{Tool: "vcluster", Status: "started"}); err == nil {
		t.Fatal("no error")
	}
	if s := readStatus(t, dir); !strings.HasPrefix(s, "failed: ") || !strings.Contains(s, "caught fire") {
		t.Errorf("manifest status %q, want failed: with the reason", s)
	}
}

// An interrupted run (sim.Interrupt) returns ErrInterrupted and writes
// status "interrupted", never failed rows.
func TestExecuteInterrupted(t *testing.T) {
	e, _ := Lookup(DefaultName)
	env := quickEnv(t, e, "size=1M", "losses=0", "roceQPs=1")
	dir := t.TempDir()
	sim.Interrupt()
	defer sim.ResetInterrupt()
	_, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{Tool: "vcluster"})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Execute = %v, want ErrInterrupted", err)
	}
	var fe *FailedError
	if errors.As(err, &fe) {
		t.Errorf("an interrupted run reports failed points: %v", fe)
	}
	if s := readStatus(t, dir); s != StatusInterrupted {
		t.Errorf("manifest status %q, want %q", s, StatusInterrupted)
	}
}

// A list value given twice would be two points with one label (merged in
// counters.csv and the metrics): refused, naming the value.
func TestRepeatedListValuesRefused(t *testing.T) {
	e, _ := Lookup("allreduce-loss")
	cfg, err := config.Load("", e.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []string{"losses=0,0.01,0", "losses=0.01,0.010", "roceQPs=1,8,1"} {
		p, _ := ResolveParams(e, Quick, []string{set})
		if err := CheckParams(e, &Env{Config: cfg, Size: Quick, Params: p}); err == nil || !strings.Contains(err.Error(), "is listed twice") {
			t.Errorf("exp.%s: %v, want \"is listed twice\"", set, err)
		}
	}
}

// Every experiment runs on the paper's timing (issue #17: calibrated from
// T1 once, used unchanged everywhere): its cluster settings start with
// config.PaperTimingSets.
func TestEveryExperimentOnPaperTiming(t *testing.T) {
	want := config.PaperTimingSets()
	for _, n := range Names() {
		e, _ := Lookup(n)
		if got := e.Cluster; len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
			t.Errorf("%s: cluster settings %v do not start with the paper's timing %v", n, got, want)
		}
	}
}
