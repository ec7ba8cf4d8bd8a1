package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/sim"
)

// roceCluster: cluster C scaled (4 × 100G planes, 16 hosts), ECMP routing,
// RoCE.
func roceCluster(t testing.TB, sets ...string) *Cluster {
	t.Helper()
	c, err := New(load(t, append([]string{"fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce"}, sets...)...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestRoCEIntegrity64MiBWithLoss(t *testing.T) {
	for _, rel := range []string{"gbn", "irn"} {
		cfg := load(t, "fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce", "transport.roce.reliability="+rel)
		r, err := RunP2P(cfg, 0, 15, 64<<20, 0.001)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if !r.Verified || r.Retransmitted == 0 {
			t.Fatalf("%s: verified %v, %d retransmissions (the loss did not bite)", rel, r.Verified, r.Retransmitted)
		}
		t.Logf("RoCE %s, 64 MiB at 0.1%% loss per link: %s (%.1f%% of 100G), %d retransmitted, %d timeouts, bytes verified",
			rel, gbps(r.GoodputBps), 100*r.GoodputBps/r.LineRateBps, r.Retransmitted, r.Timeouts)
	}
}

// TARGETS T14 on the fabric: BDP ≈ 100 packets (100 G, ~35 µs RTT from
// 3 µs host and 5 µs fabric links), 1% random loss on the sender's link:
// go-back-N loses most of its throughput, IRN's selective repeat keeps it.
// TARGETS T14's shape: go-back-N well below line rate at 1% loss,
// selective repeat near it. IRN runs with the IRN paper's 1 × BDP cap (the
// default) and the 2 × option: a hole takes two RTTs to repair and the
// paper's cap stalls the sender for the second, so only the option comes
// near T14's number.
func TestRoCEGoBackNVersusIRN(t *testing.T) {
	res := map[string]float64{}
	runs := map[string][]string{
		"gbn":  {"transport.roce.reliability=gbn"},
		"irn":  {"transport.roce.reliability=irn"},
		"irn2": {"transport.roce.reliability=irn", "transport.roce.irnBDPFactor=2"},
	}
	for _, rel := range []string{"gbn", "irn", "irn2"} {
		c := roceCluster(t, append([]string{"fabric.hostLinkDelay=3us", "fabric.fabricLinkDelay=5us", "transport.payload=elided",
			"transport.roce.cc=none"}, runs[rel]...)...)
		bdp := float64(100e9) / 8 * c.BaseRTT().Seconds() / 4096
		c.Topo.HostPorts[0][0].Tx.Loss = fabric.NewBernoulli(0.01, 1, "t14")
		tr, p := lossyTransfer64(t, c)
		res[rel] = tr.GoodputBps() / 100e9
		st := p.A.T.Stats()
		t.Logf("%s: BDP %.0f packets, 1%% loss: %.1f%% of line rate, %d retransmissions, %d timeouts", rel, bdp, 100*res[rel], st.Retransmissions, st.Timeouts)
		if bdp < 80 || bdp > 130 {
			t.Fatalf("BDP %.0f packets, the scenario wants ≈ 100", bdp)
		}
	}
	if res["gbn"] > 0.70 {
		t.Errorf("go-back-N kept %.1f%% at 1%% loss, T14 says ≤ 70%%", 100*res["gbn"])
	}
	if res["irn2"] < 0.90 {
		t.Errorf("IRN with a 2 × BDP cap kept %.1f%% at 1%% loss, want ≥ 90%%", 100*res["irn2"])
	}
	if res["irn"] <= res["gbn"] || res["irn"] > res["irn2"]+0.01 {
		t.Errorf("IRN with the paper's 1 × BDP cap at %.1f%%: want above go-back-N (%.1f%%) and at most the 2 × cap's %.1f%%",
			100*res["irn"], 100*res["gbn"], 100*res["irn2"])
	}
}

// A pcap of a RoCE write exchange with loss and ECN marks holds data,
// ACK, NAK (PSN sequence error) and CNP packets, and tshark decodes them as
// InfiniBand over RoCEv2 with the right opcodes, QPs and PSNs.
func TestRoCEPcapDecodes(t *testing.T) {
	bin := tshark.Require(t)
	_ = bin
	c := roceCluster(t, "fabric.queue.ecn.lastHop=true", "fabric.queue.ecn.kminBytes=1000", "fabric.queue.ecn.kmaxBytes=20000", "fabric.queue.ecn.pmax=1",
		"transport.roce.cc=dcqcn_hpcc")
	file := filepath.Join(t.TempDir(), "roce.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := pcap.NewWriter(f, pcap.LinkTypeEthernet, 0)
	c.Topo.HostPorts[0][0].Tap(w) // the receiver's port: data in, ACK/NAK/CNP out
	c.Topo.HostPorts[1][0].Tx.Loss = fabric.NewBernoulli(0.01, 2, "pcap")
	var trs []*Transfer
	var qpns []uint32
	for _, s := range []int{1, 2} { // 2:1 into host 0 builds a queue: CE marks
		ps, err := c.Connect(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.StartTransfer(ps[0], c.Region(s, 2<<20, randomFill(5)), c.Region(0, 2<<20, nil), 2<<20, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
		qpns = append(qpns, ps[0].B.T.QPN(), ps[0].A.T.QPN())
	}
	c.Loop.RunWhile(func() bool { return !trs[0].Done() || !trs[1].Done() })
	w.Close()
	rows := tshark.Fields(t, file, "infiniband", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.aeth.syndrome")
	count := map[string]int{}
	maxPSN := 0
	for _, r := range rows {
		op64, _ := strconv.Atoi(r[0])
		op := uint8(op64)
		qp, _ := strconv.ParseUint(r[1], 0, 32)
		if !slices.Contains(qpns, uint32(qp)) {
			t.Fatalf("packet for QP %#x, not one of the test's %x", qp, qpns)
		}
		psn, _ := strconv.Atoi(r[2])
		maxPSN = max(maxPSN, psn)
		switch {
		case op >= roce.OpWriteFirst && op <= roce.OpWriteOnlyImm:
			count["data"]++
		case op == roce.OpAck:
			syn, _ := strconv.ParseUint(r[3], 0, 8)
			if syn&0xe0 == 0x60 {
				count["nak"]++
			} else {
				count["ack"]++
			}
		case op == roce.OpCNP:
			count["cnp"]++
		}
	}
	t.Logf("decoded %d RoCE packets: %v, PSNs up to %d", len(rows), count, maxPSN)
	for _, k := range []string{"data", "ack", "nak", "cnp"} {
		if count[k] == 0 {
			t.Errorf("no %s packets decoded", k)
		}
	}
	if maxPSN < 500 {
		t.Errorf("PSNs up to %d for 2 × 2 MiB of 4 KiB packets", maxPSN)
	}
}

// DCQCN: a second flow joins a 100G bottleneck that a first flow fills;
// the two converge to within 10% of a fair share, and stay there.
func TestRoCEDCQCNFairness(t *testing.T) {
	c := roceCluster(t, "fabric.queue.ecn.lastHop=true", "transport.payload=elided", "transport.roce.cc=dcqcn_hpcc")
	var ports []*fabric.Port
	const join = sim.Millisecond
	for i, s := range []int{4, 8} {
		ps, err := c.Connect(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, c.Topo.HostPorts[s][0])
		start := func() {
			if _, err := c.StartTransfer(ps[0], c.Region(s, 256<<20, nil), c.Region(0, 256<<20, nil), 256<<20, 1<<20); err != nil {
				t.Error(err)
			}
		}
		if i == 0 {
			start()
		} else {
			c.Loop.At(join, start)
		}
	}
	// Per 200 µs window after the join, each flow's share of the bytes
	// the two sent.
	var prev [2]uint64
	fairFrom := sim.Time(-1)
	const win = 200 * sim.Microsecond
	c.Loop.RunUntil(join)
	prev[0] = ports[0].Counters.TxBytes
	var total float64
	for at := join + win; at <= join+6*sim.Millisecond; at += win {
		c.Loop.RunUntil(at)
		var got [2]float64
		for i, p := range ports {
			b := p.Counters.TxBytes
			got[i] = float64(b - prev[i])
			prev[i] = b
		}
		share := got[0] / (got[0] + got[1])
		total = (got[0] + got[1]) * 8 / float64(win)
		if share > 0.45 && share < 0.55 {
			if fairFrom < 0 {
				fairFrom = at
			}
		} else {
			fairFrom = -1
		}
	}
	t.Logf("a second DCQCN flow joins a 100G bottleneck at %v: within 10%% of fair from %v on (%v after joining); last window %.1f Gb/s together",
		join, fairFrom, fairFrom-join, total)
	if fairFrom < 0 || fairFrom-join > 3*sim.Millisecond {
		t.Errorf("not within 10%% of a fair share 3 ms after the join (fair from %v)", fairFrom)
	}
}

// incastPFC runs an N:1 RoCE incast on cluster D (one 400G plane, 4 racks
// × 4 hosts, 4 spines) with PFC and DCQCN preset cc, and returns the
// receiver's goodput fraction, the last-hop queue's mean, the PAUSE frames
// sent, and the drops.
func incastPFC(t *testing.T, n int, cc string, each int, sets ...string) (goodput float64, meanQ float64, pauses, drops uint64) {
	c, err := New(load(t, append([]string{"fabric.preset=D", "fabric.forwarding=ecmp", "transport.kind=roce", "transport.payload=real",
		"fabric.queue.pfc.enabled=true", "fabric.queue.ecn.lastHop=true", "transport.roce.cc=" + cc}, sets...)...), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var trs []*Transfer
	for s := 1; s <= n; s++ {
		ps, err := c.Connect(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.StartTransfer(ps[0], c.Region(s, uint64(each), randomFill(uint64(s))), c.Region(0, uint64(each), nil), uint64(each), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	last := c.Topo.Port("p0.t0.0/0")
	qs := fabric.NewQueueSampler(c.Loop, []*fabric.Port{last}, time.Microsecond, 200*sim.Millisecond)
	c.Loop.RunWhile(func() bool {
		for _, tr := range trs {
			if !tr.Done() {
				return true
			}
		}
		return false
	})
	var end sim.Time
	for i, tr := range trs {
		if len(tr.Errors) > 0 {
			t.Fatalf("sender %d: %v", i+1, tr.Errors[0])
		}
		for j := range tr.Src.Buf {
			if tr.Src.Buf[j] != tr.Dst.Buf[j] {
				t.Fatalf("sender %d: byte %d corrupted", i+1, j)
			}
		}
		end = max(end, tr.End)
	}
	for _, s := range c.Topo.Switches {
		for _, p := range s.Ports {
			pauses += p.Counters.PauseTx
			for _, d := range p.Counters.Drops {
				drops += d
			}
		}
	}
	for _, l := range c.Topo.Links {
		drops += l.Counters.Lost + l.Counters.DroppedDown
	}
	var sum float64
	var k int
	for _, x := range qs.Samples {
		if x.At < end {
			sum += float64(x.Bytes)
			k++
		}
	}
	return float64(n*each) * 8 / (float64(end) / 1e9) / 400e9, sum / float64(k), pauses, drops
}

// PFC: a 15:1 incast of 16 MiB per sender on cluster D produces PAUSE
// frames and no drops. T6 shape: with the HPCC ns-3 DCQCN preset and its
// ECN thresholds scaled to 400G (Kmin 1.6 MB, above PFC's XOFF) the queue
// runs away, PFC fires and throughput holds; tuned more aggressively (ECN
// at the DCQCN paper's 5 KB / 200 KB / 1%) the queue stays far lower and
// throughput drops.
func TestRoCEPFCIncastAndDCQCNTuning(t *testing.T) {
	settings := []struct {
		name string
		sets []string
	}{
		{"default (HPCC ECN 1.6 MB / 6.4 MB / 0.2)", []string{"fabric.queue.bufferBytes=33554432", "fabric.queue.ecn.kminBytes=1600000", "fabric.queue.ecn.kmaxBytes=6400000", "fabric.queue.ecn.pmax=0.2"}},
		{"aggressive (ECN 5 KB / 200 KB / 0.01)", []string{"fabric.queue.ecn.kminBytes=5000", "fabric.queue.ecn.kmaxBytes=200000", "fabric.queue.ecn.pmax=0.01"}},
	}
	var g, q [2]float64
	for i, st := range settings {
		var pauses, drops uint64
		g[i], q[i], pauses, drops = incastPFC(t, 15, "dcqcn_hpcc", 16<<20, st.sets...)
		t.Logf("15:1 incast, PFC + DCQCN %s: goodput %.1f%% of 400G, mean last-hop queue %.0f KB, %d PAUSE frames, %d drops", st.name, 100*g[i], q[i]/1e3, pauses, drops)
		if drops != 0 {
			t.Errorf("%s: %d drops with PFC on", st.name, drops)
		}
		if pauses == 0 {
			t.Errorf("%s: no PAUSE frames in a 15:1 incast", st.name)
		}
	}
	if !(q[1] < q[0]/2) || !(g[1] < g[0]) {
		t.Errorf("T6 shape does not hold: queue %.0f → %.0f KB, goodput %.1f%% → %.1f%%", q[0]/1e3, q[1]/1e3, 100*g[0], 100*g[1])
	}
}

// Eight RoCE QPs on four planes share NIC ports two by two: a QP held back
// by its full port must wait for the port (TxReady), not spin on a stale
// pacing deadline (a livelock at one virtual instant, found this way).
func TestRoCEQPsSharingAPort(t *testing.T) {
	cfg := load(t, "fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce", "transport.qpsPerConnection=8")
	r, err := RunP2P(cfg, 0, 15, 64<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RoCE 8 QPs over 4 planes: %s = %.1f%% of %s", gbps(r.GoodputBps), 100*r.GoodputBps/r.LineRateBps, gbps(r.LineRateBps))
	if r.GoodputBps < 0.8*r.LineRateBps {
		t.Errorf("goodput %.1f%% of the four planes", 100*r.GoodputBps/r.LineRateBps)
	}
}
