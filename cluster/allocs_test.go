package cluster

import (
	"runtime"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// The whole per-packet path — transport, engine, NIC, ports, links,
// switches, the loop — allocates nothing in steady state: measured over
// 2 ms of a running transfer (payload elided), after 1 ms of warm-up.
func TestSteadyStateAllocationsPerPacket(t *testing.T) {
	for _, kind := range []string{"mrc", "roce"} {
		c, err := New(load(t, "fabric.preset=C", "fabric.hosts=16", "transport.kind="+kind, "transport.payload=elided"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := c.Connect(0, 15)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartTransfer(ps[0], c.Region(0, 1<<30, nil), c.Region(15, 1<<30, nil), 1<<30, 1<<30); err != nil {
			t.Fatal(err)
		}
		c.Loop.RunUntil(sim.Millisecond)
		sent0 := ps[0].A.T.Stats().DataPacketsSent
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		c.Loop.RunUntil(3 * sim.Millisecond)
		runtime.ReadMemStats(&m1)
		pkts := ps[0].A.T.Stats().DataPacketsSent - sent0
		allocs := m1.Mallocs - m0.Mallocs
		t.Logf("%s: %d data packets in 2 ms of virtual time, %d allocations (%.4f per packet)", kind, pkts, allocs, float64(allocs)/float64(pkts))
		if pkts < 1000 || float64(allocs)/float64(pkts) > 0.01 {
			t.Errorf("%s: %d allocations for %d packets", kind, allocs, pkts)
		}
		c.Close()
	}
}
