package fabric

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

func TestPFCIncastPausesWithoutDrops(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 9})
	o := DefaultOptions(ForwardECMP).WithPFC(DefaultPFC())
	topo := smallClos(t, loop, 1, 4, 2, 1, o)
	hs := attach(topo)
	senders := []int{1, 2, 3, 4, 5, 6, 7} // 7:1 into host 0, across T0 and T1
	incast(topo, senders, 0, 150, 4000, DSCPRoCE)
	loop.Run()
	if n := len(hs[0].got); n != 7*150 {
		t.Fatalf("receiver got %d of %d", n, 7*150)
	}
	for r := 0; r < numDropReasons; r++ {
		if d := totalDrops(topo, r); d != 0 {
			t.Fatalf("%d drops (%s) with PFC on", d, DropReasonNames[r])
		}
	}
	t0 := topo.Switch("p0.t0.0")
	var pauses, resumes, nicPaused uint64
	for _, p := range t0.Ports {
		pauses += p.Counters.PauseTx
		resumes += p.Counters.ResumeTx
	}
	for _, s := range []int{1, 2, 3} {
		nicPaused += topo.HostPorts[s][0].Counters.PauseRx
	}
	if pauses == 0 || nicPaused == 0 || resumes == 0 {
		t.Fatalf("T0 sent %d pauses / %d resumes, senders received %d", pauses, resumes, nicPaused)
	}
	if up := topo.Switch("p0.t1.0").Ports[1].Counters.PauseTx; up == 0 {
		t.Fatal("T1 never paused the remote T0 (pause must propagate upstream)")
	}
	// Every accounted byte left the switch.
	for _, s := range topo.Switches {
		for i := range s.Ports {
			if b := s.PFC().Held(i, ClassRoCE); b != 0 {
				t.Fatalf("%s port %d still holds %d bytes", s.Name, i, b)
			}
		}
	}
	// The receiver's link stayed busy: 7×150 packets at 100G take at least
	// their serialisation time, and PFC must not stretch that by more than
	// a few percent.
	last := hs[0].got[len(hs[0].got)-1].at
	ideal := sim.Time(7 * 150 * (4066 + 4 + 20) * 8 / 100) // ns at 100 Gb/s
	if last < ideal || float64(last) > 1.1*float64(ideal)+20000 {
		t.Fatalf("incast finished at %v, ideal %v", last, ideal)
	}
	// Without PFC the same incast drops.
	loop2 := sim.NewLoop(sim.Options{Seed: 9})
	o2 := DefaultOptions(ForwardECMP)
	o2.HostFacingPort.BufferBytes = 256 << 10
	topo2 := smallClos(t, loop2, 1, 4, 2, 1, o2)
	attach(topo2)
	incast(topo2, senders, 0, 150, 4000, DSCPRoCE)
	loop2.Run()
	if totalDrops(topo2, DropBuffer) == 0 {
		t.Fatal("control run without PFC did not drop: the test proves nothing")
	}
}

