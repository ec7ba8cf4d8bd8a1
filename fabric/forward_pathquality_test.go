package fabric

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// pqFlows is how many distinct flows the split tests hash.
const pqFlows = 20000

// flowFrame builds flow i from host src to host dst (distinct source
// ports and flow labels).
func flowFrame(topo *Topology, src, dst, i int) *Packet {
	return BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(src, 0), Dst: topo.HostAddr(dst, 0),
		Sport: uint16(1024 + i%60000), Flow: uint32(i * 7919), Payload: 200, Stored: 0})
}

// hops returns the egress port switch s's forwarding mode picks for
// flows 0..n-1 from src to dst.
func hops(s *Switch, topo *Topology, src, dst, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		p := flowFrame(topo, src, dst, i)
		out[i] = s.next(s, p)
		p.Release()
	}
	return out
}

// share returns the fraction of hs equal to port.
func share(hs []int32, port int32) float64 {
	n := 0
	for _, h := range hs {
		if h == port {
			n++
		}
	}
	return float64(n) / float64(len(hs))
}

// binomialTol is the tolerance of a measured share p of n flows whose
// buckets are a uniform hash: 5 standard deviations of a binomial
// proportion (±0.015 at p = 0.25, n = 20000). The seeds are fixed, so it
// cannot flake; it checks that flows land where the buckets say, in
// proportion. A table one bucket off (1/256) would pass it: the bucket
// counts are asserted exactly instead.
func binomialTol(p float64, n int) float64 { return 5 * math.Sqrt(p*(1-p)/float64(n)) }

