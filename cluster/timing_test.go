package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// timingRun moves n bytes in writes of w from host 0 to host dst over one
// QP and returns the one-way time to the WriteImm, the goodput and the
// requester's minimum RTT sample.
func timingRun(t *testing.T, sets []string, dst int, n, w uint64) (oneWay sim.Time, goodput float64, minRTT int64) {
	t.Helper()
	c, err := New(load(t, sets...), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Connect(0, dst)
	if err != nil {
		t.Fatal(err)
	}
	src, dr := c.Region(0, n, randomFill(3)), c.Region(dst, n, nil)
	tr, err := c.StartTransfer(ps[0], src, dr, n, w)
	if err != nil {
		t.Fatal(err)
	}
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	if !tr.Done() || len(tr.Errors) > 0 {
		t.Fatalf("%v: transfer of %d B did not complete (%d errors)", sets, n, len(tr.Errors))
	}
	return tr.RecvImmAt - tr.Start, tr.GoodputBps(), ps[0].A.T.Stats().MinRTT
}

var timingTransports = map[string][]string{
	"mrc":  {"fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc"},
	"roce": {"fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce"},
}

// The NIC's latencies add exactly tx + rx to a 2-byte WriteImm's one-way
// latency, and the switch latency once per switch (one within a T0,
// three across T1), for both transports; they leave the transport's RTT
// (ACKs are generated and taken without the NIC latency) and the goodput
// of a long stream unchanged (within 1%: the stream only pays tx + rx
// once, at its start and end).
func TestNICAndSwitchLatency(t *testing.T) {
	const tx, rx, sw = 1300 * time.Nanosecond, 900 * time.Nanosecond, 400 * time.Nanosecond
	lat := []string{"host.nicTxLatency=" + tx.String(), "host.nicRxLatency=" + rx.String()}
	for name, base := range timingTransports {
		for _, p := range []struct {
			dst      int
			switches int
		}{{1, 1}, {15, 3}} {
			l0, _, rtt0 := timingRun(t, base, p.dst, 2, 2)
			l1, _, rtt1 := timingRun(t, append(append([]string{}, base...), lat...), p.dst, 2, 2)
			l2, _, rtt2 := timingRun(t, append(append([]string{}, base...), append(lat, "fabric.switchLatency="+sw.String())...), p.dst, 2, 2)
			if d := time.Duration(l1 - l0); d != tx+rx {
				t.Errorf("%s h0→h%d: NIC latency adds %v to %v, want tx+rx = %v", name, p.dst, d, time.Duration(l0), tx+rx)
			}
			if d := time.Duration(l2 - l1); d != time.Duration(p.switches)*sw {
				t.Errorf("%s h0→h%d: switch latency adds %v, want %d × %v", name, p.dst, d, p.switches, sw)
			}
			if rtt1 != rtt0 {
				t.Errorf("%s h0→h%d: min RTT %d ns with NIC latency, %d without: the NIC latency reached the ACK path", name, p.dst, rtt1, rtt0)
			}
			if want := rtt0 + int64(2*p.switches)*int64(sw); rtt0 > 0 && rtt2 != want {
				t.Errorf("%s h0→h%d: min RTT %d ns with switch latency, want %d", name, p.dst, rtt2, want)
			}
			t.Logf("%s h0→h%d: 2 B one-way %v → %v (NIC) → %v (+switch); min RTT %d / %d / %d ns", name, p.dst,
				time.Duration(l0), time.Duration(l1), time.Duration(l2), rtt0, rtt1, rtt2)
		}
		_, g0, _ := timingRun(t, base, 15, 32<<20, 64<<10)
		_, g1, _ := timingRun(t, append(append([]string{}, base...), lat...), 15, 32<<20, 64<<10)
		if r := g1 / g0; r < 0.99 || r > 1.01 {
			t.Errorf("%s: 32 MiB stream %s with NIC latency vs %s without (ratio %.4f), want within 1%%", name, gbps(g1), gbps(g0), r)
		}
		t.Logf("%s: 32 MiB stream %s without, %s with NIC latency", name, gbps(g0), gbps(g1))
	}
}

// With a transmit latency Post still refuses a bad work request at once,
// with the transport's own error, and queues nothing.
func TestNICTxLatencyPostErrors(t *testing.T) {
	for name, base := range timingTransports {
		c, err := New(load(t, append(append([]string{}, base...), "host.nicTxLatency=1us")...), nil)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := c.Connect(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		src := c.Region(0, 4096, nil)
		e, qpn := ps[0].A.Engine, ps[0].A.T.QPN()
		for _, tc := range []struct {
			wr   verbs.WorkRequest
			want error
		}{
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: 99, Length: 8}, verbs.ErrBadKey},
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 8192}, verbs.ErrOutOfBounds},
			{verbs.WorkRequest{Op: verbs.OpRecvImm, LocalKey: src.Key, LocalVA: src.VA, Length: 8}, verbs.ErrBadOpcode},
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 1<<31 + 1}, verbs.ErrTooLong},
		} {
			if err := e.Post(qpn, tc.wr); !errors.Is(err, tc.want) {
				t.Errorf("%s: Post(%+v) = %v, want %v", name, tc.wr, err, tc.want)
			}
		}
		c.Loop.Run()
		switch q := ps[0].A.T.(type) {
		case *mrc.QP:
			if q.Stats().BytesPosted != 0 {
				t.Errorf("%s: %d bytes posted", name, q.Stats().BytesPosted)
			}
		case *roce.QP:
			if q.Stats().BytesPosted != 0 {
				t.Errorf("%s: %d bytes posted", name, q.Stats().BytesPosted)
			}
		}
		c.Close()
	}
}