func TestPFCWatchdogBreaksStorm(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 9})
	pfc := DefaultPFC()
	pfc.Detection = time.Millisecond
	pfc.Restoration = 2 * time.Millisecond
	o := DefaultOptions(ForwardECMP).WithPFC(pfc)
	topo := smallClos(t, loop, 1, 2, 1, 1, o)
	hs := attach(topo)
	victim := topo.HostPorts[0][0]
	// Host 0's NIC storms: it pauses its T0 port every 100 µs for 5 ms.
	const stormStart, stormEnd = 10 * sim.Microsecond, 5 * sim.Millisecond
	for at := stormStart; at < stormEnd; at += 100 * sim.Microsecond {
		loop.At(at, func() { victim.SendPause(ClassRoCE, MaxQuanta) })
	}
	loop.At(20*sim.Microsecond, func() { incast(topo, []int{1}, 0, 100, 4000, DSCPRoCE) })
	down := topo.Switch("p0.t0.0").Ports[0]
	// The first pause reaches the T0 port after serialisation + 500 ns.
	firstPause := stormStart + serializationTime(64+20, 100e9, new(uint64)) + 500
	loop.RunUntil(firstPause + sim.Time(pfc.Detection) - 1)
	if down.Counters.StormsDetected != 0 {
		t.Fatal("storm declared before the detection time")
	}
	if down.ClassBytes(ClassRoCE) == 0 {
		t.Fatal("no traffic stuck behind the storm: the test proves nothing")
	}
	loop.RunUntil(firstPause + sim.Time(pfc.Detection) + 1)
	if down.Counters.StormsDetected != 1 {
		t.Fatalf("storm not detected after %v", pfc.Detection)
	}
	loop.RunUntil(stormEnd)
	if down.Counters.Drops[DropWatchdog] == 0 || down.ClassBytes(ClassRoCE) != 0 {
		t.Fatalf("watchdog drops %d, queue %d", down.Counters.Drops[DropWatchdog], down.ClassBytes(ClassRoCE))
	}
	before := len(hs[0].got)
	loop.RunUntil(stormEnd + 3*sim.Millisecond)
	if down.Counters.StormsRestored != 1 {
		t.Fatal("not restored after the restoration time")
	}
	incast(topo, []int{1}, 0, 10, 4000, DSCPRoCE)
	loop.Run()
	if len(hs[0].got)-before != 10 {
		t.Fatalf("after restoration %d of 10 arrived", len(hs[0].got)-before)
	}
}

// SONiC's pfcwd drop action drops both directions of the stormed queue:
// frames of the stormed priority that the storming peer sends into the
// mitigated port are dropped too, and pass again after restoration.
func TestPFCWatchdogDropsIngressOfStormedQueue(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 9})
	pfc := DefaultPFC()
	pfc.Detection = time.Millisecond
	pfc.Restoration = 2 * time.Millisecond
	o := DefaultOptions(ForwardECMP).WithPFC(pfc)
	topo := smallClos(t, loop, 1, 2, 1, 1, o)
	hs := attach(topo)
	victim := topo.HostPorts[0][0]
	const stormEnd = 5 * sim.Millisecond
	for at := 10 * sim.Microsecond; at < stormEnd; at += 100 * sim.Microsecond {
		loop.At(at, func() { victim.SendPause(ClassRoCE, MaxQuanta) })
	}
	loop.At(20*sim.Microsecond, func() { incast(topo, []int{1}, 0, 100, 4000, DSCPRoCE) })
	down := topo.Switch("p0.t0.0").Ports[0]
	loop.RunUntil(3 * sim.Millisecond) // the storm is detected after ~1 ms
	if down.Counters.StormsDetected != 1 {
		t.Fatal("storm not detected: the test proves nothing")
	}
	// Host 0 (the storming NIC) sends into the mitigated port: RoCE frames
	// drop there, frames of another class still pass.
	before := down.Counters.Drops[DropWatchdog]
	incast(topo, []int{0}, 1, 10, 1000, DSCPRoCE)
	incast(topo, []int{0}, 1, 5, 1000, DSCPDefault)
	loop.RunUntil(3*sim.Millisecond + 100*sim.Microsecond)
	if d := down.Counters.Drops[DropWatchdog] - before; d != 10 {
		t.Fatalf("%d of the 10 RoCE frames arriving on the stormed port dropped, want all", d)
	}
	if n := len(hs[1].got); n != 5 {
		t.Fatalf("host 1 got %d frames, want the 5 of the unstormed class", n)
	}
	loop.RunUntil(stormEnd + 3*sim.Millisecond)
	if down.Counters.StormsRestored != 1 {
		t.Fatal("not restored")
	}
	incast(topo, []int{0}, 1, 10, 1000, DSCPRoCE)
	loop.Run()
	if n := len(hs[1].got); n != 15 {
		t.Fatalf("after restoration host 1 has %d frames, want 15", n)
	}
}

