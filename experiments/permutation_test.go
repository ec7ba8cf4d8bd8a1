package experiments

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vcluster/vcluster/config"
)

// Max-min fair rates by progressive filling, on cases worked by hand.
func TestMaxMin(t *testing.T) {
	for _, c := range []struct {
		name  string
		flows [][]int
		want  []float64
	}{
		{"alone", [][]int{{0, 1}}, []float64{1}},
		{"two share a link", [][]int{{0, 9}, {1, 9}}, []float64{0.5, 0.5}},
		// Three on link 9; the third also meets a fourth on link 8, which
		// then gets what the third leaves.
		{"three on one link, one more elsewhere", [][]int{{0, 9}, {1, 9}, {2, 9, 8}, {3, 8}}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 2.0 / 3}},
	} {
		got := maxMin(c.flows)
		for i := range got {
			if math.Abs(got[i]-c.want[i]) > 1e-12 {
				t.Errorf("%s: rates %v, want %v", c.name, got, c.want)
				break
			}
		}
	}
}

// The fluid model of ECMP on cluster D (16 hosts, 4 T0 × 4, 4 T1) over
// random derangements: an independent Monte-Carlo estimate (Python,
// 200 derangements, one draw each) gave 69.7%; a fabric of one T0 has no
// collisions.
func TestPermFluid(t *testing.T) {
	e, _ := Lookup("permutation")
	cfg, err := config.Load("", e.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var perms [][]int
	for range 100 {
		perms = append(perms, derangement(r, cfg.Fabric.Hosts))
	}
	m, ok := permFluid(cfg, perms, 4, 1)
	if !ok || m < 0.66 || m > 0.73 {
		t.Errorf("cluster D fluid mean %.3f (ok %v), want ≈ 0.70", m, ok)
	}
	one := cfg
	one.Fabric.HostsPerT0, one.Fabric.T0PerPlane = 16, 1
	if m, ok := permFluid(one, perms, 1, 1); !ok || m != 1 {
		t.Errorf("one T0: fluid mean %.3f (ok %v), want 1", m, ok)
	}
	two := cfg
	two.Fabric.Planes = 2
	if _, ok := permFluid(two, perms, 1, 1); ok {
		t.Error("two planes: the model applied")
	}
}
