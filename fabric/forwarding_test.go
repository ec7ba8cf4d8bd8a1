package fabric

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// traceHops records the switches and egress ports a packet crossed.
func traceHops(topo *Topology) *[]string {
	var hops []string
	for _, s := range topo.Switches {
		s.Trace = func(sw *Switch, p *Packet, out *Port) { hops = append(hops, out.Name) }
	}
	return &hops
}

func TestUSIDPathFollowsEV(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 4, 2, 3, 4, DefaultOptions(ForwardUSID))
	hs := attach(topo)
	hops := traceHops(topo)
	// Across T1: host 0 (T0 0) → host 5 (T0 2, port 1), every plane and
	// every T1 choice must take exactly the named path.
	for plane := 0; plane < 4; plane++ {
		for u := 0; u < 4; u++ {
			*hops = (*hops)[:0]
			path := topo.PathUSID(0, 5, plane, u)
			f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, plane), Dst: topo.HostAddr(5, plane), Outer: &path, Payload: 100, Stored: -1})
			topo.HostPorts[0][plane].Enqueue(f)
			loop.Run()
			want := []string{
				fmt.Sprintf("p%d.t0.0/%d", plane, 2+u), // T0 0 uplink to T1 u
				fmt.Sprintf("p%d.t1.%d/2", plane, u),   // T1 u down to T0 2
				fmt.Sprintf("p%d.t0.2/1", plane),       // T0 2 down to host port 1
			}
			if strings.Join(*hops, " ") != strings.Join(want, " ") {
				t.Fatalf("plane %d T1 %d: path %v, want %v", plane, u, *hops, want)
			}
			got := hs[5].got[len(hs[5].got)-1]
			if got.plane != int32(plane) {
				t.Fatalf("arrived on plane %d", got.plane)
			}
		}
	}
	// Same T0: host 0 → host 1 through T0 0 only.
	*hops = (*hops)[:0]
	path := topo.PathUSID(0, 1, 2, 0)
	topo.HostPorts[0][2].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 2), Dst: topo.HostAddr(1, 2), Outer: &path, Payload: 100, Stored: -1}))
	loop.Run()
	if strings.Join(*hops, " ") != "p2.t0.0/1" || len(hs[1].got) != 1 {
		t.Fatalf("same-T0 path %v, host1 got %d", *hops, len(hs[1].got))
	}
	// The destination sees the shifted-out DA: locator + host uSID only.
	// Unknown uSIDs: a T1 that does not exist, a uSID of another plane, a
	// locator outside the block, an exhausted argument.
	bad := []([16]byte){
		USIDAddr(USID(0, USIDT0, 0), USID(0, USIDT1, 9), USID(0, USIDT0, 2), HostPortUSID(0, 1)),
		USIDAddr(USID(0, USIDT0, 0), USID(1, USIDT1, 0), USID(0, USIDT0, 2), HostPortUSID(0, 1)),
		USIDAddr(USID(0, USIDT0, 1)), // not this T0's uSID
		USIDAddr(USID(0, USIDT0, 0)), // argument exhausted at a switch
		topo.HostAddr(5, 0),          // not a uSID at all
	}
	before := topo.Switch("p0.t0.0").Counters.NoRoute
	for _, b := range bad {
		b := b
		topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(5, 0), Outer: &b, Payload: 64, Stored: -1}))
	}
	loop.Run()
	sw := topo.Switch("p0.t0.0")
	if got := sw.Counters.NoRoute - before; got != uint64(len(bad)) {
		t.Fatalf("no-route drops %d, want %d", got, len(bad))
	}
	if sw.Ports[0].Counters.Drops[DropNoRoute] != uint64(len(bad)) {
		t.Fatalf("ingress port no-route counter %d", sw.Ports[0].Counters.Drops[DropNoRoute])
	}
	if topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", topo.Pool.Live)
	}
}

