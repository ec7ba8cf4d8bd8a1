package collectives

import (
	"math"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
)

// payloadBps is B, the per-rank bandwidth an algorithm can use: the
// payload rate of the rank's NIC for one peer. MRC sprays a single QP over
// every plane, so B = planes × link rate; a RoCE QP is one flow on one
// plane, so B = min(QPs, planes) × link rate. Either way only the payload
// counts: every 4096-byte payload travels with Ethernet, IPv6 (twice under
// uSID), UDP, the transport's headers, FCS and the inter-frame gap, so B
// is the line rate × 4096 / (bytes on the wire per full packet). The
// per-packet bytes are measured: one 8 MiB write between two hosts of the
// same configuration, the sender's engine bytes over its packets.
func payloadBps(t *testing.T, cfg config.Config) (b, line float64) {
	t.Helper()
	c, err := cluster.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Connect(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 8 << 20
	tr, err := c.StartTransfer(ps[0], c.Region(0, n, nil), c.Region(1, n, nil), n, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	ec := c.Hosts[0].RDMA().Counters
	udpPayload := float64(ec.TxBytes) / float64(ec.TxPackets)
	frame := udpPayload + fabric.UDPHeaderLen + fabric.IPv6HeaderLen + fabric.EthHeaderLen + fabric.FCSLen + float64(cfg.Fabric.IFGBytes)
	if c.Topo.Mode == fabric.ForwardUSID {
		frame += fabric.IPv6HeaderLen
	}
	planes := cfg.Fabric.Planes
	if cfg.Transport.Kind == config.TransportRoCE {
		planes = min(planes, cfg.Transport.QPsPerConnection)
	}
	line = float64(planes) * float64(cfg.Fabric.HostLinkBps())
	return line * 4096 / frame, line
}

// On an ideal fabric (no loss; a ring or a pairwise exchange is a
// permutation, which the Clos carries without congestion) large-message
// times match TARGETS.md: T = k·α + f·S/B with k = 2(P−1), f = 2(P−1)/P
// for ring all-reduce and k = P−1, f = (P−1)/P for ring all-gather,
// ring reduce-scatter and pairwise all-to-all. α comes from the smallest
// run (one float32 per rank: 4P bytes, not 1 byte), B from payloadBps.
// The algorithms pipeline slices, so at large S most of k·α is hidden
// and the measurement may come in under the formula; the test allows
// ±5%.
//
// One case does not match, and the test says so instead of asserting it:
// RoCE pairwise all-to-all over 8 ranks on two T0s. Its steps send 4
// flows from one T0 to the other at once, and ECMP hashes them onto the 4
// uplinks independently, so some share an uplink (the "ECMP reaches
// 40–55% under a permutation" fact of TARGETS.md): the fabric is not
// congestion-free for it, and the formula's assumption fails, not the
// algorithm. The same exchange among 4 ranks under one T0 (no uplinks)
// matches.
func TestRingTimesMatchFormula(t *testing.T) {
	const P, S = 8, 64 << 20
	for _, tr := range []string{"mrc", "roce"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			// The formula assumes the transport fills the link. At the spec's
			// one MPR unit (128 PSNs, issue #16) MRC's window is ~1.1 BDP, and
			// when four flows cross the T0 uplinks at once (pairwise
			// all-to-all) their queues stretch the RTT past it: +11% here,
			// +3% with 4 units. The algorithms are under test, not the window.
			c := newCluster(t, tr, 16, "transport.payload=elided", "transport.mrc.mprUnits=4")
			B, line := payloadBps(t, c.Config)
			m := newComm(t, c, Options{Hosts: firstHosts(P)})
			for _, x := range []struct {
				op   Op
				algo string
				k, f float64
			}{
				{AllReduce, "ring", 2 * (P - 1), 2 * float64(P-1) / P},
				{AllGather, "ring", P - 1, float64(P-1) / P},
				{ReduceScatter, "ring", P - 1, float64(P-1) / P},
				{AllToAll, "pairwise", P - 1, float64(P-1) / P},
			} {
				a, err := Lookup(x.op, x.algo)
				if err != nil {
					t.Fatal(err)
				}
				tiny, err := m.Run(a, 1, RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				alpha := float64(tiny.TimeNs) / x.k
				big, err := m.Run(a, S, RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := x.k*alpha + x.f*float64(S)*8/B*1e9
				got := float64(big.TimeNs)
				dev := (got - want) / want
				t.Logf("%s %-13s %-8s P=%d S=64MiB: α=%.2f µs, B=%.1f Gb/s (%.1f%% of %.0f Gb/s line), formula %.1f µs, measured %.1f µs (%+.2f%%), busbw %.2f GB/s",
					tr, x.op, x.algo, P, alpha/1e3, B/1e9, 100*B/line, line/1e9, want/1e3, got/1e3, 100*dev, big.BusBW)
				if tr == "roce" && x.op == AllToAll {
					if dev < 0 {
						t.Errorf("RoCE pairwise all-to-all beat the formula by %.1f%%", -100*dev)
					}
					t.Logf("(not asserted: ECMP collisions on T0 uplinks, see the comment)")
					continue
				}
				// MRC's pairwise all-to-all sends 4 flows across the T0
				// uplinks at once: spraying spreads them, but they queue
				// behind each other at the T1s (+4.4% to +5.1% since issue
				// #16's window and ECN; +2.9% since issue #17's steps end
				// with their write's completion, α then a round trip).
				tol := 0.05
				if x.op == AllToAll {
					tol = 0.07
				}
				if math.Abs(dev) > tol {
					t.Errorf("%s %s: measured %.1f µs is %+.1f%% off the formula's %.1f µs", x.op, x.algo, got/1e3, 100*dev, want/1e3)
				}
			}
		})
	}
	t.Run("roce/alltoall-one-T0", func(t *testing.T) {
		t.Parallel()
		const P = 4
		c := newCluster(t, "roce", 16, "transport.payload=elided")
		B, _ := payloadBps(t, c.Config)
		m := newComm(t, c, Options{Hosts: firstHosts(P)})
		a, _ := Lookup(AllToAll, "pairwise")
		tiny, err := m.Run(a, 1, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		big, err := m.Run(a, S, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := float64(tiny.TimeNs) + float64(P-1)/P*float64(S)*8/B*1e9
		dev := (float64(big.TimeNs) - want) / want
		t.Logf("roce alltoall pairwise P=4 under one T0: formula %.1f µs, measured %.1f µs (%+.2f%%)", want/1e3, float64(big.TimeNs)/1e3, 100*dev)
		if math.Abs(dev) > 0.05 {
			t.Errorf("measured %.1f%% off the formula", 100*dev)
		}
	})
}
