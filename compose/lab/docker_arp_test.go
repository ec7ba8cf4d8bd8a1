package lab

import (
	"testing"

	"github.com/vcluster/vcluster/compose/labspec"
)

// A docker lab's ARP need counts every container: hosts, fabrics (one
// per plane with FabricPerPlane) and the monitoring pair, each knowing
// every other and the gateway.
func TestLabContainersARPNeed(t *testing.T) {
	lab, err := labspec.Resolve("", []string{"fabric.preset=C", "fabric.hosts=64"}, labspec.DefaultPlaneBps)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    UpOptions
		want int
	}{
		{UpOptions{}, 65},
		{UpOptions{FabricPerPlane: true}, 68},
		{UpOptions{FabricPerPlane: true, Monitoring: true}, 70},
	} {
		if got := labContainers(c.o, lab); got != c.want {
			t.Errorf("%+v: %d containers, want %d", c.o, got, c.want)
		}
	}
	// 65 containers: 66² = 4356 entries, past the kernel's default
	// gc_thresh3 of 1024 (a 64-host lab failed there before lab up raised it).
	if n := arpNeed(65); n != 4356 || n <= 1024 {
		t.Errorf("arpNeed(65) = %d", n)
	}
}
