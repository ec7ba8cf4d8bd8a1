package fabric

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// burst sends n frames of distinct flows h0 → h3 (T0 0 → T0 1, across the
// T1s) in plane 0 and returns how many arrived.
func burst(topo *Topology, hs []*recvHost, n int) int {
	before := len(hs[3].got)
	for i := 0; i < n; i++ {
		f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(3, 0), Sport: uint16(49152 + i), Flow: uint32(i * 7919),
			Payload: 200, Stored: -1})
		topo.HostPorts[0][0].Enqueue(f)
	}
	topo.Loop.RunUntil(topo.Loop.Now() + 100*sim.Microsecond)
	return len(hs[3].got) - before
}

// ECMP reconvergence: with the T1 0 → T0 1 cable cut, flows the source T0
// hashes onto T1 0 are lost until the delay has passed; then T0 0 drops
// T1 0 from its group toward subnet 1 (T1 0 no longer reaches it) and
// nothing is lost; the cable back up is used again only the delay after
// it came up. Without SetReconvergence the loss lasts as long as the cut.
func TestECMPReconvergence(t *testing.T) {
	const delay = 2 * time.Millisecond
	for _, on := range []bool{false, true} {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 1, 2, 2, 2, DefaultOptions(ForwardECMP))
		if on {
			topo.SetReconvergence(delay, loop)
		}
		hs := attach(topo)
		const n = 64
		if got := burst(topo, hs, n); got != n {
			t.Fatalf("before the cut: %d of %d arrived", got, n)
		}
		t1 := topo.Switch("p0.t1.0")
		cut := t1.Ports[1] // T1 0's port toward T0 1
		cut.Tx.SetUp(false)
		cut.Peer.Tx.SetUp(false)
		lost := n - burst(topo, hs, n)
		if lost == 0 || lost == n {
			t.Fatalf("right after the cut: %d of %d lost, want some (the flows hashed onto T1 0)", lost, n)
		}
		loop.RunUntil(loop.Now() + sim.Time(delay))
		got := burst(topo, hs, n)
		switch {
		case on && got != n:
			t.Errorf("after reconvergence: %d of %d arrived", got, n)
		case !on && n-got != lost:
			t.Errorf("without reconvergence, %v after the cut: %d lost, want the same %d as at once", delay, n-got, lost)
		}
		if !on {
			continue
		}
		// T0 1 → T1 0 still works, and T0 0 → T1 1 must carry everything now.
		if g := topo.Switch("p0.t0.0"); len(g.groups[g.subnetGroup[1]]) != 1 {
			t.Errorf("T0 0's group toward subnet 1: %v, want only the uplink to T1 1", g.groups[g.subnetGroup[1]])
		}
		cut.Tx.SetUp(true)
		cut.Peer.Tx.SetUp(true)
		via0 := func() uint64 { return topo.Switch("p0.t0.0").Ports[2].Tx.Counters.Packets }
		before := via0()
		if got := burst(topo, hs, n); got != n || via0() != before {
			t.Errorf("just after the cable came back: %d of %d arrived, %d via T1 0 (want none yet)", got, n, via0()-before)
		}
		loop.RunUntil(loop.Now() + sim.Time(delay))
		before = via0()
		if got := burst(topo, hs, n); got != n || via0() == before {
			t.Errorf("the delay after it came back: %d of %d arrived, %d via T1 0 (want some)", got, n, via0()-before)
		}
		g := topo.Switch("p0.t0.0")
		if len(g.groups[g.subnetGroup[1]]) != 2 {
			t.Errorf("T0 0's group toward subnet 1 not restored: %v", g.groups[g.subnetGroup[1]])
		}
	}
}

// uSID forwarding ignores SetReconvergence: its tables never change.
func TestReconvergenceLeavesUSID(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 2, DefaultOptions(ForwardUSID))
	topo.SetReconvergence(0, loop)
	if topo.routing != nil {
		t.Fatal("uSID topology got a routing view")
	}
	topo.Switch("p0.t1.0").Ports[1].Tx.SetUp(false)
	loop.Run()
}

// In a k=4 fat-tree, a cut core → aggregation cable (the way down into the
// destination pod) is routed around once the view has it: the source edge
// and aggregation switches stop sending toward the core (and the
// aggregation switch) that lost the way down.
func TestECMPReconvergenceFatTree(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := BuildFatTree(loop, FatTreeSpec{K: 4, Rate: 100e9, Delay: time.Microsecond}, DefaultOptions(ForwardECMP))
	if err != nil {
		t.Fatal(err)
	}
	topo.SetReconvergence(time.Millisecond, loop)
	hs := attach(topo)
	send := func() int {
		dst := topo.Hosts - 1 // pod 3
		before := len(hs[dst].got)
		for i := 0; i < 256; i++ {
			f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(dst, 0), Sport: uint16(49152 + i), Flow: uint32(i * 104729),
				Payload: 200, Stored: -1})
			topo.HostPorts[0][0].Enqueue(f)
		}
		loop.RunUntil(loop.Now() + 100*sim.Microsecond)
		return len(hs[dst].got) - before
	}
	if got := send(); got != 256 {
		t.Fatalf("before the cut: %d of 256", got)
	}
	core := topo.Switch("core.0")
	down := core.Ports[3] // toward pod 3's aggregation switch
	down.Tx.SetUp(false)
	down.Peer.Tx.SetUp(false)
	if got := send(); got == 256 {
		t.Fatal("nothing lost right after the cut")
	}
	loop.RunUntil(loop.Now() + sim.Time(time.Millisecond))
	if got := send(); got != 256 {
		t.Errorf("after reconvergence: %d of 256 arrived", got)
	}
}

// A switch sees its own cables at once: with the source T0's uplink to
// T1 0 cut, T0 0 withdraws that next hop locally and nothing is lost even
// before the delay (without reconvergence the flows hashed onto it are).
// A flap shorter than the delay replays in the view later, but no switch
// loses its route for the cable it owns, so nothing is dropped then
// either.
func TestECMPReconvergenceLocalCable(t *testing.T) {
	const delay = 2 * time.Millisecond
	for _, on := range []bool{false, true} {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 1, 2, 2, 2, DefaultOptions(ForwardECMP))
		if on {
			topo.SetReconvergence(delay, loop)
		}
		hs := attach(topo)
		const n = 64
		t0 := topo.Switch("p0.t0.0")
		cut := t0.Ports[2] // T0 0's uplink to T1 0 (TestECMPReconvergence's via0)
		cut.Tx.SetUp(false)
		cut.Peer.Tx.SetUp(false)
		loop.RunUntil(loop.Now() + sim.Microsecond) // the local recompute's event
		lost := n - burst(topo, hs, n)
		switch {
		case on && lost != 0:
			t.Errorf("reconvergence on, right after the local cut: %d of %d lost, want none (local withdrawal)", lost, n)
		case !on && lost == 0:
			t.Errorf("without reconvergence: nothing lost across a cut uplink")
		}
		if !on {
			continue
		}
		cut.Tx.SetUp(true) // back within the delay: a flap
		cut.Peer.Tx.SetUp(true)
		loop.RunUntil(loop.Now() + sim.Microsecond)
		for _, at := range []time.Duration{0, delay / 2, delay, 3 * delay / 2} {
			loop.RunUntil(loop.Now() + sim.Time(at/4))
			if got := burst(topo, hs, n); got != n {
				t.Errorf("during the flap's replay (+%v): %d of %d arrived", at, got, n)
			}
		}
	}
}
