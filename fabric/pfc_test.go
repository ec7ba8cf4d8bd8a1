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
