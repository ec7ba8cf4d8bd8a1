package fabric

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// genHost is a test NIC for partitioned runs: it sends frames of a burst
// to each of its peers whenever its port is free, and answers every data
// frame it receives with a small echo, so traffic flows both ways and
// queues interact (trims, ECN marks, drops).
type genHost struct {
	id    int
	t     *Topology // the host's partition view (loop, pool)
	peers []int
	left  []int
	next  int
	log   []string
	echo  [][]*Packet // per plane
}

// frame builds a frame from g to host dst in plane (uSID: along path choice).
func (g *genHost) frame(dst, plane, choice, payload, stored int, sport uint16, flow uint32) *Packet {
	f := FrameSpec{Src: g.t.HostAddr(g.id, plane), Dst: g.t.HostAddr(dst, plane), Sport: sport, Flow: flow,
		DSCP: DSCPTrimmable, ECN: ECNECT0, Payload: payload, Stored: stored}
	if g.t.Mode == ForwardUSID {
		u := g.t.PathUSID(g.id, dst, plane, choice%g.t.NumPaths(g.id, dst))
		f.Outer = &u
	}
	return BuildFrame(g.t.Pool, f)
}

func (g *genHost) Ingress(p *Packet, in *Port) {
	g.log = append(g.log, fmt.Sprintf("%d:%d:%d:%d:%d", g.t.Loop.Now(), p.WireLen, p.DSCP(), p.ECN(), p.Flags))
	if p.WireLen > 200 {
		inner := p.Data[offIPv6Src : offIPv6Src+16]
		if p.NextHeader() == ProtoIPv6 {
			inner = p.Data[offIPv6+IPv6HeaderLen+8 : offIPv6+IPv6HeaderLen+24]
		}
		if src, _, ok := g.t.HostOf(inner); ok {
			pl := int(in.Index)
			g.echo[pl] = append(g.echo[pl], g.frame(src, pl, len(g.log), 40, 40, 7, 0))
		}
	}
	p.Release()
	g.pump(in)
}

func (g *genHost) TxReady(pt *Port) { g.pump(pt) }

// pump keeps one frame queued at the NIC port: echoes first, then data.
func (g *genHost) pump(pt *Port) {
	for pt.QueuedBytes() == 0 {
		var p *Packet
		pl := int(pt.Index)
		if len(g.echo[pl]) > 0 {
			p, g.echo[pl] = g.echo[pl][0], g.echo[pl][1:]
		} else {
			i := -1
			for k := range g.peers {
				j := (g.next + k) % len(g.peers)
				if g.left[j] > 0 {
					i = j
					break
				}
			}
			if i < 0 {
				return
			}
			g.next = i + 1
			g.left[i]--
			p = g.frame(g.peers[i], pl, g.left[i], 4000, 64, uint16(g.left[i]), uint32(g.id<<8|i))
		}
		pt.Enqueue(p)
	}
}

type partRun struct {
	prefetched uint64
	csv        []byte
	logs       [][]string
	events     uint64
	end        sim.Time
	cross      uint64
}