// HPCC's dynamic threshold, step by step on one switch's accounting: the
// reserve fills first, then the shared buffer, and the pause threshold
// (free shared buffer >> shift) falls with every shared byte; XOFF at the
// first frame whose shared bytes reach it, headroom after that, XON once
// the headroom is empty and the shared bytes are 3 KB under it.
func TestPFCDynamicThresholdSteps(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	pfc := DynamicPFC(100e9)
	const free = 800_000
	const ports = 4 + 2 // a T0: 4 hosts, 2 uplinks
	pfc.SharedBuffer = free + ports*(pfc.Headroom+pfc.Reserve)
	topo, err := BuildClos(loop, ClosSpec{Planes: 1, HostsPerT0: 4, T0: 2, T1: 2, HostRate: 100e9, FabricRate: 400e9,
		HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond}, DefaultOptions(ForwardECMP).WithPFC(pfc))
	if err != nil {
		t.Fatal(err)
	}
	sw := topo.Switch("p0.t0.0")
	a := sw.PFC()
	// Shift 3 at the NIC rate, 1 at 400G (two doublings).
	if th, up := a.Threshold(1), a.Threshold(4); th != free>>3 || up != free>>1 {
		t.Fatalf("empty switch: thresholds %d (100G) and %d (400G), want %d and %d", th, up, free>>3, free>>1)
	}
	frame := func(in int32) *Packet {
		p := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(int(in), 0), Dst: topo.HostAddr(0, 0), DSCP: DSCPRoCE, Payload: 4000})
		p.Class, p.InPort = ClassRoCE, in
		return p
	}
	in := sw.Ports[1]
	var held []*Packet
	prevTh, xoffAt := a.Threshold(1), -1
	for i := 0; xoffAt < 0 || i < xoffAt+5; i++ {
		p := frame(1)
		sharedBefore, thBefore := a.SharedUsed(), a.Threshold(1)
		if !a.admit(p, 1) {
			t.Fatalf("frame %d dropped", i)
		}
		held = append(held, p)
		// Every byte past the reserve is shared, until a frame would take
		// the shared bytes past the threshold: it and all after it go to
		// the headroom, and the shared bytes stay.
		wantShared := max(0, len(held)*p.WireLen-pfc.Reserve)
		if xoffAt >= 0 || wantShared > thBefore {
			wantShared = sharedBefore
		}
		if a.SharedUsed() != wantShared || a.Held(1, ClassRoCE) != len(held)*p.WireLen {
			t.Fatalf("frame %d: shared %d, held %d, want %d, %d", i, a.SharedUsed(), a.Held(1, ClassRoCE), wantShared, len(held)*p.WireLen)
		}
		th := a.Threshold(1)
		if want := (free - a.SharedUsed()) >> 3; th != want {
			t.Fatalf("frame %d: threshold %d, want (free − shared) >> 3 = %d", i, th, want)
		}
		if a.SharedUsed() > sharedBefore && th >= prevTh {
			t.Fatalf("frame %d: threshold %d did not fall as the shared buffer filled (was %d)", i, th, prevTh)
		}
		prevTh = th
		paused := in.Counters.PauseTx > 0
		inHeadroom := a.Held(1, ClassRoCE) > pfc.Reserve+a.SharedUsed()
		if shouldPause := inHeadroom || a.SharedUsed() >= th; shouldPause != paused && xoffAt < 0 {
			t.Fatalf("frame %d: shared %d, threshold %d: paused %v", i, a.SharedUsed(), th, paused)
		}
		if paused && xoffAt < 0 {
			xoffAt = i
		}
	}
	if in.Counters.PauseTx != 1 {
		t.Fatalf("%d XOFFs, want 1", in.Counters.PauseTx)
	}
	// The static thresholds would have paused at 96 KB; HPCC's at 1/9 of
	// the free buffer (shared = (free − shared)/8).
	if s := (xoffAt + 1) * held[0].WireLen; s < free/9 || s > free/9+pfc.Reserve+held[0].WireLen {
		t.Fatalf("XOFF with %d B held, want about %d", s, free/9+pfc.Reserve)
	}
	// Another port filling the shared buffer lowers port 1's threshold.
	before := a.Threshold(1)
	for range 10 {
		p := frame(2)
		a.admit(p, 2)
		held = append(held, p)
	}
	if a.Threshold(1) >= before {
		t.Fatalf("port 2's bytes left port 1's threshold at %d (was %d)", a.Threshold(1), before)
	}
	// Drain port 1's frames oldest first: XON at the first release after
	// which no headroom bytes remain and shared + 3 KB ≤ threshold.
	for i, p := range held {
		if p.InPort != 1 {
			continue
		}
		a.release(p)
		p.Release()
		held[i] = nil
		resumed := in.Counters.ResumeTx == 1
		hd := a.Held(1, ClassRoCE) - min(a.Held(1, ClassRoCE), pfc.Reserve+a.shared(1, ClassRoCE))
		want := hd == 0 && (a.shared(1, ClassRoCE) == 0 || a.shared(1, ClassRoCE)+pfc.ResumeOffset <= a.Threshold(1))
		if resumed {
			if !want {
				t.Fatalf("XON at release %d with shared %d, threshold %d", i, a.shared(1, ClassRoCE), a.Threshold(1))
			}
			break
		}
		if want {
			t.Fatalf("release %d: shared %d + 3 KB ≤ threshold %d, no headroom, yet no XON", i, a.shared(1, ClassRoCE), a.Threshold(1))
		}
	}
	if in.Counters.ResumeTx != 1 {
		t.Fatal("never resumed")
	}
}

