package faults

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

func TestGeneratorDeterministicAndValid(t *testing.T) {
	topo := closTopo(t, 4, 4, 4, 4)
	spec := MTBFSpec{Horizon: 100 * time.Millisecond, FabricLinks: Reliability{MTBF: 200 * time.Millisecond, MTTR: 2 * time.Millisecond},
		Switches: Reliability{MTBF: time.Second, MTTR: 5 * time.Millisecond}, NICPorts: Reliability{MTBF: time.Second, MTTR: time.Millisecond},
		SwitchBoot: 3 * time.Millisecond, GrayFraction: 0.25, GrayLoss: 0.01}
	a, err := Generate(topo, 7, spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate(topo, 7, spec)
	if a.MarshalYAML() != b.MarshalYAML() || len(a.Events) == 0 {
		t.Fatalf("not deterministic or empty (%d events)", len(a.Events))
	}
	// The generated plan round-trips through YAML and validates.
	p, err := ParsePlan("gen.yaml", []byte(a.MarshalYAML()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Resolve(topo, 7); err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]int{}
	for _, ev := range a.Events {
		kinds[ev.Kind]++
	}
	t.Logf("%d events over %v: %v", len(a.Events), spec.Horizon, kinds)
	for _, name := range ScenarioNames() {
		p, err := Scenario(name, 300*time.Microsecond, time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := p.Resolve(topo, 1); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A named scenario under the drill: a T1 reboots mid-job; MRC completes.
func TestScenarioT1Reboot(t *testing.T) {
	p, err := Scenario("t1-reboot", 50*time.Microsecond, 100*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Drill(mrcC(t), DrillOptions{Plan: p, Workload: Workload{Pattern: "shift", Bytes: 8 << 20}, Mapper: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != s.Transfers || s.Verified != s.Transfers || s.QPErrors != 0 {
		t.Fatalf("%d/%d completed, %d verified, %d QP errors", s.Completed, s.Transfers, s.Verified, s.QPErrors)
	}
	t.Logf("t1-reboot: %d transfers verified, fault outcome %s, bypass %s", s.Verified, s.Faults[0].Outcome, fmtNs(s.Faults[0].BypassNs))
}

// The cost of an idle plan: a transfer with an injector whose only fault
// lies beyond the run, against none. Faults change fabric fields only when
// they start; nothing is added to the per-packet path.
func BenchmarkTransferIdleInjector(b *testing.B) {
	for _, withPlan := range []bool{false, true} {
		name := "none"
		if withPlan {
			name = "idle-plan"
		}
		b.Run(name, func(b *testing.B) {
			var p *Plan
			if withPlan {
				p = mustPlan(b, "events:\n  - {at: 1s, kind: link_down, target: link:p1.t0.0-p1.t1.2}\n")
			}
			cfg := mrcC(b, "transport.payload=elided")
			var events uint64
			for i := 0; i < b.N; i++ {
				s, err := Drill(cfg, DrillOptions{Plan: p, Workload: Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 16 << 20}, Deadline: 10 * time.Millisecond})
				if err != nil || s.Completed != 1 {
					b.Fatal(err)
				}
				events += uint64(sim.Time(s.JobNs))
			}
			_ = events
		})
	}
}
