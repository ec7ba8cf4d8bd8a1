package faults

import (
	"bytes"
	"testing"
	"time"
)

// T7: one link on an active MRC path is cut mid-transfer: the transfer
// completes byte for byte, no QP fails, and traffic leaves the link within
// 50 µs of virtual time.
func TestT7MRCLinkCut(t *testing.T) {
	plan := mustPlan(t, `
events:
  - at: 300us
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
`)
	var log bytes.Buffer
	s, err := Drill(mrcC(t), DrillOptions{Plan: plan, Workload: Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 64 << 20}, Log: &log, Baseline: true})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.WriteSummary(&out)
	t.Logf("\n%s", out.String())
	f := s.Faults[0]
	if s.Completed != 1 || s.Verified != 1 || s.QPErrors != 0 || s.TransportOutcome != "completed" {
		t.Fatalf("transfer not completed cleanly: %+v", s)
	}
	if f.Outcome != "bypassed" || f.BypassNs < 0 || time.Duration(f.BypassNs) > 50*time.Microsecond {
		t.Errorf("bypass %v (%s), want ≤ 50 µs", time.Duration(f.BypassNs), f.Outcome)
	}
	if f.DataIntoFail == 0 {
		t.Errorf("no data went into the cut link: it was not on an active path")
	}
}

// T7 with RoCE under ECMP: the busiest T0–T1 link (the flow's path) is cut;
// ECMP has no reconvergence, so the QP stalls and then errors; the summary
// says which.
func TestT7RoCELinkCut(t *testing.T) {
	plan := mustPlan(t, `
events:
  - at: 300us
    kind: link_down
    target: busiest:t0-t1
`)
	cfg := load(t, "fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce")
	s, err := Drill(cfg, DrillOptions{Plan: plan, Workload: Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 16 << 20}, Deadline: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.WriteSummary(&out)
	t.Logf("\n%s", out.String())
	if s.TransportOutcome != "qp_error" && s.TransportOutcome != "stalled" {
		t.Fatalf("RoCE outcome %q, want qp_error or stalled", s.TransportOutcome)
	}
	if s.Faults[0].Outcome != "not_bypassed" && s.Faults[0].Outcome != "bypassed" {
		t.Logf("fault outcome %s", s.Faults[0].Outcome)
	}
}
