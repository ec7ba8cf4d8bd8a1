package pathquality

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// sink stands in for a NIC: it takes every frame and counts its bytes
// (and, with log set, when each arrived).
type sink struct {
	loop          *sim.Loop
	frames, bytes uint64
	log           bool
	arrivals      []arrival
}

type arrival struct {
	at    sim.Time
	bytes int
}

func (s *sink) Ingress(p *fabric.Packet, _ *fabric.Port) {
	s.frames++
	s.bytes += uint64(p.WireLen)
	if s.log {
		s.arrivals = append(s.arrivals, arrival{s.loop.Now(), p.WireLen})
	}
	p.Release()
}

// rig is a small single-plane Clos with sinks on every host port, on
// one loop, or cut into partitions run by a sim.Parallel (parts > 0).
type rig struct {
	loop     *sim.Loop // the topology's (partition 0's when cut)
	topo     *fabric.Topology
	sinks    []*sink
	sched    sim.Scheduler // the loop, or the Parallel's global events
	par      *sim.Parallel
	workers  int
	hostLoop []*sim.Loop
	hostPool []*fabric.Pool
}

func newRig(t testing.TB, hostsPerT0, t0, t1 int) *rig {
	return newRigParts(t, hostsPerT0, t0, t1, 0, 0)
}

func newRigParts(t testing.TB, hostsPerT0, t0, t1, parts, workers int) *rig {
	t.Helper()
	loop := sim.NewLoop(sim.Options{})
	topo, err := fabric.BuildClos(loop, fabric.ClosSpec{Planes: 1, HostsPerT0: hostsPerT0, T0: t0, T1: t1,
		HostRate: 100e9, FabricRate: 100e9, HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond,
		SwitchLatency: 300 * time.Nanosecond}, fabric.DefaultOptions(fabric.ForwardPathQuality))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{loop: loop, topo: topo, sched: loop, workers: workers}
	for range topo.HostPorts {
		r.hostLoop, r.hostPool = append(r.hostLoop, loop), append(r.hostPool, topo.Pool)
	}
	if parts > 0 {
		pt, err := fabric.Partition(topo, parts)
		if err != nil {
			t.Fatal(err)
		}
		if r.par, err = pt.Parallel(); err != nil {
			t.Fatal(err)
		}
		r.sched = r.par
		for h := range topo.HostPorts {
			r.hostLoop[h], r.hostPool[h] = pt.Views[pt.HostPart[h]].Loop, pt.Pools[pt.HostPart[h]]
		}
	}
	for h := range topo.HostPorts {
		s := &sink{loop: r.hostLoop[h]}
		r.sinks = append(r.sinks, s)
		topo.HostPorts[h][0].Owner = s
	}
	return r
}

// runUntil runs the rig to t.
func (r *rig) runUntil(t sim.Time) {
	if r.par != nil {
		r.par.RunUntil(r.workers, t)
		return
	}
	r.loop.RunUntil(t)
}

// cbr is a constant-bit-rate flow: a frame of payload bytes from host src
// to host dst every interval, from start until stop.
type cbr struct {
	r         *rig
	src, dst  int
	sport     uint16
	payload   int
	interval  time.Duration
	stop      sim.Time
	sent      uint64 // frames
	sentBytes uint64 // wire bytes
}

// startCBR starts a flow of rate bits/s (of wire bytes, FCS included).
func (r *rig) startCBR(src, dst int, sport uint16, payload int, rate float64, start, stop sim.Time) *cbr {
	f := &cbr{r: r, src: src, dst: dst, sport: sport, payload: payload, stop: stop}
	f.interval = time.Duration(float64(f.wireLen()*8) / rate * 1e9)
	r.hostLoop[src].At(start, f.send)
	return f
}

func (f *cbr) wireLen() int {
	return fabric.EthHeaderLen + fabric.IPv6HeaderLen + fabric.UDPHeaderLen + f.payload + 4
}

func (f *cbr) send() {
	loop := f.r.hostLoop[f.src]
	now := loop.Now()
	if now >= f.stop {
		return
	}
	p := fabric.BuildFrame(f.r.hostPool[f.src], fabric.FrameSpec{Src: f.r.topo.HostAddr(f.src, 0), Dst: f.r.topo.HostAddr(f.dst, 0),
		Sport: f.sport, Flow: uint32(f.sport), Payload: f.payload, Stored: 0, Seq: uint32(f.sent)})
	f.sent++
	f.sentBytes += uint64(p.WireLen)
	f.r.topo.HostPorts[f.src][0].Enqueue(p)
	loop.At(now+sim.Time(f.interval), f.send)
}

// spineTx returns the bytes every T1 switch has sent so far (index: T1).
func (r *rig) spineTx() []uint64 {
	var tx []uint64
	for _, s := range r.topo.Switches {
		if s.Tier != 1 {
			continue
		}
		var b uint64
		for _, p := range s.Ports {
			b += p.Counters.TxBytes
		}
		tx = append(tx, b)
	}
	return tx
}

// setCableRate sets both directions of the cable between T0 t0 and T1 t1.
func (r *rig) setCableRate(t0, t1 int, rate uint64) {
	sw := r.topo.Switch("p0.t0." + itoa(t0))
	up := sw.Ports[r.topo.Clos.HostsPerT0+t1]
	up.Tx.Rate = rate
	up.Peer.Tx.Rate = rate
}

func itoa(i int) string { return string(rune('0' + i)) }

func mustNew(t testing.TB, r *rig, c Config) *ControlPlane {
	t.Helper()
	cp, err := New(r.topo, r.sched, c)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// link returns the LinkState of a port by name.
func link(t testing.TB, cp *ControlPlane, port string) LinkState {
	t.Helper()
	for _, l := range cp.Links() {
		if l.Port == port {
			return l
		}
	}
	t.Fatalf("no link %s", port)
	return LinkState{}
}

// route returns the RouteState of (switch, subnet).
func route(t testing.TB, cp *ControlPlane, sw string, subnet int) RouteState {
	t.Helper()
	for _, r := range cp.Routes() {
		if r.Switch == sw && r.Subnet == subnet {
			return r
		}
	}
	t.Fatalf("no route %s → %d", sw, subnet)
	return RouteState{}
}