// TestPathQualityUnweightedIsECMP: without weights every switch of a
// pathquality fabric picks exactly the port an ECMP fabric's does, for
// every flow, and so it does with equal weights set; weights toward one
// subnet leave the others on ECMP.
func TestPathQualityUnweightedIsECMP(t *testing.T) {
	ecmp := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 2, 3, 2, DefaultOptions(ForwardECMP))
	pq := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 2, 3, 2, DefaultOptions(ForwardPathQuality))
	same := func(what string) {
		t.Helper()
		for i, s := range pq.Switches {
			for _, dst := range []int{1, 3, 5} {
				got, want := hops(s, pq, 0, dst, 2000), hops(ecmp.Switches[i], ecmp, 0, dst, 2000)
				for f := range got {
					if got[f] != want[f] {
						t.Fatalf("%s: %s flow %d to host %d: port %d, ECMP %d", what, s.Name, f, dst, got[f], want[f])
					}
				}
			}
		}
	}
	same("unweighted")
	// Equal weights set on every multipath group: a new table interleaves
	// the members (bucket b → member b mod n), so with n a power of two
	// every flow still takes ECMP's next hop.
	for _, s := range pq.Switches {
		for d := 0; d < s.NumSubnets(); d++ {
			if g := s.NextHops(d); len(g) > 1 {
				if _, err := s.SetPathWeights(d, []float64{7, 7}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	same("equal weights")
	// The comparison is not trivial: T0 0 spreads over both uplinks.
	t0 := pq.Switch("p0.t0.0")
	g := t0.NextHops(1)
	if sh := share(hops(t0, pq, 0, 3, 2000), g[0]); sh < 0.4 || sh > 0.6 {
		t.Fatalf("ECMP share of uplink 0: %.3f", sh)
	}
	if _, err := t0.SetPathWeights(1, []float64{1, 3}); err != nil {
		t.Fatal(err)
	}
	ecmpT0 := ecmp.Switch("p0.t0.0")
	got, want := hops(t0, pq, 0, 5, 2000), hops(ecmpT0, ecmp, 0, 5, 2000) // subnet 2: unweighted
	for f := range got {
		if got[f] != want[f] {
			t.Fatalf("subnet 2 after weighting subnet 1: flow %d on %d, ECMP %d", f, got[f], want[f])
		}
	}
}

// TestPathQualityWeightedSplit: weights 1:3 give the next hops 64 and 192
// buckets, and distinct flows split ≈ 25/75, both in the next-hop
// function and in frames that cross the fabric.
func TestPathQualityWeightedSplit(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 2, DefaultOptions(ForwardPathQuality))
	t0 := topo.Switch("p0.t0.0")
	g := t0.NextHops(1)
	moved, err := t0.SetPathWeights(1, []float64{1, 3})
	if err != nil || moved != PathBuckets {
		t.Fatalf("first SetPathWeights: moved %d, %v", moved, err)
	}
	w, b := t0.PathWeights(1)
	if len(b) != 2 || b[0] != 64 || b[1] != 192 || w[0] != 1 || w[1] != 3 {
		t.Fatalf("weights %v buckets %v, want [1 3] and [64 192]", w, b)
	}
	hs := hops(t0, topo, 0, 2, pqFlows)
	if sh, tol := share(hs, g[0]), binomialTol(0.25, pqFlows); math.Abs(sh-0.25) > tol {
		t.Errorf("share of the weight-1 hop %.4f, want 0.25 ± %.4f", sh, tol)
	}
	if sh := share(hs, g[0]) + share(hs, g[1]); sh != 1 {
		t.Errorf("flows off the group: %.4f on it", sh)
	}
	// The same through the fabric: frames of distinct flows, counted on
	// the uplinks.
	rs := attach(topo)
	const n = 4000
	for i := 0; i < n; i++ {
		topo.HostPorts[0][0].Enqueue(flowFrame(topo, 0, 2, i))
		if i%64 == 63 {
			loop.Run()
		}
	}
	loop.Run()
	if len(rs[2].got) != n {
		t.Fatalf("%d of %d frames arrived", len(rs[2].got), n)
	}
	up0, up1 := t0.Ports[g[0]].Counters.TxPackets, t0.Ports[g[1]].Counters.TxPackets
	if sh, tol := float64(up0)/n, binomialTol(0.25, n); up0+up1 != n || math.Abs(sh-0.25) > tol {
		t.Errorf("uplinks carried %d and %d frames (share %.4f, want 0.25 ± %.4f)", up0, up1, sh, tol)
	}
}

// TestPathQualityResilient: changing the weights moves exactly the
// buckets the counts must change by (|Δ|/2 of them), and a flow whose
// bucket kept its owner keeps its next hop.
func TestPathQualityResilient(t *testing.T) {
	topo := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 2, 2, 4, DefaultOptions(ForwardPathQuality))
	t0 := topo.Switch("p0.t0.0")
	if _, err := t0.SetPathWeights(1, []float64{1, 3, 2, 2}); err != nil {
		t.Fatal(err)
	}
	tbl := t0.pw.bySubnet[1]
	for step, w := range [][]float64{{1, 1, 1, 1}, {0, 1, 1, 2}, {0, 1, 1, 2}, {5, 1, 0, 2}, {1, 3, 2, 2}} {
		beforeBuckets, beforeCounts := tbl.buckets, append([]int(nil), tbl.counts...)
		beforeHops := hops(t0, topo, 0, 2, pqFlows)
		moved, err := t0.SetPathWeights(1, w)
		if err != nil {
			t.Fatal(err)
		}
		if t0.pw.bySubnet[1] != tbl {
			t.Fatalf("step %d: the table was rebuilt, not updated", step)
		}
		_, counts := t0.PathWeights(1)
		delta := 0
		for m := range counts {
			delta += abs(counts[m] - beforeCounts[m])
		}
		changed := 0
		for b := range tbl.buckets {
			if tbl.buckets[b] != beforeBuckets[b] {
				changed++
			}
		}
		if moved != delta/2 || changed != moved {
			t.Errorf("step %d %v: moved %d, %d buckets changed, counts %v → %v (|Δ|/2 = %d)", step, w, moved, changed, beforeCounts, counts, delta/2)
		}
		// Flows keep their hop unless their bucket moved; the fraction
		// that moved is about the fraction of buckets that did.
		after := hops(t0, topo, 0, 2, pqFlows)
		g := t0.NextHops(1)
		flowsMoved := 0
		for f := range after {
			p := flowFrame(topo, 0, 2, f)
			b := ecmpHash(p, t0.seed) % PathBuckets
			p.Release()
			if tbl.buckets[b] == beforeBuckets[b] && after[f] != beforeHops[f] {
				t.Fatalf("step %d: flow %d changed hop with its bucket %d unmoved", step, f, b)
			}
			if after[f] != g[tbl.buckets[b]] {
				t.Fatalf("step %d: flow %d on %d, its bucket says %d", step, f, after[f], g[tbl.buckets[b]])
			}
			if after[f] != beforeHops[f] {
				flowsMoved++
			}
		}
		if p, sh := float64(moved)/PathBuckets, float64(flowsMoved)/pqFlows; math.Abs(sh-p) > binomialTol(p, pqFlows)+1e-12 {
			t.Errorf("step %d: %.4f of the flows moved, %.4f of the buckets", step, sh, p)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestPathQualityZeroWeights: a zero weight gets no bucket and no flow;
// all-zero weights split equally; finite weights whose sum overflows
// split in proportion.
func TestPathQualityZeroWeights(t *testing.T) {
	topo := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 2, 2, 3, DefaultOptions(ForwardPathQuality))
	t0 := topo.Switch("p0.t0.0")
	g := t0.NextHops(1)
	if _, err := t0.SetPathWeights(1, []float64{1, 0, 2}); err != nil {
		t.Fatal(err)
	}
	_, b := t0.PathWeights(1)
	hs := hops(t0, topo, 0, 2, pqFlows)
	if b[1] != 0 || b[0]+b[2] != PathBuckets || share(hs, g[1]) != 0 {
		t.Errorf("weight 0: buckets %v, share %.4f on it", b, share(hs, g[1]))
	}
	if p := float64(b[2]) / PathBuckets; math.Abs(share(hs, g[2])-p) > binomialTol(p, pqFlows) {
		t.Errorf("weight 2 of 3: share %.4f, its buckets' %.4f", share(hs, g[2]), p)
	}
	if _, err := t0.SetPathWeights(1, []float64{0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	_, b = t0.PathWeights(1)
	hs = hops(t0, topo, 0, 2, pqFlows)
	for m := range b {
		if b[m] < PathBuckets/3 || b[m] > PathBuckets/3+1 {
			t.Errorf("all zero: buckets %v, want equal", b)
		}
		if p, sh := float64(b[m])/PathBuckets, share(hs, g[m]); math.Abs(sh-p) > binomialTol(p, pqFlows) {
			t.Errorf("all zero: share of hop %d %.4f, its buckets' %.4f", m, sh, p)
		}
	}
	if _, err := t0.SetPathWeights(1, []float64{math.MaxFloat64, math.MaxFloat64, 0}); err != nil {
		t.Fatal(err)
	}
	if _, b = t0.PathWeights(1); b[0] != 128 || b[1] != 128 || b[2] != 0 {
		t.Errorf("weights summing past MaxFloat64: buckets %v, want [128 128 0]", b)
	}
}

// TestPathQualityInvalidWeights: NaN, infinite, negative weights and a
// wrong count are rejected and leave the table as it was; so is a subnet
// without a next-hop group.
func TestPathQualityInvalidWeights(t *testing.T) {
	topo := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 2, 2, 2, DefaultOptions(ForwardPathQuality))
	t0 := topo.Switch("p0.t0.0")
	if _, err := t0.SetPathWeights(1, []float64{1, 3}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		subnet int
		w      []float64
		says   string
	}{
		{1, []float64{math.NaN(), 1}, "weight 0 is NaN"},
		{1, []float64{1, -0.5}, "weight 1 is -0.5"},
		{1, []float64{math.Inf(1), 1}, "weight 0 is +Inf"},
		{1, []float64{1}, "1 weights for 2 next hops"},
		{1, []float64{1, 1, 1}, "3 weights for 2 next hops"},
		{0, []float64{1, 1}, "no next-hop group toward subnet 0"}, // its own
		{7, []float64{1, 1}, "no next-hop group toward subnet 7"},
	} {
		moved, err := t0.SetPathWeights(c.subnet, c.w)
		if err == nil || !strings.Contains(err.Error(), c.says) || moved != 0 {
			t.Errorf("subnet %d %v: %d, %v; want an error saying %q", c.subnet, c.w, moved, err, c.says)
		}
		if w, b := t0.PathWeights(1); w[0] != 1 || w[1] != 3 || b[0] != 64 || b[1] != 192 {
			t.Fatalf("a rejected call changed the table: %v %v", w, b)
		}
	}
}

// TestPathQualityReconvergence: when reconvergence replaces a weighted
// group (a cable of one of three T1s down), the switch forwards as ECMP
// over the new group, exactly as an ECMP fabric with the same cut; new
// weights then apply to the new group. A second replacement by a group of
// the same size (that cable back, another one down) falls back to ECMP
// again: the table belongs to the group it was built for, not its size.
func TestPathQualityReconvergence(t *testing.T) {
	const delay = time.Millisecond
	type side struct {
		topo *Topology
		t0   *Switch
	}
	var fs [2]side
	for i, mode := range []ForwardingMode{ForwardPathQuality, ForwardECMP} {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 1, 2, 2, 3, DefaultOptions(mode))
		topo.SetReconvergence(delay, loop)
		fs[i] = side{topo, topo.Switch("p0.t0.0")}
	}
	pq, t0 := fs[0].topo, fs[0].t0
	// cable sets T1 k's cable to T0 1 up or down in both fabrics and lets
	// reconvergence run.
	cable := func(k int, up bool) {
		for _, f := range fs {
			c := f.topo.Switch(fmt.Sprintf("p0.t1.%d", k)).Ports[1]
			c.Tx.SetUp(up)
			c.Peer.Tx.SetUp(up)
			f.topo.Loop.RunUntil(f.topo.Loop.Now() + sim.Time(2*delay))
		}
	}
	asECMP := func(when string, members int) []int32 {
		t.Helper()
		g := t0.NextHops(1)
		if len(g) != members {
			t.Fatalf("%s: T0 0's group toward subnet 1 %v, want %d members", when, g, members)
		}
		if w, b := t0.PathWeights(1); w != nil || b != nil {
			t.Fatalf("%s: weights of a replaced group still reported: %v %v", when, w, b)
		}
		got, want := hops(t0, pq, 0, 2, 4000), hops(fs[1].t0, fs[1].topo, 0, 2, 4000)
		for f := range got {
			if got[f] != want[f] {
				t.Fatalf("%s: flow %d on %d, ECMP over the new group %d", when, f, got[f], want[f])
			}
		}
		if sh := share(got, g[0]); sh < 0.4 || sh > 0.6 {
			t.Fatalf("%s: share of the first hop %.3f", when, sh)
		}
		return g
	}
	if _, err := t0.SetPathWeights(1, []float64{1, 3, 4}); err != nil {
		t.Fatal(err)
	}
	cable(0, false)
	g := asECMP("T1 0 cut", 2)
	if moved, err := t0.SetPathWeights(1, []float64{0, 1}); err != nil || moved != PathBuckets {
		t.Fatalf("weights on the new group: moved %d, %v", moved, err)
	}
	if sh := share(hops(t0, pq, 0, 2, 4000), g[1]); sh != 1 {
		t.Fatalf("weights [0 1] on the new group: %.3f on hop 1", sh)
	}
	cable(0, true)
	cable(1, false)
	asECMP("T1 0 back, T1 1 cut", 2)
}

// TestPathQualityNoAllocs: forwarding frames across a weighted fabric
// allocates nothing per frame.
func TestPathQualityNoAllocs(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 2, DefaultOptions(ForwardPathQuality))
	for _, s := range topo.Switches {
		for sub := 0; sub < s.NumSubnets(); sub++ {
			if g := s.NextHops(sub); len(g) > 1 {
				if _, err := s.SetPathWeights(sub, []float64{1, 3}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	hs := attach(topo)
	for _, h := range hs {
		h.onRecv = func(p *Packet, _ *Port) bool { p.Release(); return true }
	}
	frames := make([]*Packet, 0, 64)
	i := 0
	run := func() {
		frames = frames[:0]
		for k := 0; k < 64; k++ {
			frames = append(frames, flowFrame(topo, 0, 2, i))
			i++
		}
		for _, p := range frames {
			topo.HostPorts[0][0].Enqueue(p)
		}
		loop.Run()
	}
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Fatalf("%v allocations per 64 frames", n)
	}
	if topo.Switch("p0.t0.0").Counters.Forwarded < 64*50 {
		t.Fatal("frames not forwarded")
	}
}