func TestUSIDFatTreePaths(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := BuildFatTree(loop, FatTreeSpec{K: 4, Rate: 100e9, Delay: 1000}, DefaultOptions(ForwardUSID))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Hosts != 16 || len(topo.Switches) != 20 {
		t.Fatalf("k=4 fat-tree: %d hosts, %d switches", topo.Hosts, len(topo.Switches))
	}
	hs := attach(topo)
	hops := traceHops(topo)
	cases := []struct {
		src, dst, choice int
		want             string
	}{
		{0, 1, 0, "edge.0.0/1"},
		{0, 3, 1, "edge.0.0/3 agg.0.1/1 edge.0.1/1"},
		{0, 15, 3, "edge.0.0/3 agg.0.1/3 core.3/3 agg.3.1/1 edge.3.1/1"},
		{5, 10, 0, "edge.1.0/2 agg.1.0/2 core.0/2 agg.2.0/1 edge.2.1/0"},
	}
	for _, c := range cases {
		*hops = (*hops)[:0]
		path := topo.PathUSID(c.src, c.dst, 0, c.choice)
		topo.HostPorts[c.src][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(c.src, 0), Dst: topo.HostAddr(c.dst, 0), Outer: &path, Payload: 64, Stored: -1}))
		loop.Run()
		if got := strings.Join(*hops, " "); got != c.want {
			t.Errorf("%d→%d choice %d: %s, want %s", c.src, c.dst, c.choice, got, c.want)
		}
		if n := len(hs[c.dst].got); n != 1 {
			t.Errorf("host %d got %d packets", c.dst, n)
		}
		hs[c.dst].got = nil
	}
}

func TestECMPSpreadsFlowsAndPinsEach(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 3})
	const t1 = 8
	topo := smallClos(t, loop, 1, 2, 2, t1, DefaultOptions(ForwardECMP))
	attach(topo)
	up := topo.Switch("p0.t0.0")
	const flows = 4000
	perPath := make([]int, t1)
	for f := 0; f < flows; f++ {
		var first = -1
		// Each flow sends 3 packets: all must take one uplink.
		for k := 0; k < 3; k++ {
			before := make([]uint64, t1)
			for j := range before {
				before[j] = up.Ports[2+j].QCounters[0].EnqPackets
			}
			topo.HostPorts[0][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(2, 0),
				Sport: 49152, Flow: uint32(f), Payload: 64, Stored: -1}))
			loop.Run()
			took := -1
			for j := range before {
				if up.Ports[2+j].QCounters[0].EnqPackets != before[j] {
					took = j
				}
			}
			if took < 0 {
				t.Fatal("packet took no uplink")
			}
			if first >= 0 && took != first {
				t.Fatalf("flow %d moved from uplink %d to %d", f, first, took)
			}
			first = took
		}
		perPath[first]++
	}
	// Chi-square against uniform with 7 degrees of freedom: 24.3 is the
	// 0.999 quantile.
	exp := float64(flows) / t1
	chi := 0.0
	for _, n := range perPath {
		chi += (float64(n) - exp) * (float64(n) - exp) / exp
	}
	if chi > 24.3 {
		t.Fatalf("flows per uplink %v: chi-square %.1f > 24.3", perPath, chi)
	}
	for j, n := range perPath {
		if n == 0 {
			t.Fatalf("uplink %d unused", j)
		}
	}
	_ = math.Sqrt
}

func TestStaticFIBOnePathPerDestination(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 3})
	topo := smallClos(t, loop, 1, 4, 2, 4, DefaultOptions(ForwardStatic))
	hs := attach(topo)
	hops := traceHops(topo)
	paths := map[int]string{}
	for f := 0; f < 50; f++ {
		for dst := 4; dst < 8; dst++ {
			*hops = (*hops)[:0]
			topo.HostPorts[f%4][0].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(f%4, 0), Dst: topo.HostAddr(dst, 0), Sport: uint16(f), Flow: uint32(f * 7), Payload: 64, Stored: -1}))
			loop.Run()
			got := strings.Join((*hops)[1:], " ") // from the T1 on
			if p, ok := paths[dst]; ok && p != got {
				t.Fatalf("destination %d moved path: %s vs %s", dst, p, got)
			}
			paths[dst] = got
		}
	}
	seen := map[string]bool{}
	for _, p := range paths {
		seen[strings.Fields(p)[0]] = true
	}
	if len(seen) != 4 {
		t.Fatalf("4 destinations should use 4 different T1s, got %v", paths)
	}
	if len(hs[5].got) != 50 {
		t.Fatalf("host 5 got %d", len(hs[5].got))
	}
}

