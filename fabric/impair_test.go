package fabric

import (
	"math"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

func TestGilbertElliottBurstsAndMean(t *testing.T) {
	g := NewGilbertElliott(0.01, 0.2, 0, 0.5, 1, "x")
	const n = 400_000
	lost, bursts, run := 0, 0, 0
	for i := 0; i < n; i++ {
		if g.Lose(nil) {
			lost++
			run++
		} else if run > 0 {
			bursts++
			run = 0
		}
	}
	got, want := float64(lost)/n, g.MeanLoss()
	if math.Abs(got-want) > 0.15*want {
		t.Fatalf("loss %.4f, model mean %.4f", got, want)
	}
	// Bursty: losses cluster, so there are fewer bursts than losses.
	if float64(bursts) > 0.9*float64(lost) {
		t.Fatalf("%d bursts for %d losses: not bursty", bursts, lost)
	}
}

func TestBitErrorRate(t *testing.T) {
	b := NewBitErrors(1e-6, 1, "x")
	want := b.FrameErrorRate(4200)
	if math.Abs(want-(1-math.Pow(1-1e-6, 8*4200))) > 1e-12 {
		t.Fatalf("frame error rate %v", want)
	}
	p := &Packet{WireLen: 4200}
	const n = 200_000
	bad := 0
	for i := 0; i < n; i++ {
		if b.Corrupt(p) {
			bad++
		}
	}
	sigma := math.Sqrt(n * want * (1 - want))
	if math.Abs(float64(bad)-n*want) > 5*sigma {
		t.Fatalf("%d corrupted, expected %.0f ± %.0f", bad, n*want, sigma)
	}
}

func TestSwitchDownAndBack(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(ForwardECMP))
	hs := attach(topo)
	t1 := topo.Switch("p0.t1.0")
	send := func(n int) {
		for i := 0; i < n; i++ {
			topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(3, 0), Payload: 1000, Stored: -1}))
		}
	}
	send(50)
	loop.RunUntil(5 * sim.Microsecond) // some frames delivered, others queued or in flight
	t1.SetDown(true)
	loop.Run()
	got := len(hs[3].got)
	if got == 0 || got == 50 {
		t.Fatalf("%d of 50 arrived: the crash should cut the transfer mid-way", got)
	}
	for _, p := range t1.Ports {
		if p.Tx.Up() || p.Peer.Tx.Up() {
			t.Fatal("links of a down switch must be down both ways")
		}
	}
	var lost uint64
	for _, l := range topo.Links {
		lost += l.Counters.DroppedDown
	}
	if lost == 0 {
		t.Fatal("nothing counted as lost to the down links")
	}
	t1.SetDown(false)
	send(10)
	loop.Run()
	if len(hs[3].got) != got+10 {
		t.Fatalf("after reboot %d of 10 arrived", len(hs[3].got)-got)
	}
	if topo.Pool.Live != 0 {
		t.Fatalf("%d leaked", topo.Pool.Live)
	}
}

func TestBlackHoleDropsAFractionSilently(t *testing.T) {
	for _, mode := range []ForwardingMode{ForwardECMP, ForwardUSID} {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(mode))
		hs := attach(topo)
		t1 := topo.Switch("p0.t1.0")
		// Hole: traffic toward T0 1 (subnet 1 / uSID of p0.t0.1).
		sid := uint16(1)
		if mode == ForwardUSID {
			sid = USID(0, USIDT0, 1)
		}
		t1.BlackHole(sid, 0.3)
		const n = 4000
		for i := 0; i < n; i++ {
			var path *[16]byte
			if mode == ForwardUSID {
				p := topo.PathUSID(0, 2, 0, 0)
				path = &p
			}
			topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(2, 0), Outer: path, Payload: 64, Stored: -1}))
			loop.Run()
		}
		lost := n - len(hs[2].got)
		if lost != int(t1.Counters.BlackHoled) || math.Abs(float64(lost)/n-0.3) > 0.03 {
			t.Fatalf("%v: lost %d of %d, counted %d", mode, lost, n, t1.Counters.BlackHoled)
		}
		for _, p := range t1.Ports {
			for _, d := range p.Counters.Drops {
				if d != 0 {
					t.Fatalf("%v: black-holed packets show up in port drop counters", mode)
				}
			}
		}
		// Traffic to the other T0 is untouched.
		t1.BlackHole(sid, 0)
		before := len(hs[2].got)
		topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(2, 0), Payload: 64, Stored: -1, Outer: func() *[16]byte {
			if mode != ForwardUSID {
				return nil
			}
			p := topo.PathUSID(0, 2, 0, 0)
			return &p
		}()}))
		loop.Run()
		if len(hs[2].got) != before+1 {
			t.Fatalf("%v: hole not removed", mode)
		}
	}
}
