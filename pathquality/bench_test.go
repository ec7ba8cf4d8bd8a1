package pathquality

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// BenchmarkControlPlanePeriod: one advertise period (5 samples and one
// advertisement of every switch) on an idle 8-plane Clos of 32 T0 × 16 T1
// per plane (384 switches, 32 subnets).
func BenchmarkControlPlanePeriod(b *testing.B) {
	loop := sim.NewLoop(sim.Options{})
	topo, err := fabric.BuildClos(loop, fabric.ClosSpec{Planes: 8, HostsPerT0: 16, T0: 32, T1: 16,
		HostRate: 400e9, FabricRate: 400e9, HostDelay: time.Microsecond, FabricDelay: time.Microsecond},
		fabric.DefaultOptions(fabric.ForwardPathQuality))
	if err != nil {
		b.Fatal(err)
	}
	cp, err := New(topo, loop, scaled)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		loop.RunFor(scaled.AdvertisePeriod)
	}
	b.StopTimer()
	cp.Stop()
	b.ReportMetric(float64(cp.Stats().Samples)/float64(b.N), "samples/op")
}
