package faults

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/sim"
)

// capacityRun sends size bytes h0 → h1 over a one-path Clos (h0 – T0 0 –
// T1 0 – T0 1 – h1, 100G) under plan (nil: no fault) and returns the
// transfer's time and the rates of the T0 0 – T1 0 cable during the run
// and after it.
func capacityRun(t *testing.T, plan string, size uint64) (took sim.Time, mid, after [2]uint64) {
	t.Helper()
	cfg := load(t, "fabric.topology=clos", "fabric.planes=1", "fabric.hostsPerT0=1", "fabric.t0PerPlane=2", "fabric.t1PerPlane=1",
		"fabric.forwarding=ecmp", "transport.kind=roce", "transport.payload=real", "host.netstack=false", "seed=3",
		// Lossless and unmarked: the transfer runs at the bottleneck's rate, whatever the congestion control.
		"fabric.queue.pfc.enabled=true", "fabric.queue.ecn.enabled=false")
	c, err := cluster.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	up := c.Topo.Port("p0.t0.0/1")
	rates := func() [2]uint64 { return [2]uint64{up.Tx.Rate, up.Peer.Tx.Rate} }
	if plan != "" {
		in, err := NewInjector(c.Topo, c.Scheduler(), mustPlan(t, plan), cfg.Seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		in.Start()
	}
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(i*7 + i>>9)
		}
	}
	ps, err := c.Connect(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := c.Region(0, size, fill), c.Region(1, size, nil)
	c.Loop.At(10*sim.Microsecond, func() { mid = rates() })
	tr, err := c.StartTransfer(ps[0], src, dst, size, size/4)
	if err != nil {
		t.Fatal(err)
	}
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	c.Loop.RunUntil(c.Loop.Now() + 5*sim.Millisecond) // past every fault's end
	if len(tr.Errors) > 0 || tr.Completed != size || !bytes.Equal(src.Buf, dst.Buf) {
		t.Fatalf("transfer: %d errors, %d of %d bytes, data equal %v", len(tr.Errors), tr.Completed, size, bytes.Equal(src.Buf, dst.Buf))
	}
	return tr.End - tr.Start, mid, rates()
}

// A degrade's capacity slows the link's serialization in the directions
// it names (both by default) while it lasts: a transfer across a 25%
// link, the path's only one, takes about 4× as long, and the data arrive
// intact; the rate is back at the end.
func TestDegradeCapacity(t *testing.T) {
	const size = 2 << 20
	base, _, full := capacityRun(t, "", size)
	const g = 100_000_000_000
	if full != [2]uint64{g, g} {
		t.Fatalf("cable rates %v, want 100G both ways", full)
	}
	for _, tc := range []struct {
		params string
		mid    [2]uint64 // T0 0 → T1 0 (the data's direction), T1 0 → T0 0
		ratio  float64   // the transfer's time over the full-rate time
	}{
		{"{capacity: 25%}", [2]uint64{g / 4, g / 4}, 4},
		{"{capacity: 0.25, direction: forward}", [2]uint64{g / 4, g}, 4},
		{"{capacity: 0.25, direction: reverse}", [2]uint64{g, g / 4}, 1}, // only the ACKs' way
		{"{capacity: 50%, loss: 0%}", [2]uint64{g / 2, g / 2}, 2},        // both ways though loss's default is forward
	} {
		plan := fmt.Sprintf("events:\n  - at: 0s\n    duration: 3ms\n    kind: degrade\n    target: link:p0.t0.0-p0.t1.0\n    params: %s\n", tc.params)
		took, mid, after := capacityRun(t, plan, size)
		if mid != tc.mid {
			t.Errorf("%s: rates during the fault %v, want %v", tc.params, mid, tc.mid)
		}
		if after != full {
			t.Errorf("%s: rates after the fault %v, want %v back", tc.params, after, full)
		}
		ratio := float64(took) / float64(base)
		t.Logf("%s: %v vs %v at full rate (×%.2f)", tc.params, took, base, ratio)
		if ratio < 0.9*tc.ratio || ratio > 1.1*tc.ratio {
			t.Errorf("%s: the transfer took ×%.2f the full-rate time, want ≈ %g (serialization at the degraded rate)", tc.params, ratio, tc.ratio)
		}
	}
}

