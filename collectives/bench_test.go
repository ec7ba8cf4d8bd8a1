package collectives

import (
	"testing"
)

// BenchmarkRingAllReduce64: 64 ranks, ring all-reduce of 256 MiB over MRC
// on cluster C (4 planes × 100G), payload elided, verification off. It
// reports the simulated time and bus bandwidth beside the wall time.
func BenchmarkRingAllReduce64(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c := newCluster(b, "mrc", 64, "transport.payload=elided")
		m := newComm(b, c, Options{NoCheck: true})
		r, err := m.Run(mustLookup(b, "allreduce/ring"), 256<<20, RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(r.TimeNs)/1e3, "sim-µs")
		b.ReportMetric(r.BusBW, "busbw-GB/s")
		b.ReportMetric(float64(c.Loop.Executed()), "events")
	}
}
