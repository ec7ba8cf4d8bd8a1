package experiments

import (
	"math"
	"testing"

	"github.com/vcluster/vcluster/faults"
)

// The capacity a fault removes, as blast-radius computes it.
func TestBlastRadiusIdeal(t *testing.T) {
	p2p := faults.Workload{Pattern: "p2p", Src: 0, Dst: 63}
	shift := faults.Workload{Pattern: "shift"}
	osfp := map[int]int{}
	for h := 0; h < 8; h++ {
		osfp[h] = 1
	}
	for _, c := range []struct {
		name    string
		r       brRun
		w       faults.Workload
		planes  int
		want    float64
		touches string
	}{
		{"T0–T1 cable, 8 planes × 32 T1s", brRun{fabric: 1, planes: map[int]bool{0: true}}, shift, 8, 1.0 / 256, "1 fabric cable in 1 plane, no node"},
		{"T0–T1 cable, 1 plane × 32 T1s", brRun{fabric: 1, planes: map[int]bool{0: true}}, shift, 1, 1.0 / 32, "1 fabric cable in 1 plane, no node"},
		{"NIC port, 8 planes", brRun{touched: map[int]int{0: 1}, planes: map[int]bool{0: true}}, p2p, 8, 0.125, "1 node × 1 port, 1 plane"},
		{"NIC port, 4 planes", brRun{touched: map[int]int{0: 1}, planes: map[int]bool{0: true}}, p2p, 4, 0.25, "1 node × 1 port, 1 plane"},
		{"NIC-side OSFP", brRun{touched: map[int]int{0: 8}, planes: map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true}}, p2p, 8, 1, "1 node × 8 ports, 8 planes"},
		// Hosts 0–7 lose a port: their 8 flows out and the 8 flows into
		// them (from hosts 32–39) keep 7/8; 16 of 64 flows lose 1/8.
		{"T0-side OSFP under shift", brRun{touched: osfp, planes: map[int]bool{0: true}}, shift, 8, 16.0 / 64 / 8, "8 nodes × 1 port, 1 plane"},
	} {
		if got := brIdeal(&c.r, c.w, 64, c.planes, 32); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: ideal %.5f, want %.5f", c.name, got, c.want)
		}
		if got := touches(&c.r); got != c.touches {
			t.Errorf("%s: touches %q, want %q", c.name, got, c.touches)
		}
	}
}

func TestBlastRadiusTopologies(t *testing.T) {
	ts, err := parseTopos("8x100G, 1x800G")
	if err != nil || len(ts) != 2 || ts[0].planes != 8 || ts[0].speed != "100G" || ts[1].planes != 1 || ts[1].speed != "800G" {
		t.Fatalf("parseTopos = %+v, %v", ts, err)
	}
	for _, bad := range []string{"8", "x100G", "0x100G", "8x"} {
		if _, err := parseTopos(bad); err == nil {
			t.Errorf("parseTopos(%q): no error", bad)
		}
	}
}

// The checks' bands, on synthetic cells: a link's share ±50%, a port's
// half-way to one plane more or fewer, an OSFP's touch counts.
func TestBlastRadiusChecks(t *testing.T) {
	osfp := map[int]int{}
	for h := 0; h < 8; h++ {
		osfp[h] = 1
	}
	all := map[int]bool{}
	for p := 0; p < 8; p++ {
		all[p] = true
	}
	sum := &faults.Summary{}
	base := &brRun{job: 1000e9}
	cell := func(topo string, planes int, fault string, lost, ideal float64, r *brRun) *brCell {
		r.s = sum
		return &brCell{topo: brTopo{name: topo, planes: planes}, fault: brFault{name: fault}, run: r, base: base, lost: lost, ideal: ideal, lineBps: 1e12}
	}
	cells := []*brCell{
		cell("8x100G", 8, "T0–T1 link", 0.0030, 1.0/256, &brRun{fabric: 1, planes: map[int]bool{0: true}}), // 0.30%: in 0.195–0.586
		cell("1x800G", 1, "T0–T1 link", 0.0500, 1.0/32, &brRun{fabric: 1, planes: map[int]bool{0: true}}),  // 5.0%: above 4.69
		cell("8x100G", 8, "NIC port", 0.1251, 0.125, &brRun{touched: map[int]int{0: 1}, planes: map[int]bool{0: true}}),
		cell("4x100G", 4, "NIC port", 0.2100, 0.25, &brRun{touched: map[int]int{0: 1}, planes: map[int]bool{0: true}}), // below 22.5
		cell("8x100G", 8, "T0-side OSFP", 0.1251, 0.125, &brRun{touched: osfp, planes: map[int]bool{0: true}}),
		cell("8x100G", 8, "NIC-side OSFP", 1, 1, &brRun{touched: map[int]int{0: 8}, planes: all}),
	}
	want := []struct {
		value float64
		pass  bool
	}{{0.30, true}, {5.0, false}, {12.51, true}, {21.0, false}, {1, true}, {12.51, true}, {1, true}, {100, true}}
	cs := brChecks(cells, 32)
	if len(cs) != len(want) {
		t.Fatalf("%d checks, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if math.Abs(c.Value-want[i].value) > 1e-9 || c.Pass != want[i].pass || c.Band == nil || c.Band.Why == "" {
			t.Errorf("%q: value %v pass %v (band %s), want %v %v", c.Claim, c.Value, c.Pass, c.Band, want[i].value, want[i].pass)
		}
	}
	if b := cs[2].Band; math.Abs(*b.Min-(12.5+100.0/9)/2) > 1e-9 || math.Abs(*b.Max-(12.5+100.0/7)/2) > 1e-9 {
		t.Errorf("8-plane port band %s, want half-way to 1/9 and 1/7", b)
	}
	// An OSFP that resolved to 7 nodes does not hold.
	delete(osfp, 7)
	if c := brChecks(cells, 32)[4]; c.Pass {
		t.Errorf("%q holds with 7 nodes touched", c.Claim)
	}
}
