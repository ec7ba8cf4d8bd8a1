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
	// Frames come from the pool warmed up by earlier runs; the only
	// allocations left are the loop's queue slices growing now and then
	// (amortised, well under one per thousand hops).
	if a := testing.AllocsPerRun(20, func() { hb.Run(20_000) }); a/20_000 > 0.001 {
		t.Fatalf("%v allocations per 20k hops", a)
	}
	if hb.Topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", hb.Topo.Pool.Live)
	}
}
