package cluster

import (
	"fmt"
	"testing"

	"github.com/vcluster/vcluster/config"
)

// On 2 planes × 4 spines the fabric offers 8 paths (a plane and a spine
// each); a QP's data must cross all 8 (plane, spine) pairs.
func TestMPRDMAEveryPlaneAndSpine(t *testing.T) {
	c := mprdmaLeafSpine(t, config.TransportMPRDMA, config.ForwardingECMP, "fabric.planes=2")
	mprdmaRun(t, c, 8<<20, 0, nil)
	hpt := c.Config.Fabric.HostsPerT0
	var used []string
	for p := range 2 {
		t0 := c.Topo.Switch(fmt.Sprintf("p%d.t0.0", p))
		for s := range 4 {
			if n := t0.Ports[hpt+s].Counters.TxPackets; n > 0 {
				used = append(used, fmt.Sprintf("p%d/t1.%d:%d", p, s, n))
			}
		}
	}
	t.Logf("(plane, spine) pairs carrying data: %v", used)
	if len(used) != 8 {
		t.Errorf("%d of the 8 (plane, spine) pairs carried data: %v", len(used), used)
	}
}
