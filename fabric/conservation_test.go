package fabric_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// conservation scenarios: paper cluster C scaled down (16 hosts, 4 planes
// × 100G), MRC on uSID with trimming and small buffers, and RoCE on ECMP
// over a lossless class (PFC pauses and their frames).
var conservationRuns = []struct {
	name  string
	sets  []string
	loss  float64
	bytes uint64
}{
	// A buffer below the default preset's 200 KB Kmax: thresholds that fit.
	// 4 MPR units: with the spec's one unit (128 PSNs) too little is in
	// flight for queues to hold frames at the mid-run snapshot.
	{"mrc", []string{"transport.kind=mrc", "fabric.queue.bufferBytes=160000", "transport.mrc.mprUnits=4",
		"fabric.queue.ecn.kminBytes=37500", "fabric.queue.ecn.kmaxBytes=150000", "fabric.queue.ecn.pmax=0.2"}, 0.01, 4 << 20},
	{"roce-pfc", []string{"transport.kind=roce", "fabric.forwarding=ecmp", "fabric.queue.pfc.enabled=true",
		"fabric.queue.pfc.xoffBytes=20000", "fabric.queue.pfc.xonBytes=10000"}, 0.001, 1 << 20},
}

// conservedCluster builds a scenario's cluster on the classic loop (parts
// 0) or partitioned.
func conservedCluster(t *testing.T, sets []string, parts int) *cluster.Cluster {
	t.Helper()
	cfg, err := config.Load("", append([]string{"fabric.preset=C", "fabric.hosts=16", "transport.payload=elided", "host.netstack=false", "seed=5"}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	var c *cluster.Cluster
	if parts > 0 {
		c, err = cluster.NewPartitioned(cfg, parts, 2)
	} else {
		c, err = cluster.NewForWorkers(cfg, 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// uplink returns the cable from T0 t0 to T1 t1 in plane.
func uplink(t *testing.T, topo *fabric.Topology, plane, t0, t1 int) *fabric.Port {
	t.Helper()
	for _, p := range topo.Switches {
		if p.Tier != 0 || p.Plane != plane || p.Index != t0 {
			continue
		}
		for _, pt := range p.Ports {
			if s, ok := pt.Peer.Owner.(*fabric.Switch); ok && s.Tier == 1 && s.Index == t1 {
				return pt
			}
		}
	}
	t.Fatalf("no cable plane %d t0 %d t1 %d", plane, t0, t1)
	return nil
}

// faultedWorkload starts transfers of n bytes on c — an incast of four
// hosts onto host 0 (queues fill, packets trim or PFC pauses) and cross
// traffic — with Bernoulli loss on every link, bit errors on every link,
// and in every plane a T0–T1 cable down from 20 to 90 µs, a T1 down
// (rebooting) from 30 to 80 µs and a black hole toward T0 0 at another T1
// from 10 to 120 µs; it returns the transfers.
func faultedWorkload(t *testing.T, c *cluster.Cluster, loss float64, n uint64) []*cluster.Transfer {
	t.Helper()
	topo := c.Topo
	for _, l := range topo.Links {
		l.Loss = fabric.NewBernoulli(loss, 5, l.Name)
		l.Corr = fabric.NewBitErrors(1e-7, 5, l.Name)
	}
	sch := c.Scheduler()
	for plane := 0; plane < topo.Planes; plane++ {
		cable := uplink(t, topo, plane, 1, 2)
		reboot := topo.Switch(fmt.Sprintf("p%d.t1.1", plane))
		hole := topo.Switch(fmt.Sprintf("p%d.t1.0", plane))
		sid := uint16(0) // subnet 0: T0 0
		if topo.Mode == fabric.ForwardUSID {
			sid = fabric.USID(plane, fabric.USIDT0, 0)
		}
		sch.At(20*sim.Microsecond, func() { cable.Tx.SetUp(false); cable.Peer.Tx.SetUp(false) })
		sch.At(90*sim.Microsecond, func() { cable.Tx.SetUp(true); cable.Peer.Tx.SetUp(true) })
		sch.At(30*sim.Microsecond, func() { reboot.SetDown(true) })
		sch.At(80*sim.Microsecond, func() { reboot.SetDown(false) })
		sch.At(10*sim.Microsecond, func() { hole.BlackHole(sid, 0.5) })
		sch.At(120*sim.Microsecond, func() { hole.BlackHole(0, 0) })
	}
	var trs []*cluster.Transfer
	for _, pr := range [][2]int{{4, 0}, {8, 0}, {12, 0}, {13, 0}, {1, 14}, {15, 5}, {6, 10}} {
		ps, err := c.Connect(pr[0], pr[1])
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.StartTransfer(ps[0], c.Region(pr[0], n, nil), c.Region(pr[1], n, nil), n, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	return trs
}

// Every frame sent into the fabric is, at any instant, delivered, dropped
// (for a counted reason), lost, or in flight on a link or in a queue:
// checked every 2 µs of a run with loss, bit errors, a cable and a switch
// going down and a black hole (frames in flight at many of the checks),
// when the transfers completed, and once the fabric drained. On the
// classic loop the frames in flight must also be exactly the packets the
// pool has out. Partitioned, frames on cut links between partitions count
// too.
func TestConservationFaultedRun(t *testing.T) {
	for _, run := range conservationRuns {
		for _, parts := range []int{0, 4} {
			name := fmt.Sprintf("%s, parts %d", run.name, parts)
			c := conservedCluster(t, run.sets, parts)
			trs := faultedWorkload(t, c, run.loss, run.bytes)
			var checks, inFlight, queued int
			check := func(when string) fabric.Conservation {
				k := c.Topo.Conservation()
				if err := k.Check(); err != nil {
					t.Fatalf("%s, %s (%v): %v", name, when, c.Now(), err)
				}
				if parts == 0 && c.Topo.Pool.Live != int(k.OnLinks+k.InQueues) {
					t.Fatalf("%s, %s (%v): %d packets out of the pool, %d on links and %d queued", name, when, c.Now(), c.Topo.Pool.Live, k.OnLinks, k.InQueues)
				}
				csvIdentity(t, name+", "+when, c.Topo)
				return k
			}
			var every func()
			every = func() {
				k := check("mid-run")
				checks++
				if k.OnLinks > 0 {
					inFlight++
				}
				if k.InQueues > 0 {
					queued++
				}
				if c.Now() < 400*sim.Microsecond {
					c.Scheduler().At(c.Now()+4*sim.Microsecond, every)
				}
			}
			c.Scheduler().At(sim.Microsecond, every)
			// Stopped mid-flight: frames on links and in queues.
			c.RunUntil(50 * sim.Microsecond)
			if k := check("stopped at 50 µs"); k.OnLinks == 0 || k.InQueues == 0 {
				t.Fatalf("%s: nothing in flight at 50 µs: %+v", name, k)
			}
			done := func() bool {
				for _, tr := range trs {
					if !tr.Done() {
						return false
					}
				}
				return true
			}
			c.RunWhile(func() bool { return !done() && c.Now() < 50*sim.Millisecond })
			if !done() {
				t.Fatalf("%s: transfers stalled at %v", name, c.Now())
			}
			end := check("at the end")
			// Every fault left its trace, and frames were in flight at most
			// of the checks.
			if end.Lost == 0 || end.Corrupted == 0 || end.LinkDown == 0 || end.BlackHoled == 0 || end.Delivered == 0 {
				t.Fatalf("%s: a fault left no trace: %+v", name, end)
			}
			var trims, pauses uint64
			for _, sw := range c.Topo.Switches {
				for _, p := range sw.Ports {
					trims += p.Counters.Trims
					pauses += p.Counters.PauseTx + p.Counters.ResumeTx
				}
			}
			if (run.name == "mrc" && trims == 0) || (run.name == "roce-pfc" && pauses == 0) {
				t.Fatalf("%s: %d trims, %d PFC frames: the scenario does not exercise its feature", name, trims, pauses)
			}
			if checks < 50 || inFlight < checks/2 || queued == 0 {
				t.Fatalf("%s: %d checks, %d with frames on links, %d with frames queued", name, checks, inFlight, queued)
			}
			c.RunUntil(c.Now() + 2*sim.Millisecond)
			drained := check("drained")
			if drained.OnLinks+drained.InQueues != 0 {
				t.Errorf("%s: 2 ms after the end, %d frames still on links and %d queued: the fabric did not drain", name, drained.OnLinks, drained.InQueues)
			}
			t.Logf("%s: %d checks, %d trims, %d PFC frames; at the end (%v) %+v; drained: %d on links, %d queued", name, checks, trims, pauses, c.Now(), end, drained.OnLinks, drained.InQueues)
		}
	}
}

// csvIdentity checks that counters.csv's columns, summed over its rows,
// conserve frames.
func csvIdentity(t *testing.T, when string, topo *fabric.Topology) {
	t.Helper()
	var b bytes.Buffer
	if err := topo.WriteCountersCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	head := strings.Split(rows[0], ",")
	sum := map[string]uint64{}
	for _, r := range rows[1:] {
		for i, f := range strings.Split(r, ",")[1:] {
			v, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatalf("counters.csv %s: %v", head[i+1], err)
			}
			sum[head[i+1]] += v
		}
	}
	var placed uint64
	for _, col := range head[1:] {
		if strings.HasPrefix(col, "drop_") {
			placed += sum[col]
		}
	}
	for _, col := range []string{"delivered", "black_holed", "link_lost", "link_corrupted", "link_down_drops", "queued_frames", "link_in_flight"} {
		placed += sum[col]
	}
	if sum["sent"] != placed || sum["sent"] == 0 {
		t.Fatalf("%s: counters.csv: sent %d, placed %d: %v", when, sum["sent"], placed, sum)
	}
}
