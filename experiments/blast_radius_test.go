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