// Two capacity faults on one link multiply, and each end restores only
// its own share.
func TestDegradeCapacityStacks(t *testing.T) {
	plan := "events:\n  - at: 0s\n    duration: 3ms\n    kind: degrade\n    target: link:p0.t0.0-p0.t1.0\n    params: {capacity: 50%}\n" +
		"  - at: 0s\n    duration: 4ms\n    kind: degrade\n    target: link:p0.t0.0-p0.t1.0\n    params: {capacity: 50%, direction: forward}\n"
	_, mid, after := capacityRun(t, plan, 256<<10)
	const g = 100_000_000_000
	if mid != [2]uint64{g / 4, g / 2} || after != [2]uint64{g, g} {
		t.Fatalf("rates during %v (want [25G 50G]), after %v (want 100G back)", mid, after)
	}
}

func TestDegradeCapacityRejected(t *testing.T) {
	for _, v := range []string{"0", "0%", "-0.5", "1.5", "101%", "fast", "NaN"} {
		_, err := ParsePlan("p.yaml", []byte("events:\n  - at: 0s\n    kind: degrade\n    target: link:p0.t0.0-p0.t1.0\n    params: {capacity: "+v+"}\n"))
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte("capacity")) {
			t.Errorf("capacity %s: %v, want an error naming capacity", v, err)
		}
	}
}

// Under forwarding pathquality a capacity fault is what the control plane
// sees: the degraded uplink's capacity reads 25%, T0 0 weighs it below
// its other uplinks toward a remote subnet while the fault lasts, and
// the weights come back even after it.
func TestDegradeCapacityPathQuality(t *testing.T) {
	cfg := load(t, "fabric.topology=clos", "fabric.planes=1", "fabric.hostsPerT0=2", "fabric.t0PerPlane=2", "fabric.t1PerPlane=4",
		"fabric.forwarding=pathquality", "transport.kind=roce", "host.netstack=false",
		"fabric.pathQuality.samplePeriod=5us", "fabric.pathQuality.advertisePeriod=10us", "fabric.pathQuality.controlDelay=1us")
	c, err := cluster.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in, err := NewInjector(c.Topo, c.Scheduler(), mustPlan(t, "events:\n  - at: 50us\n    duration: 200us\n    kind: degrade\n    target: link:p0.t0.0-p0.t1.1\n    params: {capacity: 25%}\n"), cfg.Seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.Start()
	t0 := c.Topo.Switch("p0.t0.0")
	up := c.Topo.Port("p0.t0.0/3") // hosts on ports 0–1, then T1 0..3: T1 1
	remote := 1 - t0.LocalSubnet()
	share := func() (degraded float64, others []float64) {
		w, _ := t0.PathWeights(remote)
		for i, p := range t0.NextHops(remote) {
			if i >= len(w) {
				break
			}
			if t0.Ports[p] == up {
				degraded = w[i]
			} else {
				others = append(others, w[i])
			}
		}
		return degraded, others
	}
	capacity := func() float64 {
		for _, l := range c.PathQuality.Links() {
			if l.Switch == t0.Name && l.Port == up.Name {
				return l.CapacityGbps
			}
		}
		t.Fatalf("no link state for %s", up.Name)
		return 0
	}
	c.Loop.RunUntil(200 * sim.Microsecond)
	d, others := share()
	if got := capacity(); got != 25 {
		t.Errorf("during the fault: capacity %g Gb/s, want 25 (100G × 25%%)", got)
	}
	if len(others) != 3 {
		t.Fatalf("weights toward subnet %d: degraded %g, others %v", remote, d, others)
	}
	for _, o := range others {
		if !(d < o) {
			t.Errorf("during the fault: the degraded uplink weighs %g, another %g", d, o)
		}
	}
	c.Loop.RunUntil(400 * sim.Microsecond)
	d2, others2 := share()
	if got := capacity(); got != 100 {
		t.Errorf("after the fault: capacity %g Gb/s, want 100", got)
	}
	for _, o := range others2 {
		if d2 < 0.9*o {
			t.Errorf("after the fault: the uplink weighs %g, another %g (not back)", d2, o)
		}
	}
	t.Logf("weights toward subnet %d: during %g vs %v, after %g vs %v", remote, d, others, d2, others2)
}
