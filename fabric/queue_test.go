package fabric

import (
	"math"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// portPair returns port a sending to port b (owned by a recvHost) at 100G.
func portPair(loop *sim.Loop, cfg *PortConfig) (*Port, *recvHost, *Pool) {
	pool := NewPool(9216)
	a := NewPort(loop, pool, "a", cfg)
	b := NewPort(loop, pool, "b", cfg)
	h := &recvHost{loop: loop}
	b.Owner = h
	a.Tx = NewLink(loop, "a>b", 100e9, 1000, b)
	b.Tx = NewLink(loop, "b>a", 100e9, 1000, a)
	a.Peer, b.Peer = b, a
	return a, h, pool
}

func TestRedMarkingMatchesProfile(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 11})
	cfg := DefaultPortConfig()
	cfg.BufferBytes = 10 << 20
	cfg.ECN = ECNConfig{Enabled: true, Kmin: 100_000, Kmax: 300_000, Pmax: 0.2}
	a, _, pool := portPair(loop, cfg)
	const pkt = 1000 // wire bytes
	const levels = 400
	marks := make([]int, levels)
	const rounds = 150
	for r := 0; r < rounds; r++ {
		a.pause(ClassData, MaxQuanta) // hold the queue while it fills
		for i := 0; i < levels; i++ {
			p := BuildFrame(pool, FrameSpec{DSCP: DSCPTrimmable, ECN: ECNECT0, Payload: pkt - 66, Stored: 0})
			if p.WireLen != pkt {
				t.Fatalf("wire len %d", p.WireLen)
			}
			q := a.ClassBytes(ClassData)
			before := a.Counters.ECNMarks
			a.Enqueue(p)
			if q != i*pkt {
				t.Fatalf("queue %d at step %d", q, i)
			}
			if a.Counters.ECNMarks != before {
				marks[i]++
			}
		}
		a.pause(ClassData, 0)
		loop.Run()
	}
	// The class is paused while it fills, so level i saw i packets queued.
	qOf := func(i int) int { return i * pkt }
	for i := 0; i < levels; i++ {
		q := qOf(i)
		if q <= cfg.ECN.Kmin && marks[i] != 0 {
			t.Fatalf("q=%d ≤ Kmin marked %d times", q, marks[i])
		}
		if q > cfg.ECN.Kmax && marks[i] != rounds {
			t.Fatalf("q=%d > Kmax marked %d/%d", q, marks[i], rounds)
		}
	}
	// Between Kmin and Kmax: bins of 25 levels against the RED line.
	for lo := 0; lo < levels; lo += 25 {
		n, got, exp := 0, 0, 0.0
		for i := lo; i < lo+25; i++ {
			q := qOf(i)
			if q <= cfg.ECN.Kmin || q > cfg.ECN.Kmax {
				continue
			}
			n += rounds
			got += marks[i]
			exp += float64(rounds) * float64(q-cfg.ECN.Kmin) / float64(cfg.ECN.Kmax-cfg.ECN.Kmin) * cfg.ECN.Pmax
		}
		if n == 0 {
			continue
		}
		p := exp / float64(n)
		sigma := math.Sqrt(float64(n) * p * (1 - p))
		if math.Abs(float64(got)-exp) > 5*sigma+1 {
			t.Fatalf("levels %d..%d: %d marks, RED expects %.0f ± %.0f", lo, lo+24, got, exp, sigma)
		}
	}
	// ECN off: the same load marks nothing.
	cfg.ECN.Enabled = false
	before := a.Counters.ECNMarks
	a.pause(ClassData, MaxQuanta)
	for i := 0; i < levels; i++ {
		a.Enqueue(BuildFrame(pool, FrameSpec{DSCP: DSCPTrimmable, ECN: ECNECT0, Payload: pkt - 66, Stored: 0}))
	}
	a.pause(ClassData, 0)
	loop.Run()
	if a.Counters.ECNMarks != before {
		t.Fatal("ECN disabled but packets were marked")
	}
	// Not-ECT packets are never marked, even above Kmax.
	cfg.ECN.Enabled = true
	a.pause(ClassData, MaxQuanta)
	for i := 0; i < levels; i++ {
		a.Enqueue(BuildFrame(pool, FrameSpec{DSCP: DSCPTrimmable, ECN: ECNNotECT, Payload: pkt - 66, Stored: 0}))
	}
	a.pause(ClassData, 0)
	loop.Run()
	if a.Counters.ECNMarks != before {
		t.Fatal("not-ECT packets were marked")
	}
}