// busiestUplink returns the T0 → T1 port of host src's T0 that sent the
// most frames, in any plane.
func busiestUplink(c *Cluster, src int) *fabric.Port {
	sub, _ := c.Topo.HostSubnet(src)
	var best *fabric.Port
	for pl := 0; pl < c.Topo.Planes; pl++ {
		s := c.Topo.Switch(fmt.Sprintf("p%d.t0.%d", pl, sub))
		for _, p := range s.Ports[c.Topo.Clos.HostsPerT0:] {
			if best == nil || p.Counters.TxPackets > best.Counters.TxPackets {
				best = p
			}
		}
	}
	return best
}

// RoCE under ECMP with routing reconvergence: the cable its flow uses is
// cut mid-transfer. On the source T0's side the T0 withdraws it at once
// (its own cable) and the flow barely stalls; between the T1 and the
// destination T0 the source T0 hears of it the reconvergence delay later
// and the flow stalls that long (rounded up to the go-back-N timeout that
// retransmits after it). Either way it completes without a QP error;
// without reconvergence the QP errors.
func TestRoCEStallsUntilReconvergence(t *testing.T) {
	const delay = time.Millisecond
	const cutAt = 300 * sim.Microsecond
	for _, side := range []string{"source T0 uplink", "T1 downlink to the destination T0"} {
		for _, reconv := range []string{"", delay.String()} {
			sets := append(append([]string{}, timingTransports["roce"]...), "transport.payload=elided")
			if reconv != "" {
				sets = append(sets, "fabric.ecmpReconvergence="+reconv)
			}
			c, err := New(load(t, sets...), nil)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := c.Connect(0, 15)
			if err != nil {
				t.Fatal(err)
			}
			const n = 16 << 20
			tr, err := c.StartTransfer(ps[0], c.Region(0, n, nil), c.Region(15, n, nil), n, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			c.Loop.RunUntil(cutAt)
			up := busiestUplink(c, 0)
			cut := up
			if side != "source T0 uplink" {
				t1 := up.Peer.Owner.(*fabric.Switch)
				dsub, _ := c.Topo.HostSubnet(15)
				cut = t1.Ports[dsub]
			}
			cut.Tx.SetUp(false)
			cut.Peer.Tx.SetUp(false)
			// The longest time without a byte placed at the responder.
			var last, stall sim.Time
			placed := ps[0].B.T.Stats().BytesPlaced
			last = c.Loop.Now()
			for !tr.Done() && c.Loop.Now() < 20*sim.Millisecond {
				c.Loop.RunUntil(c.Loop.Now() + 10*sim.Microsecond)
				if b := ps[0].B.T.Stats().BytesPlaced; b != placed {
					placed = b
					stall = max(stall, c.Loop.Now()-last)
					last = c.Loop.Now()
				}
			}
			stall = max(stall, c.Loop.Now()-last) // until the end, or the QP's error
			timeout := time.Duration(4096 << 7)
			errored := ps[0].A.T.State() == verbs.QPError
			t.Logf("%s, reconvergence %q: cut %s; done %v, QP error %v, longest stall %v", side, reconv, cut.Name, tr.Done(), errored, time.Duration(stall))
			if reconv == "" {
				if !errored || time.Duration(stall) < 7*timeout {
					t.Errorf("%s without reconvergence: QP state %v after a %v stall, want ERROR after its retries (≥ 7 × %v) on the dead path", side, ps[0].A.T.State(), time.Duration(stall), timeout)
				}
			} else {
				if !tr.Done() || len(tr.Errors) > 0 || errored {
					t.Errorf("%s: transfer done %v, %d errors, QP error %v: want it to continue after reconvergence", side, tr.Done(), len(tr.Errors), errored)
				}
				// Sampled every 10 µs; the last byte before the cut may
				// land up to a sample before it. The source T0 owns the
				// cut uplink and withdraws it at once (a few samples: the
				// frames on the dead cable, one go-back-N repair); the T1
				// downlink is remote to the source T0, which hears of it
				// only the delay later.
				s := time.Duration(stall)
				if side == "source T0 uplink" {
					if s > 100*time.Microsecond {
						t.Errorf("%s: stalled %v, want well under the delay %v: the T0 owning the cable withdraws it at once", side, s, delay)
					}
				} else if s < delay-20*time.Microsecond || s > delay+timeout+20*time.Microsecond {
					t.Errorf("%s: stalled %v, want the reconvergence delay %v up to one timeout (%v) more", side, s, delay, timeout)
				}
			}
			c.Close()
		}
	}
}

// Reconvergence runs as global events: a partitioned run and the classic
// loop give the same completion time, with the timing model on too.
func TestReconvergencePartitionedSame(t *testing.T) {
	sets := append(append([]string{}, timingTransports["roce"]...), "transport.payload=elided", "fabric.ecmpReconvergence=500us",
		"fabric.switchLatency=300ns", "host.nicTxLatency=1us", "host.nicRxLatency=1us")
	end := map[string]sim.Time{}
	for _, parts := range []int{0, 4} {
		var c *Cluster
		var err error
		if parts == 0 {
			c, err = NewForWorkers(load(t, sets...), 0)
		} else {
			c, err = NewPartitioned(load(t, sets...), parts, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
		ps, err := c.Connect(0, 15)
		if err != nil {
			t.Fatal(err)
		}
		const n = 8 << 20
		tr, err := c.StartTransfer(ps[0], c.Region(0, n, nil), c.Region(15, n, nil), n, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		c.Scheduler().At(200*sim.Microsecond, func() {
			p := busiestUplink(c, 0)
			p.Tx.SetUp(false)
			p.Peer.Tx.SetUp(false)
		})
		c.RunWhile(func() bool { return !tr.Done() })
		if !tr.Done() || len(tr.Errors) > 0 {
			t.Fatalf("parts %d: done %v, %d errors", parts, tr.Done(), len(tr.Errors))
		}
		end[fmt.Sprint(parts)] = tr.End
		c.Close()
	}
	if end["0"] != end["4"] {
		t.Errorf("completion at %v classic, %v partitioned", time.Duration(end["0"]), time.Duration(end["4"]))
	}
	t.Logf("completion %v", time.Duration(end["0"]))
}

// config.PaperTimingSets reproduce the two T1 numbers they were fitted to
// on the p2p experiment's cluster (8 × 100G planes, MRC): a regression
// check of the fit's hop accounting (2 host links + 1 switch within a T0;
// + 2 fabric links + 2 switches across T1), not a validation.
func TestPaperTimingFit(t *testing.T) {
	sets := append([]string{"fabric.preset=C", "fabric.hosts=16", "fabric.planes=8", "transport.kind=mrc"}, config.PaperTimingSets()...)
	for _, c := range []struct {
		dst  int
		want time.Duration
	}{{1, 5090 * time.Nanosecond}, {15, 6540 * time.Nanosecond}} {
		l, _, _ := timingRun(t, sets, c.dst, 2, 2)
		if d := time.Duration(l) - c.want; d < -5 || d > 5 {
			t.Errorf("h0→h%d: 2 B one-way %v, the fit gives %v", c.dst, time.Duration(l), c.want)
		}
	}
	if _, err := config.Load("", append(config.PaperTimingSets(), "fabric.ecmpReconvergence="+config.PaperECMPReconvergence)); err != nil {
		t.Fatal(err)
	}
}
