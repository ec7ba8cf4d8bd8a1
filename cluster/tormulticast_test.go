package cluster

import (
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
)

// TestTorMulticastWiring: fabric.torMulticast reaches every T0 of the
// built fabric when on, and none when off (auto with transport mrc).
func TestTorMulticastWiring(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := config.Default()
		c.Fabric.Forwarding = config.ForwardingECMP
		if on {
			c.Fabric.TorMulticast.Mode = config.TorMulticastOn
			c.Fabric.TorMulticast.Groups = 5
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		o, err := FabricOptions(c)
		if err != nil {
			t.Fatal(err)
		}
		if (o.TorMulticast != nil) != on || on && o.TorMulticast.Groups != 5 {
			t.Fatalf("on %v: options %+v", on, o.TorMulticast)
		}
		topo, err := BuildTopology(sim.NewLoop(sim.Options{Seed: 1}), c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range topo.Switches {
			if _, ok := s.TorMulticastCounters(); ok {
				if s.Tier != 0 {
					t.Fatalf("%s (tier %d) is a programmable ToR", s.Name, s.Tier)
				}
				n++
			}
		}
		if want := map[bool]int{false: 0, true: c.Fabric.Planes * c.Fabric.T0PerPlane}[on]; n != want {
			t.Fatalf("on %v: %d programmable ToRs, want %d", on, n, want)
		}
	}
}