func TestHopLimitAndMalformed(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(ForwardECMP))
	hs := attach(topo)
	p := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(3, 0), Payload: 64, Stored: -1})
	p.Data[offIPv6+7] = 2 // expires at the T1
	topo.HostPorts[0][0].Enqueue(p)
	q := topo.Pool.Get(40) // not IPv6
	clear(q.Data)
	topo.HostPorts[0][0].Enqueue(q)
	loop.Run()
	if topo.Switch("p0.t1.0").Counters.HopLimit != 1 || len(hs[3].got) != 0 {
		t.Fatalf("hop limit: %+v", topo.Switch("p0.t1.0").Counters)
	}
	if topo.Switch("p0.t0.0").Ports[0].Counters.Drops[DropMalformed] != 1 {
		t.Fatal("malformed frame not counted")
	}
	if topo.Pool.Live != 0 {
		t.Fatalf("%d leaked", topo.Pool.Live)
	}
}

func TestZeroLoadLatencyMatchesFabric(t *testing.T) {
	for _, mode := range []ForwardingMode{ForwardECMP, ForwardUSID} {
		// One fabric for both: an idle port forgets its serialization
		// remainder, so the second packet is exact too.
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 2, 2, 2, 2, DefaultOptions(mode))
		hs := attach(topo)
		for _, dst := range []int{1, 3, 2, 3} {
			var path *[16]byte
			if mode == ForwardUSID {
				p := topo.PathUSID(0, dst, 1, 1)
				path = &p
			}
			start := loop.Now()
			f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 1), Dst: topo.HostAddr(dst, 1), Outer: path, Payload: 1000, Stored: -1})
			frame := len(f.Data)
			topo.HostPorts[0][1].Enqueue(f)
			loop.Run()
			got := hs[dst].got[len(hs[dst].got)-1].at - start
			if want := topo.ZeroLoadLatency(0, dst, frame, 20); time.Duration(got) != want {
				t.Fatalf("%v h0→h%d: measured %v, zero-load %v", mode, dst, time.Duration(got), want)
			}
		}
	}
}

// A switch's forwarding latency is paid once per switch traversal: h0→h1
// (one T0) costs one more, h0→h3 (T0, T1, T0) three more, exactly, and
// ZeroLoadLatency counts the same.
func TestSwitchLatencyPerTraversal(t *testing.T) {
	const sw = 700 * time.Nanosecond
	for _, mode := range []ForwardingMode{ForwardECMP, ForwardUSID} {
		lat := map[time.Duration]map[int]time.Duration{}
		for _, s := range []time.Duration{0, sw} {
			loop := sim.NewLoop(sim.Options{Seed: 1})
			topo, err := BuildClos(loop, ClosSpec{Planes: 2, HostsPerT0: 2, T0: 2, T1: 2, HostRate: 100e9, FabricRate: 100e9,
				HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond, SwitchLatency: s}, DefaultOptions(mode))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range topo.Links {
				_, fromSwitch := l.src.Owner.(*Switch)
				if want := map[bool]time.Duration{true: s, false: 0}[fromSwitch]; l.Pipeline != want {
					t.Fatalf("%s: pipeline %v, want %v", l.Name, l.Pipeline, want)
				}
			}
			hs := attach(topo)
			lat[s] = map[int]time.Duration{}
			for _, dst := range []int{1, 3} {
				var path *[16]byte
				if mode == ForwardUSID {
					p := topo.PathUSID(0, dst, 1, 1)
					path = &p
				}
				start := loop.Now()
				f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 1), Dst: topo.HostAddr(dst, 1), Outer: path, Payload: 1000, Stored: -1})
				frame := len(f.Data)
				topo.HostPorts[0][1].Enqueue(f)
				loop.Run()
				got := time.Duration(hs[dst].got[len(hs[dst].got)-1].at - start)
				if want := topo.ZeroLoadLatency(0, dst, frame, 20); got != want {
					t.Fatalf("%v switch latency %v h0→h%d: measured %v, zero-load %v", mode, s, dst, got, want)
				}
				lat[s][dst] = got
			}
			if la, err := topo.Lookahead(); err != nil || time.Duration(la) != time.Microsecond+s {
				t.Fatalf("lookahead %v (%v), want %v", time.Duration(la), err, time.Microsecond+s)
			}
		}
		if d := lat[sw][1] - lat[0][1]; d != sw {
			t.Errorf("%v within T0: +%v, want +%v (one switch)", mode, d, sw)
		}
		if d := lat[sw][3] - lat[0][3]; d != 3*sw {
			t.Errorf("%v across T1: +%v, want +%v (three switches)", mode, d, 3*sw)
		}
	}
}
