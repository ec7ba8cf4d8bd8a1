package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

func closTopo(t testing.TB, planes, hostsPerT0, t0, t1 int) *fabric.Topology {
	t.Helper()
	loop := sim.NewLoop(sim.Options{Seed: 1})
	pc := &fabric.PortConfig{BufferBytes: 1 << 20, Trim: fabric.TrimConfig{QueueBytes: 1 << 16}, Classes: fabric.DefaultClassMap()}
	topo, err := fabric.BuildClos(loop, fabric.ClosSpec{Planes: planes, HostsPerT0: hostsPerT0, T0: t0, T1: t1, HostRate: 100e9, FabricRate: 100e9,
		HostDelay: time.Microsecond, FabricDelay: time.Microsecond}, fabric.Options{Mode: fabric.ForwardUSID, FabricPort: pc, HostFacingPort: pc, NICPort: pc})
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// A plan with a bad selector, an unknown kind or a negative duration is
// rejected before the run, each problem with its line and reason.
func TestPlanRejectedWithLines(t *testing.T) {
	y := `seed: 3
events:
  - at: 1ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
  - at: 2ms
    kind: meteor_strike
    target: switch:p0.t1.0
  - at: 3ms
    duration: -5ms
    kind: link_down
    target: link:p0.t0.0-p0.t1.0
  - at: 4ms
    kind: loss
    target: wire:p0.t0.0
    params: {rate: 1%}
  - at: 5ms
    kind: loss
    target: link:p0.t0.0-p0.t1.0
    params:
      rate: 2
      colour: red
`
	_, err := ParsePlan("plan.yaml", []byte(y))
	if err == nil {
		t.Fatal("bad plan accepted")
	}
	msg := err.Error()
	t.Logf("\n%s", msg)
	for _, want := range []string{
		`plan.yaml:7: events[1]: kind: unknown fault kind "meteor_strike"`,
		`plan.yaml:10: events[2]: duration: negative duration -5ms`,
		`plan.yaml:15: events[3]: target: bad selector "wire:p0.t0.0": unknown type "wire"`,
		`plan.yaml:21: events[4]: params.rate: 2 is outside 0..1`,
		`plan.yaml:22: events[4]: params.colour: loss takes no parameter "colour"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q", want)
		}
	}
	// Syntactically fine, but names that do not exist in the topology.
	y2 := `events:
  - at: 1ms
    kind: link_down
    target: link:p1.t0.0-p1.t1.9
  - at: 1ms
    kind: switch_down
    target: switch:p7.t1.0
  - at: 1ms
    kind: nic_down
    target: nic:h99/p0
  - at: 1ms
    kind: switch_down
    target: link:p0.t0.0-p0.t1.0
  - at: 1ms
    kind: black_hole
    target: switch:p0.t1.0
    params: {usid: p9.t0.0}
`
	p, err := ParsePlan("plan2.yaml", []byte(y2))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Resolve(closTopo(t, 4, 4, 4, 4), 1)
	if err == nil {
		t.Fatal("unresolvable plan accepted")
	}
	msg = err.Error()
	t.Logf("\n%s", msg)
	for _, want := range []string{
		`plan2.yaml:2: events[0]: target: "link:p1.t0.0-p1.t1.9": no cable between "p1.t0.0" and "p1.t1.9"`,
		`plan2.yaml:5: events[1]: target: "switch:p7.t1.0": no switch "p7.t1.0"`,
		`plan2.yaml:8: events[2]: target: "nic:h99/p0": no host "h99"`,
		`plan2.yaml:11: events[3]: target: switch_down needs switches`,
		`plan2.yaml:14: events[4]: params.usid: "p9.t0.0" is not a switch`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q", want)
		}
	}
}

func TestSelectors(t *testing.T) {
	topo := closTopo(t, 4, 8, 4, 4)
	r := newResolver(topo, sim.NewStream(1, "t"))
	for _, c := range []struct {
		sel                  string
		cables, sws, nicPort int
	}{
		{"link:p1.t0.0-p1.t1.2", 1, 0, 0},
		{"link:p1.t1.2-p1.t0.0", 1, 0, 0},
		{"link:p1.t0.0/10", 1, 0, 0},
		{"link:p1.t0.*-p1.t1.2", 4, 0, 0},
		{"link:h3-p2.t0.0", 1, 0, 0},
		{"port:p1.t0.0/*", 12, 0, 0},
		{"switch:p*.t1.0", 0, 4, 0},
		{"plane:3", 0, 8, 0},
		{"nic:h3/p1", 1, 0, 1},
		{"nic:h3", 4, 0, 4},
		{"osfp:p2.t0.1/0", 8, 0, 0},
		{"osfp:h5", 4, 0, 4},
		{"random:t0-t1,plane=2", 1, 0, 0},
		{"random:nic", 1, 0, 1},
		{"random:switch,tier=1", 0, 1, 0},
	} {
		sel, err := ParseSelector(c.sel)
		if err != nil {
			t.Fatalf("%s: %v", c.sel, err)
		}
		tg, err := r.resolve(sel)
		if err != nil {
			t.Fatalf("%s: %v", c.sel, err)
		}
		if len(tg.Cables) != c.cables || len(tg.Switches) != c.sws || len(tg.NICPorts) != c.nicPort {
			t.Errorf("%s: %d cables, %d switches, %d NIC ports; want %d, %d, %d (%v)", c.sel, len(tg.Cables), len(tg.Switches), len(tg.NICPorts), c.cables, c.sws, c.nicPort, tg.Names())
		}
	}
	// random t0-t1 in plane 2 stays in plane 2, forward T0 → T1.
	sel, _ := ParseSelector("random:t0-t1,plane=2")
	for i := 0; i < 20; i++ {
		tg, _ := r.resolve(sel)
		a, b := tg.Cables[0].A.Owner.(*fabric.Switch), tg.Cables[0].B.Owner.(*fabric.Switch)
		if a.Plane != 2 || a.Tier != 0 || b.Tier != 1 {
			t.Fatalf("random:t0-t1,plane=2 gave %s", tg.Cables[0].Name())
		}
	}
}

// A plan of 10 000 events on a 1024-host fabric (8 planes, 32 hosts per
// T0, 32 T1s) parses, resolves and validates in well under a second.
func TestLargePlanLoadsFast(t *testing.T) {
	topo := closTopo(t, 8, 32, 32, 32)
	y := bigPlan(10000)
	start := time.Now()
	p, err := ParsePlan("big.yaml", y)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Resolve(topo, 1); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("10 000 events, %d KB of YAML, 1024 hosts × 8 planes: parsed and validated in %v", len(y)>>10, el)
	if len(p.Events) != 10000 {
		t.Fatalf("%d events", len(p.Events))
	}
	if el > raceSlowdown*time.Second {
		t.Errorf("took %v, want ≤ %d s", el, raceSlowdown)
	}
}

func bigPlan(n int) []byte {
	var b strings.Builder
	b.WriteString("seed: 9\nevents:\n")
	kinds := []string{
		"kind: link_down\n    target: link:p%d.t0.%d-p%d.t1.%d",
		"kind: loss\n    target: link:p%d.t0.%d-p%d.t1.%d\n    params: {rate: 1%%}",
		"kind: switch_reboot\n    target: switch:p%d.t1.%[4]d\n    params: {boot: 500us}",
		"kind: nic_down\n    target: nic:h%[2]d/p%[1]d",
		"kind: link_flap\n    target: random:t0-t1,plane=%d\n    params: {period: 100us, count: 3}",
	}
	for i := 0; i < n; i++ {
		pl, t0, t1 := i%8, (i/8)%32, (i/256)%32
		k := kinds[i%len(kinds)]
		var body string
		switch i % len(kinds) {
		case 0, 1:
			body = fmt.Sprintf(k, pl, t0, pl, t1)
		case 2:
			body = fmt.Sprintf(k, pl, 0, 0, t1)
		case 3:
			body = fmt.Sprintf(k, pl, t0*32+t1)
		case 4:
			body = fmt.Sprintf(k, pl)
		}
		fmt.Fprintf(&b, "  - at: %dus\n    duration: 500us\n    %s\n", i*10, body)
	}
	return []byte(b.String())
}

func BenchmarkPlanLoad10k(b *testing.B) {
	topo := closTopo(b, 8, 32, 32, 32)
	y := bigPlan(10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := ParsePlan("big.yaml", y)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Resolve(topo, 1); err != nil {
			b.Fatal(err)
		}
	}
}
