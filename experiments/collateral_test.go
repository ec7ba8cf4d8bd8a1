package experiments

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
)

// The incast senders and the victim's source come round-robin from the
// racks other than host 0's, so a 7:1 incast on cluster D uses every
// other rack and the victim shares its rack's uplinks with incast senders.
func TestCollateralSources(t *testing.T) {
	s, v, err := coSources(4, 16, 7)
	if err != nil || !slices.Equal(s, []int{4, 8, 12, 5, 9, 13, 6}) || v != 10 {
		t.Errorf("coSources(4, 16, 7) = %v, %d, %v", s, v, err)
	}
	if _, _, err := coSources(4, 16, 12); err == nil {
		t.Error("12 senders + a victim source fit in 12 hosts of other racks")
	}
}

func TestRateWindows(t *testing.T) {
	g := []float64{10, 20, 30, 40} // (0,1µs], (1,2], (2,3], (3,4]
	if m := meanRate(g, time.Microsecond, 1000, 3000); m != 25 {
		t.Errorf("meanRate over [1, 3] µs = %v, want 25", m)
	}
	if m := minRate(g, time.Microsecond, 1000, 4000); m != 20 {
		t.Errorf("minRate over [1, 4] µs = %v, want 20", m)
	}
	if m := meanRate(g, time.Microsecond, 1500, 2500); !math.IsNaN(m) {
		t.Errorf("meanRate with no whole sample = %v, want NaN", m)
	}
	b := binned("x", []float64{1, 3, 5, 7, 9}, 0, 1, 2)
	if !slices.Equal(b.X, []float64{3, 5}) || !slices.Equal(b.Y, []float64{3, 8}) {
		t.Errorf("binned = %v %v", b.X, b.Y)
	}
}

// The victim's QP that coProbe picks crosses, in the cell's own cluster,
// the T1 whose downlink carries the most incast QPs, at every ECMP seed:
// the victim shares the incast's queue by construction. (A probe of the
// real cluster, built as the run builds it, is traced here.)
func TestCollateralVictimPinned(t *testing.T) {
	senders, vsrc, err := coSources(4, 16, 7)
	if err != nil {
		t.Fatal(err)
	}
	base, err := config.Load("", []string{"fabric.preset=D", "transport.kind=roce", "fabric.forwarding=ecmp",
		"fabric.queue.pfc.enabled=true", "transport.payload=elided"})
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for seed := uint64(1); seed <= 6; seed++ {
		cfg := base
		cfg.Seed, cfg.Fabric.ECMPSeed = seed, seed
		pl, err := coProbe(cfg, senders, vsrc, 0, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		sum, most := 0, 0
		for _, l := range pl.load {
			sum, most = sum+l, max(most, l)
		}
		if sum != 7 || pl.load[pl.target] != most || len(pl.victimT1) != 1 || pl.victimT1[0] != pl.target {
			t.Fatalf("seed %d: placement %+v: want the victim on the most loaded of 7 incast QPs' T1s", seed, pl)
		}
		skipped += pl.skip
		// The run's cluster: skip idle connections, then the victim's.
		c, err := cluster.NewForWorkers(cfg, 0)
		if err != nil {
			t.Fatal(err)
		}
		crossed := -1
		for _, s := range c.Topo.Switches {
			if s.Tier == 1 {
				s.Trace = func(sw *fabric.Switch, p *fabric.Packet, _ *fabric.Port) {
					if _, subnet, _, ok := fabric.ParseHostAddr(p.Dst()); ok && subnet == 0 {
						crossed = sw.Index
					}
				}
			}
		}
		var ps []cluster.Pair
		for k := 0; k <= pl.skip; k++ {
			if ps, err = c.Connect(vsrc, 1); err != nil {
				t.Fatal(err)
			}
		}
		trs, err := startOn(c, ps, vsrc, 1, 64)
		if err != nil {
			t.Fatal(err)
		}
		c.RunWhile(func() bool { return !trs[0].Done() })
		c.Close()
		if crossed != pl.target {
			t.Errorf("seed %d: the victim's QP crossed T1 %d in the run's cluster, probe said %d", seed, crossed, pl.target)
		}
	}
	if skipped == 0 {
		t.Error("no seed needed an idle QP: the test does not exercise the pinning")
	}
}

func TestMinWindow(t *testing.T) {
	g := []float64{10, 20, 30, 40, 50, 60} // 1 µs samples
	if m := minWindow(g, time.Microsecond, 2*time.Microsecond, 1000, 6000); m != 25 {
		t.Errorf("minWindow of 2 µs over [1, 6] µs = %v, want 25 (windows [1,3] and [3,5] average 20, 30 and 40, 50)", m)
	}
	if m := minWindow(g, time.Microsecond, 10*time.Microsecond, 0, 6000); !math.IsNaN(m) {
		t.Errorf("minWindow with no whole window = %v, want NaN", m)
	}
}
