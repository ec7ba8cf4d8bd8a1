package cluster

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// mrcCluster is paper cluster C scaled: 4 planes × 100G, 16 hosts on 4 T0s
// and 4 T1s per plane, SRv6 uSID forwarding, MRC.
func mrcCluster(t testing.TB, sets ...string) *Cluster {
	t.Helper()
	c, err := New(load(t, append([]string{"fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc"}, sets...)...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func randomFill(seed uint64) func([]byte) {
	return func(b []byte) {
		r := rand.New(rand.NewPCG(seed, 1))
		for i := 0; i+8 <= len(b); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8; j++ {
				b[i+j] = byte(v >> (8 * j))
			}
		}
	}
}

// runTransfer moves n bytes host a → host b and returns the transfer and
// the MRC QP of the requester. during runs at mid-transfer, if set.
func runTransfer(t *testing.T, c *Cluster, a, b int, n uint64, at sim.Time, during func(q *mrc.QP)) (*Transfer, *mrc.QP) {
	t.Helper()
	ps, err := c.Connect(a, b)
	if err != nil {
		t.Fatal(err)
	}
	src := c.Region(a, n, randomFill(7))
	dst := c.Region(b, n, nil)
	tr, err := c.StartTransfer(ps[0], src, dst, n, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		c.Loop.At(at, func() { during(ps[0].A.T.(*mrc.QP)) })
	}
	c.Loop.RunWhile(func() bool { return !tr.Done() || tr.RecvImmAt == 0 })
	if !tr.Done() {
		t.Fatalf("transfer stalled at %v: %d/%d bytes", c.Loop.Now(), tr.Completed, n)
	}
	if len(tr.Errors) > 0 {
		t.Fatalf("%d work requests failed, first %+v", len(tr.Errors), tr.Errors[0])
	}
	if ps[0].A.T.State() != verbs.QPReady {
		t.Fatalf("QP state %v", ps[0].A.T.State())
	}
	if !bytes.Equal(src.Buf, dst.Buf) {
		t.Fatalf("destination differs from source: sha %x vs %x", sha256.Sum256(dst.Buf), sha256.Sum256(src.Buf))
	}
	return tr, ps[0].A.T.(*mrc.QP)
}

func gbps(x float64) string { return fmt.Sprintf("%.1f Gb/s", x/1e9) }

func TestMRCIntegrity64MiBNoLoss(t *testing.T) {
	c := mrcCluster(t)
	tr, q := runTransfer(t, c, 0, 15, 64<<20, 0, nil)
	st := q.Stats()
	t.Logf("64 MiB no loss: %s (%.1f%% of 400G), %d data packets, %d retransmissions, %d timeouts",
		gbps(tr.GoodputBps()), tr.GoodputBps()/4e9, st.DataPacketsSent, st.Retransmissions, st.Timeouts)
	if st.Timeouts != 0 {
		t.Errorf("%d timeouts on a loss-free fabric", st.Timeouts)
	}
}

func lossOnEveryLink(c *Cluster, p float64) {
	for _, l := range c.Topo.Links {
		l.Loss = fabric.NewBernoulli(p, c.Config.Seed, l.Name)
	}
}

func TestMRCIntegrity64MiBOnePercentLoss(t *testing.T) {
	c := mrcCluster(t)
	lossOnEveryLink(c, 0.01)
	tr, q := runTransfer(t, c, 0, 15, 64<<20, 0, nil)
	st := q.Stats()
	t.Logf("64 MiB at 1%% loss per link: %s (%.1f%% of 400G), %d retransmissions, %d timeouts",
		gbps(tr.GoodputBps()), tr.GoodputBps()/4e9, st.Retransmissions, st.Timeouts)
	if st.Retransmissions == 0 {
		t.Fatal("no retransmissions at 1% loss: the loss model did not bite")
	}
}

func TestMRCLinkCutMidTransfer(t *testing.T) {
	c := mrcCluster(t)
	const cutAt = 300 * sim.Microsecond
	// The cable between T0 0 and T1 2 in plane 1 (T0 port 4 + 2).
	up := c.Topo.Switch("p1.t0.0").Ports[4+2]
	var deadActiveAfter50 int
	tr, q := runTransfer(t, c, 0, 15, 64<<20, cutAt, func(q *mrc.QP) {
		up.Tx.SetUp(false)
		up.Peer.Tx.SetUp(false)
		c.Loop.At(cutAt+50*sim.Microsecond, func() {
			for _, e := range q.EVStates() {
				if e.Plane == 1 && e.Choice == 2 && e.Active {
					deadActiveAfter50++
				}
			}
		})
	})
	// Every EV on the cut path is out of use: ASSUMED_BAD, or (a spare that
	// was never tried) kept out of the active set because its siblings on
	// the same path are.
	dead, other := 0, 0
	for _, e := range q.EVStates() {
		if e.Plane == 1 && e.Choice == 2 {
			if e.Active || e.State != mrc.EVAssumedBad && e.State != mrc.EVGood {
				t.Errorf("EV %#x on the cut path is %v, active %v", e.EV, e.State, e.Active)
			}
			dead++
		} else if e.State == mrc.EVAssumedBad {
			other++
		}
	}
	st := q.Stats()
	t.Logf("link cut at %v: %s (%.1f%% of 400G), %d EVs on the cut path, %d still active 50 µs after the cut, %d other EVs ASSUMED_BAD, %d timeouts",
		cutAt, gbps(tr.GoodputBps()), tr.GoodputBps()/4e9, dead, deadActiveAfter50, other, st.Timeouts)
	if dead == 0 {
		t.Fatal("no EV named the cut path")
	}
	if deadActiveAfter50 != 0 {
		t.Errorf("%d EVs on the cut path still in the active set 50 µs after the cut", deadActiveAfter50)
	}
}

func TestMRCPlaneDownMidTransfer(t *testing.T) {
	c := mrcCluster(t)
	const at = 300 * sim.Microsecond
	nicPort := c.Topo.HostPorts[0][2]
	var sentAtFailure uint64
	tr, q := runTransfer(t, c, 0, 15, 64<<20, at, func(*mrc.QP) {
		for _, s := range c.Topo.Switches {
			if s.Plane == 2 {
				s.SetDown(true)
			}
		}
		// Whatever was already serializing may still leave; count from
		// one frame time later.
		c.Loop.At(at+sim.Microsecond, func() { sentAtFailure = nicPort.Counters.TxPackets })
	})
	st := q.Stats()
	after := nicPort.Counters.TxPackets - sentAtFailure
	t.Logf("plane 2 down at %v: %s (%.1f%% of 400G; 3 planes left = 75%%), %d frames sent on plane 2 afterwards, %d retransmissions, %d timeouts",
		at, gbps(tr.GoodputBps()), tr.GoodputBps()/4e9, after, st.Retransmissions, st.Timeouts)
	if q.PlaneUp(2) {
		t.Error("the QP still counts plane 2 as up")
	}
	if after != 0 {
		t.Errorf("%d frames sent on the dead plane after the failure", after)
	}
}
