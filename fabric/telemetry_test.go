package fabric

import (
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// slowPair is portPair with a 1 Gb/s link from a (8 ns a byte, no
// propagation delay), so that queueing times are round numbers of
// nanoseconds.
func slowPair(loop *sim.Loop) (*Port, *recvHost, *Pool) {
	cfg := DefaultPortConfig()
	cfg.ECN.Enabled = false
	a, h, pool := portPair(loop, cfg)
	a.Tx = NewLink(loop, "a>b", 1e9, 0, a.Peer)
	return a, h, pool
}

// frameOf builds a frame of wire length wire (FCS included) in class dscp.
func frameOf(pool *Pool, dscp uint8, wire int) *Packet {
	return BuildFrame(pool, FrameSpec{DSCP: dscp, Payload: wire - (EthHeaderLen + IPv6HeaderLen + UDPHeaderLen + FCSLen), Stored: 0})
}

// TestTelemetryIntegralExact: the occupancy integral of each class is
// exactly Σ bytes × time, against a hand computation of a FIFO at 1 Gb/s,
// at a read in the middle of a burst and at the end; watermarks are the
// peak since the previous read and restart at the level of the read.
func TestTelemetryIntegralExact(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	a, h, pool := slowPair(loop)
	a.EnableTelemetry()
	a.EnableTelemetry()     // idempotent
	const w, wc = 1000, 100 // wire bytes of a data and a control frame
	const T = (w + 20) * 8  // ns to send a data frame and its IFG at 1 Gb/s
	const Tc = (wc + 20) * 8
	var mid, end, late PortSnapshot
	// Burst 1 at t=0: four data frames; the first leaves at once, so the
	// queue holds 3000 B for T, 2000 B for T, 1000 B for T.
	for i := 0; i < 4; i++ {
		a.Enqueue(frameOf(pool, DSCPTrimmable, w))
	}
	loop.At(10_000, func() { mid = a.ReadTelemetry() })
	// Burst 2 at t=50 µs: two data frames and a control frame. The first
	// data frame leaves at once; the control frame (strict priority) goes
	// next after T, the second data frame after T + Tc.
	loop.At(50_000, func() {
		a.Enqueue(frameOf(pool, DSCPTrimmable, w))
		a.Enqueue(frameOf(pool, DSCPTrimmable, w))
		a.Enqueue(frameOf(pool, DSCPControl, wc))
	})
	loop.At(40_000, func() { end = a.ReadTelemetry() })
	loop.Run()
	late = a.ReadTelemetry()
	if len(h.got) != 7 {
		t.Fatalf("%d frames arrived, want 7", len(h.got))
	}

	if mid.At != 10_000 {
		t.Fatalf("mid read at %v", mid.At)
	}
	// At 10 µs: 3000 B for T (8160 ns), then 2000 B for 10000 − T.
	if want := uint64(3000*T + 2000*(10_000-T)); mid.OccupancyByteNanos[ClassData] != want {
		t.Errorf("∫ data at 10 µs = %d B·ns, want %d", mid.OccupancyByteNanos[ClassData], want)
	}
	if mid.Queue[ClassData] != 2000 || mid.Watermark[ClassData] != 3000 {
		t.Errorf("at 10 µs queue %d watermark %d, want 2000 and 3000", mid.Queue[ClassData], mid.Watermark[ClassData])
	}
	if want := uint64((3000 + 2000 + 1000) * T); end.OccupancyByteNanos[ClassData] != want {
		t.Errorf("∫ data after burst 1 = %d, want %d", end.OccupancyByteNanos[ClassData], want)
	}
	// Cleared at the mid read, the watermark restarted at the 2000 B left.
	if end.Watermark[ClassData] != 2000 || end.Queue[ClassData] != 0 {
		t.Errorf("after burst 1 watermark %d queue %d, want 2000 and 0", end.Watermark[ClassData], end.Queue[ClassData])
	}
	if want := uint64((6000)*T + w*(T+Tc)); late.OccupancyByteNanos[ClassData] != want {
		t.Errorf("∫ data at the end = %d, want %d", late.OccupancyByteNanos[ClassData], want)
	}
	if want := uint64(wc * T); late.OccupancyByteNanos[ClassControl] != want {
		t.Errorf("∫ control = %d, want %d", late.OccupancyByteNanos[ClassControl], want)
	}
	if late.Watermark[ClassData] != w || late.Watermark[ClassControl] != wc {
		t.Errorf("burst 2 watermarks data %d control %d, want %d and %d", late.Watermark[ClassData], late.Watermark[ClassControl], w, wc)
	}
	if late.TxPackets != 7 || late.TxBytes != 6*w+wc || late.RateBps != 1e9 {
		t.Errorf("counters %d frames %d bytes at %d b/s", late.TxPackets, late.TxBytes, late.RateBps)
	}
	// A read right after another: no time passed, no new peak above the level.
	again := a.ReadTelemetry()
	if again.OccupancyByteNanos != late.OccupancyByteNanos || again.Watermark != ([NumClasses]int{}) {
		t.Errorf("a second read at the same instant changed ∫ or kept a watermark: %+v", again)
	}
}

// TestTelemetryOffAndLate: without EnableTelemetry the occupancy fields
// are zero; enabled while frames wait, the integral counts from the call.
func TestTelemetryOffAndLate(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	a, _, pool := slowPair(loop)
	const w, T = 1000, (1000 + 20) * 8
	for i := 0; i < 3; i++ {
		a.Enqueue(frameOf(pool, DSCPTrimmable, w))
	}
	var s PortSnapshot
	loop.At(1000, func() { s = a.ReadTelemetry() })
	loop.At(2000, a.EnableTelemetry)
	loop.Run()
	if s.Queue[ClassData] != 2*w || s.OccupancyByteNanos != ([NumClasses]uint64{}) || s.Watermark != ([NumClasses]int{}) {
		t.Fatalf("telemetry off: %+v", s)
	}
	// From 2 µs: 2000 B until T, 1000 B for T.
	got := a.ReadTelemetry()
	if want := uint64(2*w*(T-2000) + w*T); got.OccupancyByteNanos[ClassData] != want {
		t.Fatalf("∫ from the call = %d, want %d", got.OccupancyByteNanos[ClassData], want)
	}
	if got.Watermark[ClassData] != 2*w {
		t.Fatalf("watermark %d, want the level at the call %d", got.Watermark[ClassData], 2*w)
	}
}

// TestTelemetryNoAllocs: a port with telemetry on queues and sends frames
// without allocating.
func TestTelemetryNoAllocs(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	a, h, pool := slowPair(loop)
	h.onRecv = func(p *Packet, _ *Port) bool { p.Release(); return true }
	a.EnableTelemetry()
	run := func() {
		for i := 0; i < 8; i++ {
			a.Enqueue(frameOf(pool, DSCPTrimmable, 1000))
		}
		loop.Run()
		_ = a.ReadTelemetry()
	}
	run() // warm the pool and the loop
	if n := testing.AllocsPerRun(20, run); n != 0 {
		t.Fatalf("%v allocations per burst with telemetry on", n)
	}
}