// runPartitioned builds the fabric, cuts it into parts (0: not cut: the
// classic single loop), attaches generators and runs it.
func runPartitioned(t *testing.T, build func(*sim.Loop) (*Topology, error), parts, workers, frames int) partRun {
	t.Helper()
	loop := sim.NewLoop(sim.Options{Seed: 3})
	loop.SetPrefetch(!prefetchOff)
	topo, err := build(loop)
	if err != nil {
		t.Fatal(err)
	}
	views := []*Topology{topo}
	hostPart := make([]int, topo.Hosts)
	var pt *Partitioning
	if parts > 0 {
		if pt, err = Partition(topo, parts); err != nil {
			t.Fatal(err)
		}
		views, hostPart = pt.Views, pt.HostPart
	}
	var gens []*genHost
	n := topo.Hosts
	for h := 0; h < n; h++ {
		g := &genHost{id: h, t: views[hostPart[h]], peers: []int{(h*5 + 3) % n, (h + n/2 + 1) % n}}
		if g.peers[0] == h {
			g.peers[0] = (h + 1) % n
		}
		g.left = []int{frames, frames / 2}
		g.echo = make([][]*Packet, topo.Planes)
		for _, p := range topo.HostPorts[h] {
			p.Owner, p.Notify = g, g
		}
		gens = append(gens, g)
	}
	for _, g := range gens {
		g := g
		g.t.Loop.At(0, func() {
			for _, p := range topo.HostPorts[g.id] {
				g.pump(p)
			}
		})
	}
	var r partRun
	if pt == nil {
		loop.Run()
		r.events, r.end, r.prefetched = loop.Executed(), loop.Now(), loop.Prefetched()
		if topo.Pool.Live != 0 {
			t.Fatalf("%d packets leaked", topo.Pool.Live)
		}
	} else {
		par, err := pt.Parallel()
		if err != nil {
			t.Fatal(err)
		}
		par.Run(workers)
		r.events, r.end, r.cross = par.Executed(), par.Now(), pt.CrossFrames()
		r.prefetched = loop.Prefetched()
		if pt.Live() != 0 {
			t.Fatalf("%d packets leaked", pt.Live())
		}
	}
	var b bytes.Buffer
	if err := topo.WriteCountersCSV(&b); err != nil {
		t.Fatal(err)
	}
	for _, l := range topo.Links {
		fmt.Fprintf(&b, "%s %+v\n", l.Name, l.Counters)
	}
	r.csv = b.Bytes()
	for _, g := range gens {
		r.logs = append(r.logs, g.log)
	}
	return r
}

// prefetchOff runs runPartitioned's single loop without Prefetch calls.
var prefetchOff bool

func fatTree4(loop *sim.Loop) (*Topology, error) {
	o := DefaultOptions(ForwardECMP)
	small := *o.FabricPort
	small.BufferBytes = 24 << 10 // congestion: trims and ECN marks
	o.FabricPort, o.HostFacingPort = &small, &small
	return BuildFatTree(loop, FatTreeSpec{K: 4, Rate: 100e9, Delay: time.Microsecond}, o)
}

func clos2(loop *sim.Loop) (*Topology, error) {
	return BuildClos(loop, ClosSpec{Planes: 2, HostsPerT0: 2, T0: 4, T1: 3, HostRate: 100e9, FabricRate: 100e9,
		HostDelay: 500 * time.Nanosecond, FabricDelay: 700 * time.Nanosecond}, DefaultOptions(ForwardUSID))
}

func samePartRun(t *testing.T, name string, got, want partRun) {
	t.Helper()
	if !bytes.Equal(got.csv, want.csv) {
		t.Errorf("%s: port or link counters differ", name)
	}
	if !reflect.DeepEqual(got.logs, want.logs) {
		for h := range got.logs {
			if !reflect.DeepEqual(got.logs[h], want.logs[h]) {
				t.Errorf("%s: host %d received differently", name, h)
				break
			}
		}
	}
	if got.events != want.events || got.end != want.end {
		t.Errorf("%s: %d events to %d ns, want %d to %d", name, got.events, got.end, want.events, want.end)
	}
}

// TestPartitionedFatTreeIdentical: a k=4 fat-tree under congestion gives
// byte-identical counters and per-host arrival logs whether it runs on one
// ranked loop or cut into 2 or 4 partitions on 1, 2 or 4 workers.
func TestPartitionedFatTreeIdentical(t *testing.T) {
	ref := runPartitioned(t, fatTree4, 1, 1, 60)
	if !bytes.Contains(ref.csv, []byte(",")) || ref.events < 10000 {
		t.Fatalf("reference run too small: %d events", ref.events)
	}
	var trims bool
	for _, l := range bytes.Split(ref.csv, []byte("\n"))[1:] {
		if f := bytes.Split(l, []byte(",")); len(f) > 14 && string(f[14]) != "0" {
			trims = true
		}
	}
	if !trims {
		t.Fatal("no trims: the workload does not congest the fabric")
	}
	for _, parts := range []int{2, 4} {
		for _, w := range []int{1, 2, 4} {
			r := runPartitioned(t, fatTree4, parts, w, 60)
			if r.cross == 0 {
				t.Fatalf("parts %d: no frame crossed partitions", parts)
			}
			samePartRun(t, fmt.Sprintf("parts %d workers %d", parts, w), r, ref)
		}
	}
}

