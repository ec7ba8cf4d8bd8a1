package faults

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/sim"
)

// throughput runs the workload under plan (nil: none) and returns the
// aggregate throughput in bits/s the hosts' NIC ports received between
// from and to (steady state: after the transports moved off the failure).
// t8MPR: T8 is about capacity, so the QP's window must fill an 800G NIC.
// The spec's one MPR unit (128 PSNs of 4 KiB) covers about 0.55 BDP of
// 800G at this fabric's ~9.4 µs RTT (one QP then reaches ~59% of the
// NIC, and losing a port costs it nothing); 4 units cover NSCC's 1.5 BDP
// maximum window.
const t8MPR = "transport.mrc.mprUnits=4"

func throughput(t *testing.T, sets []string, w Workload, plan string, from, to sim.Time) float64 {
	t.Helper()
	var p *Plan
	if plan != "" {
		p = mustPlan(t, plan)
	}
	var b0, b1 uint64
	rx := func(c *cluster.Cluster) uint64 {
		var n uint64
		for _, hp := range c.Topo.HostPorts {
			for _, pt := range hp {
				n += pt.Counters.RxBytes
			}
		}
		return n
	}
	s, err := Drill(load(t, sets...), DrillOptions{Plan: p, Workload: w, OnCluster: func(c *cluster.Cluster) {
		c.Loop.At(from, func() { b0 = rx(c) })
		c.Loop.At(to, func() { b1 = rx(c) })
	}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Completed != s.Transfers || s.JobNs == 0 || sim.Time(s.JobNs) < to {
		t.Fatalf("%d/%d transfers completed (%s) at %v, want the job to outlast %v", s.Completed, s.Transfers, s.TransportOutcome, time.Duration(s.JobNs), to)
	}
	return float64(b1-b0) * 8 / (float64(to-from) / 1e9)
}

// T8 blast radius, measured as throughput before and after (MRC, uSID).
func TestT8BlastRadius(t *testing.T) {
	if testing.Short() {
		t.Skip("T8 moves a few hundred MB of simulated traffic")
	}
	// One NIC port of a host: 1/planes of its capacity.
	for _, c := range []struct {
		planes int
		want   float64
	}{{8, 0.125}, {4, 0.25}} {
		sets := []string{"fabric.planes=" + fmt.Sprint(c.planes), "fabric.hosts=16", "fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G",
			"transport.kind=mrc", "transport.payload=elided", t8MPR}
		w := Workload{Pattern: "p2p", Src: 0, Dst: 15, Bytes: 32 << 20}
		before := throughput(t, sets, w, "", 100*sim.Microsecond, 300*sim.Microsecond)
		after := throughput(t, sets, w, "events:\n  - {at: 0, kind: nic_down, target: nic:h0/p0}\n", 100*sim.Microsecond, 300*sim.Microsecond)
		lost := 1 - after/before
		t.Logf("%d×100G planes, one NIC port down: %.1f → %.1f Gb/s, capacity lost %.2f%% (TARGETS T8: %.1f%%)", c.planes, before/1e9, after/1e9, 100*lost, 100*c.want)
		if math.Abs(lost-c.want) > 0.01 {
			t.Errorf("NIC port on %d planes: lost %.2f%%, want %.1f%% ± 1 pp", c.planes, 100*lost, 100*c.want)
		}
	}
	// One T0–T1 cable: 1/(planes × T1s) of the T0's uplink capacity. 8
	// planes × 32 T1s (the paper's 0.4%) and one plane of 800G with 32 T1s
	// (3%): 32 hosts under each of 2 T0s, every host sending to one under
	// the other T0, so the uplinks are the bottleneck.
	lostBy := map[int]float64{}
	for _, c := range []struct {
		planes int
		speed  string
		want   float64
	}{{8, "100G", 1.0 / 256}, {1, "800G", 1.0 / 32}} {
		sets := []string{fmt.Sprintf("fabric.planes=%d", c.planes), "fabric.hostsPerT0=32", "fabric.t0PerPlane=2", "fabric.t1PerPlane=32", "fabric.hosts=64",
			"fabric.hostLinkSpeed=" + c.speed, "fabric.fabricLinkSpeed=" + c.speed, "transport.kind=mrc", "transport.payload=elided", t8MPR}
		w := Workload{Pattern: "shift", Bytes: 40 << 20}
		// Three seeds: one run pair's difference is dominated by how the
		// flows' windows happen to evolve (±4% at 8 planes since issue #16's
		// default ECN and loss rule), far above a 0.4% effect.
		var before, after float64
		for seed := 1; seed <= 3; seed++ {
			ss := append(slices.Clone(sets), fmt.Sprintf("seed=%d", seed))
			before += throughput(t, ss, w, "", 250*sim.Microsecond, 400*sim.Microsecond)
			after += throughput(t, ss, w, "events:\n  - {at: 0, kind: link_down, target: link:p0.t0.0-p0.t1.0}\n", 250*sim.Microsecond, 400*sim.Microsecond)
		}
		before, after = before/3, after/3
		lost := 1 - after/before
		t.Logf("%d×%s planes, 32 T1s, one T0–T1 cable down: %.1f → %.1f Gb/s, capacity lost %.2f%% (TARGETS T8: %.1f%%)", c.planes, c.speed, before/1e9, after/1e9, 100*lost, 100*c.want)
		// 8 planes: 0.4% is below what these windows resolve — measured
		// −1.5% (the run without the cable faster) over seeds 1–3 since issue
		// #16 (−0.03% before, one seed) — so it is held to ±2 pp and to
		// costing at least 1 pp less than the single 800G plane.
		// One 800G plane: a cut costs at least the capacity it removes and,
		// while its EVs are being taken out, up to 2 pp more (4.87% with
		// htsim's ECN, issue #16's default for MRC; 3.15% with the
		// earlier 37.5/150 KB thresholds).
		lo, hi := c.want-0.01, c.want+0.02
		if c.planes == 8 {
			lo = c.want - 0.02
		}
		if lost < lo || lost > hi {
			t.Errorf("T0–T1 cable on %d planes: lost %.2f%%, want %.2f%% (%.2f%% .. %.2f%%)", c.planes, 100*lost, 100*c.want, 100*lo, 100*hi)
		}
		lostBy[c.planes] = lost
	}
	if lostBy[8] > lostBy[1]-0.01 {
		t.Errorf("one T0–T1 cable cost 8×100G planes %.2f%% and one 800G plane %.2f%%: want the 8 planes at least 1 pp less", 100*lostBy[8], 100*lostBy[1])
	}
}