// An incast into one host with the dynamic threshold pauses (up the tree
// too) and loses nothing.
func TestPFCDynamicIncastPausesWithoutDrops(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 9})
	topo := smallClos(t, loop, 1, 4, 2, 1, DefaultOptions(ForwardECMP).WithPFC(DynamicPFC(100e9)))
	hs := attach(topo)
	senders := []int{1, 2, 3, 4, 5, 6, 7}
	incast(topo, senders, 0, 150, 4000, DSCPRoCE)
	maxShared := 0
	for at := sim.Time(0); at < 200*sim.Microsecond; at += sim.Microsecond {
		loop.RunUntil(at)
		maxShared = max(maxShared, topo.Switch("p0.t0.0").PFC().SharedUsed())
	}
	loop.Run()
	if n := len(hs[0].got); n != 7*150 {
		t.Fatalf("receiver got %d of %d", n, 7*150)
	}
	for r := 0; r < numDropReasons; r++ {
		if d := totalDrops(topo, r); d != 0 {
			t.Fatalf("%d drops (%s) with dynamic PFC", d, DropReasonNames[r])
		}
	}
	var pauses uint64
	for _, p := range topo.Switch("p0.t0.0").Ports {
		pauses += p.Counters.PauseTx
	}
	if pauses == 0 || topo.Switch("p0.t1.0").Ports[1].Counters.PauseTx == 0 || maxShared == 0 {
		t.Fatalf("T0 pauses %d, T1 pauses %d, T0 shared peak %d: the incast never pressed the buffer", pauses,
			topo.Switch("p0.t1.0").Ports[1].Counters.PauseTx, maxShared)
	}
	for _, s := range topo.Switches {
		if u := s.PFC().SharedUsed(); u != 0 {
			t.Fatalf("%s: %d B still in the shared buffer", s.Name, u)
		}
		for i := range s.Ports {
			if b := s.PFC().Held(i, ClassRoCE); b != 0 {
				t.Fatalf("%s port %d still holds %d bytes", s.Name, i, b)
			}
		}
	}
}
