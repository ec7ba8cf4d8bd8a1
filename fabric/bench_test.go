package fabric

import "testing"

func benchHops(b *testing.B, mode ForwardingMode, observe bool) {
	hb, err := NewHopBench(mode)
	if err != nil {
		b.Fatal(err)
	}
	if observe {
		if err := hb.Observe(); err != nil {
			b.Fatal(err)
		}
	}
	cpu, unlock := threadCPU() // the loop runs on this goroutine: its thread's CPU time is the bench's
	defer unlock()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpu()
	ev := hb.Run(b.N)
	c1 := cpu()
	b.StopTimer()
	b.ReportMetric(float64(ev)/float64(hb.Hops), "events/hop")
	b.ReportMetric(float64(c1-c0)/float64(hb.Hops), "cpu-ns/hop")
	if observe {
		b.ReportMetric(float64(hb.Captures()), "captures")
	}
}

func BenchmarkPacketHopECMP(b *testing.B)        { benchHops(b, ForwardECMP, false) }
func BenchmarkPacketHopUSID(b *testing.B)        { benchHops(b, ForwardUSID, false) }
func BenchmarkPacketHopPathQuality(b *testing.B) { benchHops(b, ForwardPathQuality, false) }

// Telemetry and HDC on at every switch, nothing captured: the cost of
// watching every frame's queueing delay and every queue's occupancy.
func BenchmarkPacketHopECMPObserved(b *testing.B)        { benchHops(b, ForwardECMP, true) }
func BenchmarkPacketHopPathQualityObserved(b *testing.B) { benchHops(b, ForwardPathQuality, true) }

func TestPacketHopZeroAllocs(t *testing.T) {
	for _, c := range []struct {
		mode    ForwardingMode
		observe bool
	}{{ForwardUSID, false}, {ForwardECMP, false}, {ForwardPathQuality, false}, {ForwardPathQuality, true}} {
		hb, err := NewHopBench(c.mode)
		if err != nil {
			t.Fatal(err)
		}
		if c.observe {
			if err := hb.Observe(); err != nil {
				t.Fatal(err)
			}
		}
		hb.Run(100_000)
		// Frames come from the pool warmed up by earlier runs; the only
		// allocations left are the loop's queue slices growing now and then
		// (amortised, well under one per thousand hops).
		if a := testing.AllocsPerRun(20, func() { hb.Run(20_000) }); a/20_000 > 0.001 {
			t.Fatalf("%v observed %v: %v allocations per 20k hops", c.mode, c.observe, a)
		}
		if hb.Topo.Pool.Live != 0 {
			t.Fatalf("%v: %d packets leaked", c.mode, hb.Topo.Pool.Live)
		}
		if c.mode == ForwardPathQuality {
			// The bench forwards through weighted tables, not the
			// unweighted fallback.
			if _, b := hb.Topo.Switch("p0.t0.0").PathWeights(1); len(b) != 4 {
				t.Fatalf("pathquality bench unweighted: %v", b)
			}
		}
	}
}

// benchNextHop times the forwarding decision alone at T0 0 (the switch
// with a 4-way group toward the destination): 64 flows, the next-hop
// function only, no queues or events.
func benchNextHop(b *testing.B, mode ForwardingMode) {
	hb, err := NewHopBench(mode)
	if err != nil {
		b.Fatal(err)
	}
	s := hb.Topo.Switch("p0.t0.0")
	var ps [64]*Packet
	for i := range ps {
		ps[i] = flowFrame(hb.Topo, 0, 2, i)
	}
	cpu, unlock := threadCPU()
	defer unlock()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpu()
	var sum int32
	for i := 0; i < b.N; i++ {
		sum += s.next(s, ps[i&63])
	}
	c1 := cpu()
	b.StopTimer()
	b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
	if sum < 0 {
		b.Fatal("no route")
	}
	for _, p := range ps {
		p.Release()
	}
}

func BenchmarkNextHopECMP(b *testing.B)        { benchNextHop(b, ForwardECMP) }
func BenchmarkNextHopPathQuality(b *testing.B) { benchNextHop(b, ForwardPathQuality) }
