package experiments

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/pathquality"
	"github.com/vcluster/vcluster/sim"
)

// pathQualitySmall is a very small path-quality: 1 MiB, two periods (one
// ≫ the job, one ≪ it), one trial, ECMP and MRC at the short period.
var pathQualitySmall = []string{"bytes=1M", "periods=1s,50us", "basePeriods=50us", "trials=1", "onset=50us", "deadline=20ms"}

// Bad parameters are refused before anything runs, each naming its key.
func TestPathQualityParams(t *testing.T) {
	e, err := Lookup("path-quality")
	if err != nil {
		t.Fatal(err)
	}
	err = CheckParams(e, quickEnv(t, e, "periods=1s,0", "sampleRatio=2", "scenarios=healthy,storm", "workloads=", "capacity=1", "elephant=0", "trials=0", "onset=50ms", "deadline=40ms"))
	if err == nil {
		t.Fatal("bad parameters accepted")
	}
	for _, k := range []string{"exp.periods", "exp.sampleRatio", "exp.scenarios", "exp.workloads", "exp.capacity", "exp.elephant", "exp.trials", "exp.onset"} {
		if !strings.Contains(err.Error(), k+":") {
			t.Errorf("error does not name %s: %v", k, err)
		}
	}
	if err := CheckParams(e, quickEnv(t, e, "periods=2us", "sampleRatio=0.1")); err == nil || !strings.Contains(err.Error(), "exp.sampleRatio") {
		t.Errorf("a sample period below 1µs: %v", err)
	}
	if err := CheckParams(e, quickEnv(t, e)); err != nil {
		t.Errorf("quick parameters refused: %v", err)
	}
}

// The small run completes every cell, states its checks with measured
// values, and two runs of the same seed write byte-identical results.csv —
// the second partitioned on two workers (--parallel 2), which must not
// change a byte either (TestParallelResultsIdentical compares 1, 2 and 4).
func TestPathQualityRunsAndIsDeterministic(t *testing.T) {
	e, err := Lookup("path-quality")
	if err != nil {
		t.Fatal(err)
	}
	var ref []byte
	for run := range 2 {
		dir := t.TempDir()
		env := quickEnv(t, e, pathQualitySmall...)
		env.Parallel = 2 * run
		r, err := Execute(context.Background(), e, env, dir, "test", nil, Manifest{})
		if err != nil {
			t.Fatal(err)
		}
		// 2 workloads × 4 scenarios × (ECMP + 2 path-quality periods + MRC).
		if r.Points != 32 || len(r.Failed) != 0 {
			t.Fatalf("points %d, failed %v", r.Points, r.Failed)
		}
		if len(r.Checks) == 0 {
			t.Fatal("no checks")
		}
		for _, c := range r.Checks {
			if c.Testable() && math.IsNaN(c.Value) {
				t.Errorf("check %q not measured: %s", c.Claim, c.Measured)
			}
		}
		got, err := os.ReadFile(filepath.Join(dir, "results.csv"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"representative_degraded-during_" + pathquality.AdvertsFile, "representative_elephant-during_" + pathquality.SamplesFile,
			"advertised_bandwidth_degraded-during.csv", "advertised_bandwidth_elephant-during.csv", "link_utilization_ecmp_degraded-during.csv", "link_utilization_mrc_elephant-during.csv"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("run %d: %v", run, err)
			}
		}
		if ref == nil {
			ref = got
		} else if !bytes.Equal(got, ref) {
			t.Errorf("results.csv differs between a classic and a --parallel 2 run of the same seed:\n%s\nclassic:\n%s", got, ref)
		}
	}
}

