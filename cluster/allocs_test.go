package cluster

import (
	"runtime"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// The whole per-packet path — transport, engine, NIC, ports, links,
// switches, the loop — allocates nothing in steady state: measured over
// 2 ms of a running transfer (payload elided), after 1 ms of warm-up.
// The timed variant adds switch and NIC latencies and writes of 64 KiB,
// so that completions flow through the NIC's receive latency throughout.
func TestSteadyStateAllocationsPerPacket(t *testing.T) {
	timed := []string{"fabric.switchLatency=500ns", "host.nicTxLatency=1us", "host.nicRxLatency=1us"}
	for _, run := range []struct {
		kind  string
		sets  []string
		chunk uint64
	}{{"mrc", nil, 1 << 30}, {"roce", nil, 1 << 30}, {"mrc", timed, 64 << 10}, {"roce", timed, 64 << 10}} {
		kind := run.kind
		c, err := New(load(t, append([]string{"fabric.preset=C", "fabric.hosts=16", "transport.kind=" + kind, "transport.payload=elided"}, run.sets...)...), nil)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := c.Connect(0, 15)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartTransfer(ps[0], c.Region(0, 1<<30, nil), c.Region(15, 1<<30, nil), 1<<30, run.chunk); err != nil {
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
		t.Logf("%s %v: %d data packets in 2 ms of virtual time, %d allocations (%.4f per packet)", kind, run.sets, pkts, allocs, float64(allocs)/float64(pkts))
		if pkts < 1000 || float64(allocs)/float64(pkts) > 0.01 {
			t.Errorf("%s: %d allocations for %d packets", kind, allocs, pkts)
		}
		c.Close()
	}
}