// TestPartitionedClosIdentical: the same for a 2-plane Clos with uSID
// forwarding, cut by T0 index.
func TestPartitionedClosIdentical(t *testing.T) {
	ref := runPartitioned(t, clos2, 1, 1, 40)
	for _, parts := range []int{2, 4} {
		for _, w := range []int{1, 2} {
			samePartRun(t, fmt.Sprintf("parts %d workers %d", parts, w), runPartitioned(t, clos2, parts, w, 40), ref)
		}
	}
}

// TestClassicLoopIsRanked: links are ranked from the start (NewLink), so
// the classic single loop — the fabric never cut — orders equal-time
// arrivals the way a partitioned run does: counters and per-host arrival
// logs are byte-identical to the partitioned model's, for both fabrics.
// (Before, the classic loop ordered them by send time and differed.)
func TestClassicLoopIsRanked(t *testing.T) {
	for _, f := range []struct {
		name   string
		build  func(*sim.Loop) (*Topology, error)
		frames int
	}{{"fattree", fatTree4, 60}, {"clos", clos2, 40}} {
		topo, err := f.build(sim.NewLoop(sim.Options{}))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range topo.Links {
			if l.rank != uint32(i+1) {
				t.Fatalf("%s: link %d (%s) has rank %d before any partitioning, want %d", f.name, i, l.Name, l.rank, i+1)
			}
		}
		samePartRun(t, f.name+": classic loop vs 2 partitions", runPartitioned(t, f.build, 0, 1, f.frames), runPartitioned(t, f.build, 2, 1, f.frames))
	}
}

// TestPartitionShape: a k=4 fat-tree in two partitions keeps pods whole,
// cuts only core links (half of them: cores alternate between
// partitions), and has the core links' delay as lookahead.
func TestPartitionShape(t *testing.T) {
	topo, err := fatTree4(sim.NewLoop(sim.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := Partition(topo, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(pt.Cut) != 16 || pt.Lookahead != sim.Time(time.Microsecond) {
		t.Fatalf("%d cut links, lookahead %d", len(pt.Cut), pt.Lookahead)
	}
	for _, l := range pt.Cut {
		if !strings.Contains(l.Name, "core") {
			t.Fatalf("cut %s", l.Name)
		}
	}
	for h, p := range pt.HostPart {
		if want := h / 8; p != want {
			t.Fatalf("host %d in partition %d, want %d", h, p, want)
		}
	}
	if pt.Views[1].Loop != pt.Loops[1] || pt.Views[1].Pool != pt.Pools[1] || pt.Views[0] != topo {
		t.Fatal("views do not carry their partition's loop and pool")
	}
}

func TestPartitionRejects(t *testing.T) {
	loop := sim.NewLoop(sim.Options{})
	topo, err := fatTree4(loop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Partition(topo, 5); err == nil {
		t.Fatal("5 partitions of a k=4 fat-tree accepted")
	}
	topo.HostPorts[0][0].Owner = &recvHost{}
	if _, err := Partition(topo, 2); err == nil {
		t.Fatal("partitioned after hosts attached")
	}
	loop = sim.NewLoop(sim.Options{})
	zero, err := BuildClos(loop, ClosSpec{Planes: 1, HostsPerT0: 1, T0: 2, T1: 1, HostRate: 1e9, FabricRate: 1e9}, DefaultOptions(ForwardECMP))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Partition(zero, 2); err == nil {
		t.Fatal("cut links without delay accepted")
	}
}
