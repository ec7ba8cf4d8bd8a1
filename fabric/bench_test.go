package fabric

import (
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// benchHops measures the cost of one packet-hop (parse, decide, enqueue,
// serialize, propagate, deliver) on a Clos: a fixed set of packets circulates
// host 0 → host 2 (4 hops: NIC, T0 up, T1 down, T0 down) and is re-injected
// at the source on arrival, so nothing is allocated in steady state.
func benchHops(b *testing.B, mode ForwardingMode) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	o := DefaultOptions(mode)
	topo, err := BuildClos(loop, ClosSpec{Planes: 1, HostsPerT0: 2, T0: 2, T1: 4, HostRate: 100e9, FabricRate: 100e9, HostDelay: 500, FabricDelay: 1000}, o)
	if err != nil {
		b.Fatal(err)
	}
	hs := attach(topo)
	src := topo.HostPorts[0][0]
	var paths [][16]byte
	for u := 0; u < 4; u++ {
		paths = append(paths, topo.PathUSID(0, 2, 0, u))
	}
	hops := 0
	limit := 0
	hs[2].onRecv = func(p *Packet, in *Port) bool {
		hops += 4
		if hops >= limit {
			p.Release()
			return true
		}
		p.Data[offIPv6+7] = 64
		if mode == ForwardUSID {
			copy(p.Data[offIPv6Dst:], paths[hops&3][:])
		}
		src.Enqueue(p)
		return true
	}
	for i := 0; i < 16; i++ {
		f := frameSpec{src: topo.HostAddr(0, 0), dst: topo.HostAddr(2, 0), sport: uint16(i), flow: uint32(i), dscp: DSCPTrimmable, payload: 4000, stored: 0}
		if mode == ForwardUSID {
			f.outer = &paths[i&3]
		}
		src.Enqueue(makeFrame(topo.Pool, f))
	}
	limit = 200_000 // warm up
	loop.Run()
	hops, limit = 0, b.N
	for i := 0; i < 16; i++ {
		f := frameSpec{src: topo.HostAddr(0, 0), dst: topo.HostAddr(2, 0), sport: uint16(i), flow: uint32(i), dscp: DSCPTrimmable, payload: 4000, stored: 0}
		if mode == ForwardUSID {
			f.outer = &paths[i&3]
		}
		src.Enqueue(makeFrame(topo.Pool, f))
	}
	ev0 := loop.Executed()
	b.ReportAllocs()
	b.ResetTimer()
	loop.Run()
	b.StopTimer()
	b.ReportMetric(float64(loop.Executed()-ev0)/float64(hops), "events/hop")
}

func BenchmarkPacketHopECMP(b *testing.B) { benchHops(b, ForwardECMP) }
func BenchmarkPacketHopUSID(b *testing.B) { benchHops(b, ForwardUSID) }