// incast sends n packets of size from each sender to dst at time 0.
func incast(topo *Topology, senders []int, dst, n, payload int, dscp uint8) {
	for _, s := range senders {
		for i := 0; i < n; i++ {
			topo.HostPorts[s][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(s, 0), Dst: topo.HostAddr(dst, 0),
				Sport: uint16(1000 + s), DSCP: dscp, ECN: ECNECT0, Payload: payload, Stored: 0, Seq: uint32(s*100000 + i)}))
		}
	}
}

func totalDrops(topo *Topology, reason int) (n uint64) {
	for _, s := range topo.Switches {
		for _, p := range s.Ports {
			n += p.Counters.Drops[reason]
		}
	}
	for _, hp := range topo.HostPorts {
		for _, p := range hp {
			n += p.Counters.Drops[reason]
		}
	}
	return n
}

func TestTrimmingLastHop(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 5})
	o := DefaultOptions(ForwardECMP)
	o.HostFacingPort.BufferBytes = 64 << 10
	topo := smallClos(t, loop, 1, 3, 2, 1, o)
	hs := attach(topo)
	incast(topo, []int{1, 2}, 0, 200, 4000, DSCPTrimmable)
	loop.Run()
	got := hs[0].got
	if len(got) != 400 {
		t.Fatalf("receiver got %d of 400 (trimmed or whole)", len(got))
	}
	if d := totalDrops(topo, DropBuffer) + totalDrops(topo, DropTrimQueue); d != 0 {
		t.Fatalf("%d drops: trimming must replace them", d)
	}
	last := topo.Switch("p0.t0.0").Ports[0]
	if last.Counters.Trims == 0 {
		t.Fatal("no trims on the overloaded last hop")
	}
	trimmed, overtook := 0, false
	for i, r := range got {
		if r.flags&FlagTrimmed == 0 {
			continue
		}
		trimmed++
		if r.dscp != DSCPTrimmedLastHop || r.len != 128+FCSLen {
			t.Fatalf("last-hop trim: dscp %d len %d", r.dscp, r.len)
		}
		// A trimmed header overtook queued data if a whole packet from the
		// same sender with a smaller sequence number arrives after it.
		for _, later := range got[i+1:] {
			if later.flags&FlagTrimmed == 0 && later.seq/100000 == r.seq/100000 && later.seq < r.seq {
				overtook = true
				break
			}
		}
	}
	if uint64(trimmed) != last.Counters.Trims {
		t.Fatalf("receiver saw %d trimmed, port counted %d", trimmed, last.Counters.Trims)
	}
	if !overtook {
		t.Fatal("no trimmed header overtook queued data")
	}
	if topo.Pool.Live != 0 {
		t.Fatalf("%d leaked", topo.Pool.Live)
	}
}

func TestTrimmingFabricPortAndNoTrim(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 5})
	o := DefaultOptions(ForwardECMP)
	o.FabricPort.BufferBytes = 64 << 10
	topo := smallClos(t, loop, 1, 3, 2, 1, o)
	hs := attach(topo)
	for s := 0; s < 3; s++ {
		incast(topo, []int{s}, 3+s, 200, 4000, DSCPTrimmable)
	}
	loop.Run()
	up := topo.Switch("p0.t0.0").Ports[3]
	if up.Counters.Trims == 0 {
		t.Fatal("no trims on the overloaded uplink")
	}
	n := 0
	for s := 3; s < 6; s++ {
		for _, r := range hs[s].got {
			n++
			if r.flags&FlagTrimmed != 0 && r.dscp != DSCPTrimmed {
				t.Fatalf("fabric trim carries DSCP %d, want TRIMMED", r.dscp)
			}
		}
	}
	if n != 600 || totalDrops(topo, DropBuffer) != 0 {
		t.Fatalf("received %d/600, buffer drops %d", n, totalDrops(topo, DropBuffer))
	}
	// NO_TRIM traffic is exempt: it drops instead.
	for s := 0; s < 3; s++ {
		incast(topo, []int{s}, 3+s, 200, 4000, DSCPNoTrim)
	}
	trims := up.Counters.Trims
	loop.Run()
	if up.Counters.Trims != trims || up.Counters.Drops[DropBuffer] == 0 {
		t.Fatalf("NO_TRIM: trims %d→%d, drops %d", trims, up.Counters.Trims, up.Counters.Drops[DropBuffer])
	}
}
