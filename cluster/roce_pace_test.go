package cluster

import "testing"

// One RoCE QP, no loss, no congestion control, on a 1.6T uSID fabric:
// its frames fill the host link (the QP paced at its exact rate; rounding
// every pacing deadline up to the ns left 3.7% of the link idle).
func TestRoCEOneQPFillsTheLink(t *testing.T) {
	r, err := RunP2P(load(t, "fabric.preset=C", "fabric.hostLinkSpeed=1.6T", "fabric.fabricLinkSpeed=1.6T", "transport.kind=roce",
		"host.netstack=false", "transport.roce.cc=none", "transport.payload=elided"), 0, 15, 512<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(load(t, "fabric.preset=C", "fabric.hostLinkSpeed=1.6T", "fabric.fabricLinkSpeed=1.6T", "transport.kind=roce", "host.netstack=false"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := c.RoCEConfig(0)
	c.Close()
	// Payload share of a full frame: PMTU over PMTU + BTH + ICRC + framing.
	share := float64(rc.PMTU) / float64(rc.PMTU+12+4+rc.WireOverhead)
	frac := r.GoodputBps / r.LineRateBps / share
	t.Logf("goodput %s = %.2f%% of the payload capacity of 1.6T (wire overhead %d B)", gbps(r.GoodputBps), 100*frac, rc.WireOverhead)
	if frac < 0.99 {
		t.Errorf("one QP fills %.2f%% of the link's payload capacity", 100*frac)
	}
}
