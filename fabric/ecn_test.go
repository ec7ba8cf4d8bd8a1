package fabric

import (
	"math"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// The default port marks as the DCQCN paper's RED: never at Kmin (5 KB),
// Pmax/2 halfway, Pmax (1 %) at Kmax (200 KB), always above it.
func TestDefaultECNMarkingProbability(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 3})
	pt := NewPort(loop, NewPool(9216), "p", DefaultPortConfig())
	const draws = 400_000
	for _, c := range []struct {
		q int
		p float64
	}{{5_000, 0}, {102_500, 0.005}, {200_000, 0.01}, {200_001, 1}} {
		n := 0
		for range draws {
			if pt.redMark(c.q) {
				n++
			}
		}
		got := float64(n) / draws
		sigma := math.Sqrt(c.p * (1 - c.p) / draws)
		if math.Abs(got-c.p) > 5*sigma+1e-9 {
			t.Errorf("queue %d B: marked %.4f, want %.4f ± %.4f", c.q, got, c.p, 5*sigma)
		}
	}
}

// SetECNByRate scales each switch port by its own link rate: a Clos of
// 100G host links and 400G fabric links gets two sets of thresholds, and
// ports that do not mark (host-facing, NICs) keep theirs.
func TestSetECNByRate(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := BuildClos(loop, ClosSpec{Planes: 1, HostsPerT0: 2, T0: 2, T1: 2,
		HostRate: 100e9, FabricRate: 400e9, HostDelay: time.Microsecond, FabricDelay: time.Microsecond}, DefaultOptions(ForwardECMP))
	if err != nil {
		t.Fatal(err)
	}
	hpcc := func(r uint64) ECNConfig { return ECNConfig{Kmin: int(r / 250_000), Kmax: int(r / 62_500), Pmax: 0.2} }
	topo.SetECNByRate(hpcc)
	for _, s := range topo.Switches {
		for _, p := range s.Ports {
			e := p.Config().ECN
			switch {
			case p.HostFacing:
				if e.Enabled {
					t.Fatalf("%s: host-facing port marks", p.Name)
				}
			case e != ECNConfig{Enabled: true, Kmin: 1_600_000, Kmax: 6_400_000, Pmax: 0.2}:
				t.Fatalf("%s at 400G: %+v", p.Name, e)
			}
		}
	}
	if e := topo.HostPorts[0][0].Config().ECN; e.Enabled {
		t.Fatal("NIC port marks")
	}
	got := topo.ECNByRate()
	want := []PortECN{
		{RateBps: 400e9, ECN: ECNConfig{Enabled: true, Kmin: 1_600_000, Kmax: 6_400_000, Pmax: 0.2}, Ports: 8},
		{HostFacing: true, RateBps: 100e9, Ports: 4},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ECNByRate = %+v, want %+v", got, want)
	}
	// With marking at the last hop too, the 100G host-facing ports get
	// their own, smaller thresholds.
	o := DefaultOptions(ForwardECMP)
	o.HostFacingPort.ECN.Enabled = true
	topo, _ = BuildClos(sim.NewLoop(sim.Options{Seed: 1}), ClosSpec{Planes: 1, HostsPerT0: 2, T0: 2, T1: 2,
		HostRate: 100e9, FabricRate: 400e9, HostDelay: time.Microsecond, FabricDelay: time.Microsecond}, o)
	topo.SetECNByRate(hpcc)
	if e := topo.Switch("p0.t0.0").Ports[0].Config().ECN; e != (ECNConfig{Enabled: true, Kmin: 400_000, Kmax: 1_600_000, Pmax: 0.2}) {
		t.Fatalf("host-facing 100G port: %+v", e)
	}
}
