package fabric

import "testing"

func benchHops(b *testing.B, mode ForwardingMode) {
	hb, err := NewHopBench(mode)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	ev := hb.Run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(ev)/float64(hb.Hops), "events/hop")
}

func BenchmarkPacketHopECMP(b *testing.B) { benchHops(b, ForwardECMP) }
func BenchmarkPacketHopUSID(b *testing.B) { benchHops(b, ForwardUSID) }

func TestPacketHopZeroAllocs(t *testing.T) {
	hb, err := NewHopBench(ForwardUSID)
	if err != nil {
		t.Fatal(err)
	}
	hb.Run(100_000)
	if a := testing.AllocsPerRun(5, func() { hb.Run(20_000) }); a != 0 {
		// Frames come from the pool warmed up by earlier runs.
		t.Fatalf("%v allocations per 20k hops", a)
	}
	if hb.Topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", hb.Topo.Pool.Live)
	}
}
