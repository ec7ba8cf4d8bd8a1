package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// Regression tests of issue 14 (faults/): every bad plan is refused before
// the run with the field and the allowed range, overlapping faults
// compose, and outcomes follow from the traffic delivered.

// wantErrs parses y and checks the error names every want.
func wantErrs(t *testing.T, y string, wants ...string) {
	t.Helper()
	_, err := ParsePlan("plan.yaml", []byte(y))
	if err == nil {
		t.Fatalf("plan accepted:\n%s", y)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func event(kind, target, params string, extra ...string) string {
	e := fmt.Sprintf("events:\n  - at: 1ms\n    kind: %s\n    target: %q\n", kind, target)
	for _, x := range extra {
		e += "    " + x + "\n"
	}
	if params != "" {
		e += "    params: {" + params + "}\n"
	}
	return e
}

// Defect 1: pfc_storm with interval 0s was accepted and never finished.
func TestPFCStormIntervalBounded(t *testing.T) {
	for _, v := range []string{"0s", "0", "-1us", "500ns"} {
		wantErrs(t, event("pfc_storm", "nic:h5/p0", "interval: "+v, "duration: 1ms"), "plan.yaml:6: events[0]: params.interval:", "≥ 1µs")
	}
	for _, v := range []string{"quanta: 0", "quanta: 70000", "class: 8"} {
		wantErrs(t, event("pfc_storm", "nic:h5/p0", v, "duration: 1ms"), "must be in [")
	}
	mustPlan(t, event("pfc_storm", "nic:h5/p0", "interval: 1us", "duration: 1ms"))
}

// Defect 3: a flap of count 2e9 or period 1ns panicked the loop (every
// cycle was scheduled up front).
func TestFlapScheduleBounded(t *testing.T) {
	for _, c := range []struct{ params, dur string }{
		{"period: 100us, count: 2000000000", ""},
		{"period: 1ns", "duration: 1ms"},
		{"period: 100us, down: 100us", ""},
		{"period: 100us, down: 0s", ""},
		{"period: 100us, down: 60us, jitter: 50us", ""},
		{"period: 100us, count: 20", "duration: 1ms"},
		{"period: 2ms", "duration: 1ms"},
		{"period: 1us", "duration: 1s"}, // 10^6 flaps by default
		{"count: 3", ""},
	} {
		var extra []string
		if c.dur != "" {
			extra = append(extra, c.dur)
		}
		y := event("link_flap", "link:p1.t0.0-p1.t1.2", c.params, extra...)
		_, err := ParsePlan("plan.yaml", []byte(y))
		if err == nil {
			t.Errorf("%s %s accepted", c.params, c.dur)
			continue
		}
		if !strings.Contains(err.Error(), "params.") || !strings.ContainsAny(err.Error(), "[≥<") && !strings.Contains(err.Error(), "shorter") &&
			!strings.Contains(err.Error(), "longer") && !strings.Contains(err.Error(), "needs a period") {
			t.Errorf("%s: error %q names no field or range", c.params, err)
		}
		t.Logf("%s %s: %v", c.params, c.dur, err)
	}
	// A long flap is fine and costs O(1) pending events.
	topo := closTopo(t, 2, 2, 2, 2)
	loop := topo.Loop
	plan := mustPlan(t, event("link_flap", "link:p1.t0.0-p1.t1.1", "period: 1us, down: 500ns, count: 100000"))
	rec := NewRecorder(loop, nil)
	in, err := NewInjector(topo, loop, plan, 1, rec)
	if err != nil {
		t.Fatal(err)
	}
	in.Start()
	maxPending := 0
	for step := sim.Time(0); step < sim.Time(110*time.Millisecond); step += sim.Time(100 * time.Microsecond) {
		loop.RunUntil(step)
		maxPending = max(maxPending, loop.Pending())
	}
	downs := 0
	for _, e := range rec.Entries {
		if e.Event == "flap_down" {
			downs++
		}
	}
	if downs != 100000 {
		t.Errorf("%d flaps, want 100000", downs)
	}
	if maxPending > 16 {
		t.Errorf("%d events pending at once for one flap, want O(1)", maxPending)
	}
	if p := topo.Port("p1.t0.0/3"); p == nil || !p.Tx.Up() {
		t.Errorf("cable not up after the flap")
	}
}

// Defect 4: switch_reboot with boot and duration ignored boot.
func TestSwitchRebootBootTakesEffect(t *testing.T) {
	wantErrs(t, event("switch_reboot", "switch:p1.t1.2", "boot: 100us", "duration: 300us"), "params.boot:", "disagree")
	wantErrs(t, event("switch_reboot", "switch:p1.t1.2", ""), "switch_reboot needs the boot time")
	for _, y := range []string{
		event("switch_reboot", "switch:p1.t1.1", "boot: 100us"),
		event("switch_reboot", "switch:p1.t1.1", "boot: 100us", "duration: 100us"),
		event("switch_reboot", "switch:p1.t1.1", "", "duration: 100us"),
	} {
		topo := closTopo(t, 2, 2, 2, 2)
		in, err := NewInjector(topo, topo.Loop, mustPlan(t, y), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		in.Start()
		sw := topo.Switch("p1.t1.1")
		topo.Loop.RunUntil(sim.Time(1050 * time.Microsecond))
		if !sw.Down() {
			t.Errorf("%s: switch up during its boot", y)
		}
		topo.Loop.RunUntil(sim.Time(1101 * time.Microsecond))
		if sw.Down() {
			t.Errorf("%s: switch still down after a 100 µs boot", y)
		}
	}
}

// Defect 5: NaN and ±Inf passed the range checks.
func TestNonFiniteParamsRejected(t *testing.T) {
	for _, v := range []string{"NaN", "nan", ".nan", ".NaN", "Inf", "+Inf", "-Inf", ".inf", "-.inf", "+.Inf", "infinity", "1e999", "NaN%"} {
		for _, c := range []struct{ kind, target, key, extra string }{
			{"loss", "link:p1.t0.0-p1.t1.2", "rate", ""},
			{"loss", "link:p1.t0.0-p1.t1.2", "burst", "rate: 1%, model: gilbert, "},
			{"bit_errors", "link:p1.t0.0-p1.t1.2", "ber", ""},
			{"degrade", "link:p1.t0.0-p1.t1.2", "loss", ""},
			{"black_hole", "switch:p1.t1.2", "fraction", "usid: p1.t0.0, "},
		} {
			if c.key == "burst" && v == "NaN%" {
				continue
			}
			wantErrs(t, event(c.kind, c.target, c.extra+c.key+": "+v), "params."+c.key+":", "not a finite number")
		}
	}
}

func closTopoMode(t testing.TB, mode fabric.ForwardingMode) *fabric.Topology {
	t.Helper()
	loop := sim.NewLoop(sim.Options{Seed: 1})
	pc := &fabric.PortConfig{BufferBytes: 1 << 20, Classes: fabric.DefaultClassMap()}
	topo, err := fabric.BuildClos(loop, fabric.ClosSpec{Planes: 2, HostsPerT0: 2, T0: 2, T1: 2, HostRate: 100e9, FabricRate: 100e9,
		HostDelay: time.Microsecond, FabricDelay: time.Microsecond}, fabric.Options{Mode: mode, FabricPort: pc, HostFacingPort: pc, NICPort: pc})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// Defect 6: black_hole under ECMP was accepted and did nothing.
func TestBlackHoleNeedsUSID(t *testing.T) {
	y := event("black_hole", "switch:p1.t1.1", "usid: p1.t0.0")
	if _, err := mustPlan(t, y).Resolve(closTopoMode(t, fabric.ForwardUSID), 1); err != nil {
		t.Fatalf("uSID: %v", err)
	}
	_, err := mustPlan(t, y).Resolve(closTopoMode(t, fabric.ForwardECMP), 1)
	if err == nil || !strings.Contains(err.Error(), "test.yaml:2: events[0]: kind: black_hole drops one uSID prefix, which exists only under uSID forwarding; this fabric forwards by ecmp") {
		t.Fatalf("black_hole under ECMP: %v", err)
	}
}

// Defect 7: only the first phase's errors were reported; duplicate keys
// were silently overwritten.
func TestPlanReportsEveryError(t *testing.T) {
	y := `events:
  - at: 1ms
    kind: loss
    target: link:p1.t0.0-p1.t1.9
    params: {rate: 2}
  - at: 1ms
    kind: switch_down
    target: switch:p7.t1.0
  - at: 1ms
    at: 2ms
    kind: link_down
    target: link:p0.t0.0-p0.t1.0
  - at: 1ms
    kind: loss
    target: link:p0.t0.0-p0.t1.0
    params:
      rate: 1%
      rate: 2%
events: []
`
	p, err := ParsePlan("plan.yaml", []byte(y))
	if err == nil || p == nil {
		t.Fatalf("bad plan: %v, %v", p, err)
	}
	_, err = p.Resolve(closTopo(t, 4, 4, 4, 4), 1)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	t.Logf("\n%s", msg)
	wants := []string{
		`plan.yaml:2: events[0]: target: "link:p1.t0.0-p1.t1.9": no cable between "p1.t0.0" and "p1.t1.9"`,
		`plan.yaml:5: events[0]: params.rate: 2 is outside 0..1`,
		`plan.yaml:6: events[1]: target: "switch:p7.t1.0": no switch "p7.t1.0"`,
		`plan.yaml:10: events[2]: duplicate key "at" (first at line 9)`,
		`plan.yaml:18: events[3]: params: duplicate key "rate" (first at line 17)`,
		`plan.yaml:19: duplicate key "events" (first at line 1)`,
	}
	last := -1
	for _, w := range wants {
		i := strings.Index(msg, w)
		if i < 0 {
			t.Errorf("missing %q", w)
			continue
		}
		if i < last {
			t.Errorf("%q out of line order", w)
		}
		last = i
	}
	// CheckPlan does the same from a config; Drill refuses before running.
	if err := CheckPlan(mrcC(t), p); err == nil || err.Error() != msg {
		t.Errorf("CheckPlan: %v", err)
	}
	ran := false
	_, err = Drill(mrcC(t), DrillOptions{Plan: p, Baseline: true, Workload: Workload{Bytes: 1 << 20, Dst: 15},
		OnCluster: func(c *cluster.Cluster) { ran = true }})
	if _, ok := err.(Errors); !ok || ran {
		t.Errorf("Drill with a bad plan: ran %v, err %T %v", ran, err, err)
	}
}

// Defect 2: a flap's end brought a cable up that another fault still held
// down (its undo released a hold it did not have). Overlapping faults on
// one element compose: down while any fault holds it.
func TestOverlappingFaultsCompose(t *testing.T) {
	const us = time.Microsecond
	type hold struct{ from, to time.Duration } // [from, to)
	flapHolds := func(at, period, down time.Duration, count int) []hold {
		var h []hold
		for k := 0; k < count; k++ {
			s := at + time.Duration(k)*period
			h = append(h, hold{s, s + down})
		}
		return h
	}
	for _, c := range []struct {
		name  string
		plan  string
		port  string // the cable watched: the one at this port
		holds []hold
	}{
		{"flap+link_down", `events:
  - {at: 100us, duration: 300us, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 100us, down: 50us}}
  - {at: 0s, duration: 1ms, kind: link_down, target: "link:p1.t0.0-p1.t1.1"}
`, "p1.t0.0/3", []hold{{0, 1000 * us}}},
		{"link_down inside a flap", `events:
  - {at: 0s, duration: 600us, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 100us, down: 50us}}
  - {at: 120us, duration: 200us, kind: link_down, target: "link:p1.t0.0-p1.t1.1"}
`, "p1.t0.0/3", append(flapHolds(0, 100*us, 50*us, 6), hold{120 * us, 320 * us})},
		{"flap+switch_down at an end", `events:
  - {at: 0s, duration: 300us, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 100us, down: 50us}}
  - {at: 20us, duration: 700us, kind: switch_down, target: "switch:p1.t1.1"}
`, "p1.t0.0/3", []hold{{0, 720 * us}}},
		{"switch_down ends inside a flap's down", `events:
  - {at: 0s, duration: 1ms, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 200us, down: 100us}}
  - {at: 150us, duration: 270us, kind: switch_down, target: "switch:p1.t0.0"}
`, "p1.t0.0/3", append(flapHolds(0, 200*us, 100*us, 5), hold{150 * us, 420 * us})},
		{"nic_down+link_down", `events:
  - {at: 0s, duration: 500us, kind: nic_down, target: "nic:h0/p1"}
  - {at: 200us, duration: 800us, kind: link_down, target: "link:h0/p1"}
`, "h0/p1", []hold{{0, 1000 * us}}},
		{"link_down+nic_down, inner", `events:
  - {at: 0s, duration: 900us, kind: link_down, target: "link:h0/p1"}
  - {at: 200us, duration: 300us, kind: nic_down, target: "nic:h0"}
`, "h0/p1", []hold{{0, 900 * us}}},
		{"two flaps", `events:
  - {at: 0s, duration: 300us, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 100us, down: 50us}}
  - {at: 10us, duration: 700us, kind: link_flap, target: "link:p1.t0.0-p1.t1.1", params: {period: 70us, down: 20us}}
`, "p1.t0.0/3", append(flapHolds(0, 100*us, 50*us, 3), flapHolds(10*us, 70*us, 20*us, 10)...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			topo := closTopo(t, 2, 2, 2, 2)
			in, err := NewInjector(topo, topo.Loop, mustPlan(t, c.plan), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			in.Start()
			p := topo.Port(c.port)
			bad := 0
			// Sample between the 10 µs boundaries every hold sits on.
			for at := 3 * us; at < 1200*us; at += 5 * us {
				topo.Loop.RunUntil(sim.Time(at))
				want := false
				for _, h := range c.holds {
					if at >= h.from && at < h.to {
						want = true
					}
				}
				for _, l := range []*fabric.Link{p.Tx, p.Peer.Tx} {
					if l.Up() == want && bad < 5 {
						bad++
						t.Errorf("at %v: %s up=%v, want up=%v", at, l.Name, l.Up(), !want)
					}
				}
			}
			if in.Active != 0 {
				t.Errorf("%d faults still active", in.Active)
			}
		})
	}
}

// Defect 8: a fault starting after the workload ended got an outcome from
// the idle fabric; the JSON mixed absolute and relative times.
func TestFaultAfterJobEnd(t *testing.T) {
	plan := mustPlan(t, `events:
  - {at: 2ms, duration: 1ms, kind: link_down, target: "link:p1.t0.0-p1.t1.2"}
`)
	w := Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 1 << 20}
	s, err := Drill(mrcC(t), DrillOptions{Plan: plan, Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.WriteSummary(&out)
	t.Logf("\n%s", out.String())
	f := s.Faults[0]
	if s.JobEndNs <= 0 || s.JobEndNs >= int64(2*time.Millisecond) {
		t.Fatalf("job end %d, want before the fault", s.JobEndNs)
	}
	if f.Outcome != "after_job_end" || s.AfterJobEnd != 1 || !strings.Contains(out.String(), "started after the job ended") ||
		!strings.Contains(out.String(), "after_job_end") {
		t.Errorf("fault after the job: outcome %q, summary says %d", f.Outcome, s.AfterJobEnd)
	}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		JobEnd int64 `json:"job_end_ns"`
		Faults []map[string]any
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	fj := back.Faults[0]
	if fj["start_ns"] != float64(2e6) || fj["end_ns"] != float64(3e6) || fj["outcome"] != "after_job_end" {
		t.Errorf("JSON fault times: start_ns %v end_ns %v (want absolute 2e6, 3e6), outcome %v", fj["start_ns"], fj["end_ns"], fj["outcome"])
	}
	for k := range fj {
		if strings.HasSuffix(k, "_ns") && k != "start_ns" && k != "end_ns" && !strings.HasSuffix(k, "_after_ns") {
			t.Errorf("JSON time %q: neither absolute (start_ns, end_ns) nor named as an offset (*_after_ns)", k)
		}
	}

	// HoldUntilPlanEnd: the workload runs again until the fault is over,
	// so the fault is judged under traffic.
	s, err = Drill(mrcC(t), DrillOptions{Plan: plan, Workload: w, HoldUntilPlanEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	s.WriteSummary(&out)
	t.Logf("\n%s", out.String())
	f = s.Faults[0]
	if s.Rounds < 2 || s.JobEndNs < int64(3*time.Millisecond) || s.Completed != s.Transfers || s.Verified != s.Transfers {
		t.Errorf("held workload: %d rounds, ended %v, %d/%d completed, %d verified", s.Rounds, time.Duration(s.JobEndNs), s.Completed, s.Transfers, s.Verified)
	}
	if f.Outcome != "bypassed" || f.DataIntoFail == 0 {
		t.Errorf("held workload: fault outcome %q, %d data frames into it", f.Outcome, f.DataIntoFail)
	}
	if err := s.Failed(); err != nil {
		t.Errorf("Failed: %v", err)
	}
}

// Defect 9: under ECMP Clustermapper was skipped silently.
func TestMapperNotRunSaysWhy(t *testing.T) {
	cfg := load(t, "fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce")
	s, err := Drill(cfg, DrillOptions{Mapper: true, Workload: Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.WriteSummary(&out)
	t.Logf("\n%s", out.String())
	if !strings.Contains(out.String(), "Clustermapper did not run") || !strings.Contains(out.String(), "forwards by ecmp") {
		t.Errorf("summary does not say Clustermapper did not run and why")
	}
	if !strings.HasPrefix(s.Mapper, "did not run") {
		t.Errorf("Summary.Mapper %q", s.Mapper)
	}
}

// Defect 10: a nic_down of the peer's whole NIC was reported bypassed
// while the job stalled. Bypassed needs bytes delivered after the fault.
func TestWholeNICDownIsNotBypassed(t *testing.T) {
	for _, c := range []struct {
		target string
		ok     bool
	}{{"nic:h15", false}, {"nic:h15/p1", true}} {
		plan := mustPlan(t, fmt.Sprintf("events:\n  - {at: 100us, kind: nic_down, target: %q}\n", c.target))
		s, err := Drill(mrcC(t), DrillOptions{Plan: plan, Deadline: 3 * time.Millisecond, Workload: Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 16 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		s.WriteSummary(&out)
		t.Logf("%s:\n%s", c.target, out.String())
		f := s.Faults[0]
		if c.ok {
			if f.Outcome != "bypassed" || s.Failed() != nil {
				t.Errorf("%s: outcome %q, Failed %v; want bypassed, nil", c.target, f.Outcome, s.Failed())
			}
			continue
		}
		if f.Outcome != "stalled" && f.Outcome != "qp_error" {
			t.Errorf("%s: outcome %q with the job %s, want stalled or qp_error", c.target, f.Outcome, s.TransportOutcome)
		}
		err = s.Failed()
		if err == nil {
			t.Fatalf("%s: Failed() nil for a job that did not complete", c.target)
		}
		if s.QPErrors > 0 && !strings.Contains(err.Error(), "h0↔h15") {
			t.Errorf("%s: %v does not name the peers", c.target, err)
		}
		if s.QPErrors == 0 && !strings.Contains(err.Error(), "job stalled: 1 of 1 transfers incomplete at deadline 3ms") {
			t.Errorf("%s: %v", c.target, err)
		}
	}
}

// Defect 11: the summary did not say whether the drill failed.
func TestSummaryFailed(t *testing.T) {
	ok := &Summary{Transfers: 16, Completed: 16, Verified: 16}
	if err := ok.Failed(); err != nil {
		t.Errorf("clean run: %v", err)
	}
	st := &Summary{Transfers: 16, Completed: 13, Stalled: 3, DeadlineNs: int64(50 * time.Millisecond)}
	if err := st.Failed(); err == nil || err.Error() != "job stalled: 3 of 16 transfers incomplete at deadline 50ms" {
		t.Errorf("stalled: %v", err)
	}
	qe := &Summary{Transfers: 16, Completed: 14, FailedTransfers: 2, QPErrors: 2, QPErrorPeers: []string{"h3↔h7 (retry limit)", "h7↔h3 (retry limit)"}}
	if err := qe.Failed(); err == nil || !strings.Contains(err.Error(), "2 QPs in error: h3↔h7 (retry limit), h7↔h3 (retry limit)") {
		t.Errorf("QP errors: %v", err)
	}
	bad := &Summary{Transfers: 1, Completed: 1, VerifyFailures: 1}
	if bad.Failed() == nil {
		t.Errorf("corrupted bytes: Failed() nil")
	}
}
