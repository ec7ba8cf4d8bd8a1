package pathquality

import (
	"math"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// TestFatTreePathBandwidth: in a k=4 fat-tree, pod 1's agg.1.0 reaches
// cores 0 and 1 over links degraded to 25 Gb/s. That reaches an edge
// switch of pod 0 as path bandwidth: agg.0.0 (above cores 0 and 1) sums
// 25 + 25, agg.0.1 keeps 200, and edge.0.0 weights its uplinks
// min(100, 50) : min(100, 200). (One degraded core link alone would leave
// agg.0.0 at 125, and the edge's 100 Gb/s uplinks the bottleneck of
// both: equal weights, rightly.)
func TestFatTreePathBandwidth(t *testing.T) {
	loop := sim.NewLoop(sim.Options{})
	topo, err := fabric.BuildFatTree(loop, fabric.FatTreeSpec{K: 4, Rate: 100e9, Delay: time.Microsecond,
		SwitchLatency: 300 * time.Nanosecond}, fabric.DefaultOptions(fabric.ForwardPathQuality))
	if err != nil {
		t.Fatal(err)
	}
	// Port 1 of cores 0 and 1 goes to pod 1's agg.1.0.
	for _, c := range []string{"core.0", "core.1"} {
		p := topo.Switch(c).Ports[1]
		p.Tx.Rate, p.Peer.Tx.Rate = 25e9, 25e9
	}
	cp, err := New(topo, loop, scaled)
	if err != nil {
		t.Fatal(err)
	}
	// Session up reaches agg.0.0 after one control delay; its next
	// advertisement reaches edge.0.0 one period and one delay later.
	loop.RunUntil(sim.Time(scaled.AdvertisePeriod + 2*scaled.ControlDelay))
	cp.Stop()
	const subnet = 2 // edge.1.0's hosts
	for _, c := range []struct {
		sw   string
		path float64
	}{{"edge.1.0", 200}, {"agg.1.0", 100}, {"core.0", 25}, {"core.1", 25}, {"core.2", 100}, {"agg.0.0", 50}, {"agg.0.1", 200}} {
		// Advertised values are float32 bytes/s: 100 Gb/s arrives as 99.999998.
		if got := route(t, cp, c.sw, subnet).Path; math.Abs(got-c.path) > 1e-6*c.path {
			t.Errorf("%s: path bandwidth toward subnet %d %v, want %v", c.sw, subnet, got, c.path)
		}
	}
	w, buckets := topo.Switch("edge.0.0").PathWeights(subnet)
	if len(w) != 2 || math.Abs(w[0]-50) > 1e-4 || math.Abs(w[1]-100) > 1e-4 || buckets[0] != 85 || buckets[1] != 171 {
		t.Fatalf("edge.0.0 toward subnet %d: weights %v buckets %v, want [50 100] and [85 171]", subnet, w, buckets)
	}
}