// The elephant puts its rate on T1 1 → T0 1 and nowhere else, and T0 1
// sinks every frame of it.
func TestPathQualityElephant(t *testing.T) {
	e, _ := Lookup("path-quality")
	env := quickEnv(t, e)
	c, err := env.NewCluster(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, port, err := pqLinks(c, pqT0, pqT1)
	if err != nil {
		t.Fatal(err)
	}
	const rate = 75e9
	const span = 200 * time.Microsecond
	stop := false
	el := pqStartElephant(c, port, rate, fabric.DSCPRoCE, func() bool { return stop })
	c.RunUntil(sim.Time(span))
	stop = true
	c.RunUntil(sim.Time(span + 20*time.Microsecond)) // drain
	got := float64(port.Counters.TxBytes+uint64(port.Config().IFGBytes)*port.Counters.TxPackets) * 8 / span.Seconds()
	if math.Abs(got-rate)/rate > 0.02 {
		t.Errorf("elephant rate %.2f Gb/s on the wire, want %.0f", got/1e9, rate/1e9)
	}
	var sunk uint64
	for _, s := range c.Topo.Switches {
		for _, p := range s.Ports {
			if s.Tier == 0 && s.Index == pqT0 {
				sunk += p.Counters.Drops[fabric.DropNoRoute]
			}
			if p != port && p.Counters.TxPackets > 0 && s.Tier > 0 {
				t.Errorf("%s sent %d frames: the elephant must load only T1 %d → T0 %d", p.Name, p.Counters.TxPackets, pqT1, pqT0)
			}
		}
	}
	if sunk != el.frames || el.frames == 0 {
		t.Errorf("T0 %d sank %d of the elephant's %d frames", pqT0, sunk, el.frames)
	}
}

// The checks judge what was measured: a path quality that slows as much
// as ECMP, or reacts when it cannot have, fails them.
func TestPathQualityChecksCanFail(t *testing.T) {
	p := pqParams{periods: []time.Duration{time.Second, 100 * time.Microsecond}, base: []time.Duration{100 * time.Microsecond},
		scenarios: pqScenarioNames, workloads: []string{pqRing}, onset: 100 * time.Microsecond, t0s: 4, t1s: 4}
	react := int64(50_000) // the reaction of path-quality cells with a mid-job event
	mk := func(scheme, sc string, d time.Duration, ns int64, moved uint64) *pqCell {
		c := &pqCell{scheme: scheme, scenario: sc, workload: pqRing, period: d, samplePeriod: d / 2, onsetNs: -1}
		r := int64(-1)
		if sc == pqDegradedDuring || sc == pqElephantDuring {
			c.onsetNs = 100_000
			if scheme == pqPQ {
				r = react
			}
		}
		c.trials = []pqMeasure{{timeNs: ns, done: true, ctl: pathquality.Stats{BucketsMoved: moved}, reactNs: r}}
		c.aggregate()
		return c
	}
	cells := func(pqSlow int64, moved uint64) []*pqCell {
		var cs []*pqCell
		for _, sc := range pqScenarioNames {
			ns := int64(1000)
			if sc != pqHealthy {
				ns = 3000
			}
			cs = append(cs, mk(pqECMP, sc, 100*time.Microsecond, ns, 0), mk(pqMRC, sc, 100*time.Microsecond, 1000, 0))
			for _, d := range p.periods {
				v := int64(1000)
				if sc != pqHealthy {
					v = pqSlow
				}
				cs = append(cs, mk(pqPQ, sc, d, v, moved))
			}
		}
		return cs
	}
	verdicts := func(cs []*pqCell) (pass, fail int) {
		for _, c := range pqChecks(p, cs) {
			if c.Pass {
				pass++
			} else {
				fail++
			}
		}
		return pass, fail
	}
	if pass, fail := verdicts(cells(1000, 0)); fail != 1 || pass == 0 {
		// Path quality unhurt everywhere: every gain passes, but "equals
		// ECMP" at period ≫ job must not.
		t.Errorf("path quality unhurt: %d pass, %d fail, want exactly the noise check to fail", pass, fail)
	}
	if _, fail := verdicts(cells(3000, 0)); fail < 4 {
		t.Errorf("path quality as slow as ECMP: %d checks fail, want every gain check (4) to", fail)
	}
	if _, fail := verdicts(cells(3000, 7)); fail < 6 {
		t.Errorf("path quality moving buckets within a job at 1 s: %d checks fail, want the gains and both no-reaction checks", fail)
	}
	// A reaction slower than sample + advertise + 2 control delays + a
	// poll (50 + 100 + 200 + 10 µs here), or none, fails both reaction
	// checks.
	p.controlDelay, p.sample = 100*time.Microsecond, 10*time.Microsecond
	for _, r := range []int64{361_000, -1} {
		react = r
		if pass, fail := verdicts(cells(1000, 0)); fail != 3 {
			t.Errorf("reaction %d ns: %d pass, %d fail, want the noise check and both reaction checks to fail", r, pass, fail)
		}
	}
	react = 359_000
	if _, fail := verdicts(cells(1000, 0)); fail != 1 {
		t.Errorf("reaction within the bound: %d checks fail, want only the noise check", fail)
	}
}
