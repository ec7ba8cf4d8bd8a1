package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vcluster/vcluster/roce"
)

// qpPlane is the plane a RoCE QP end sends on.
func qpPlane(t testing.TB, e QPEnd) int {
	t.Helper()
	q, ok := e.T.(*roce.QP)
	if !ok {
		t.Fatalf("host %d: transport %T, want *roce.QP", e.Host, e.T)
	}
	return q.Config().Plane
}

// pairPlane is the plane of a pair, checking that both ends agree.
func pairPlane(t testing.TB, p Pair) int {
	t.Helper()
	a, b := qpPlane(t, p.A), qpPlane(t, p.B)
	if a != b {
		t.Fatalf("QP %d→%d: requester on plane %d, responder on plane %d", p.A.Host, p.B.Host, a, b)
	}
	return a
}

// fanOut connects host 0 to hosts 1..peers with one connection each and
// moves 1 MiB to each at once; it returns the planes of the connections
// and each host's NIC packets sent per plane.
func fanOut(t testing.TB, peers int, sets ...string) (planes []int, tx [][]uint64, c *Cluster) {
	t.Helper()
	c = roceCluster(t, append([]string{"host.netstack=false", "transport.payload=elided"}, sets...)...)
	var trs []*Transfer
	for b := 1; b <= peers; b++ {
		ps, err := c.Connect(0, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			planes = append(planes, pairPlane(t, p))
			tr, err := c.StartTransfer(p, c.Region(0, 1<<20, nil), c.Region(b, 1<<20, nil), 1<<20, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			trs = append(trs, tr)
		}
	}
	c.Loop.RunWhile(func() bool { return !AllDone(trs) })
	for i, tr := range trs {
		if !tr.Done() || len(tr.Errors) > 0 {
			t.Fatalf("transfer %d: done %v, %d errors", i, tr.Done(), len(tr.Errors))
		}
	}
	for h := range c.Hosts {
		var row []uint64
		for _, p := range c.Topo.HostPorts[h] {
			row = append(row, p.Counters.TxPackets)
		}
		tx = append(tx, row)
	}
	return planes, tx, c
}

// One host opening single-QP connections to planes × 3 peers (an
// all-to-all's fan-out) puts exactly three on every plane, round robin in
// the order it opens them, and both ends of each QP use the same plane:
// the sender's data leaves on every NIC port, and each receiver's ACKs
// leave only on its QP's plane. Before, every single-QP connection sat on
// plane 0.
func TestRoCEPlaneSpreadPerHost(t *testing.T) {
	c := roceCluster(t, "host.netstack=false")
	n := 3 * c.Topo.Planes
	planes, tx, c := fanOut(t, n)
	per := make([]int, c.Topo.Planes)
	for k, p := range planes {
		if p != k%c.Topo.Planes {
			t.Errorf("host 0's connection %d on plane %d, want %d (round robin)", k, p, k%c.Topo.Planes)
		}
		per[p]++
	}
	for p, k := range per {
		if k != 3 {
			t.Errorf("plane %d carries %d of host 0's %d QPs, want 3 (%v)", p, k, n, per)
		}
	}
	for p, k := range tx[0] {
		if k == 0 {
			t.Errorf("host 0 sent nothing on plane %d: %v", p, tx[0])
		}
	}
	for b := 1; b <= n; b++ {
		for p, k := range tx[b] {
			if (k > 0) != (p == planes[b-1]) {
				t.Errorf("host %d (QP on plane %d) sent %d packets on plane %d: %v", b, planes[b-1], k, p, tx[b])
			}
		}
	}
}

// With several QPs per connection the count runs on over connections:
// two QPs per connection on four planes put the first connection on
// planes 0 and 1 and the second on 2 and 3 (the index within the
// connection alone put both on 0 and 1).
func TestRoCEPlaneSpreadMultiQP(t *testing.T) {
	planes, _, _ := fanOut(t, 3, "transport.qpsPerConnection=2")
	if want := []int{0, 1, 2, 3, 0, 1}; !slices.Equal(planes, want) {
		t.Errorf("planes %v, want %v", planes, want)
	}
}

// An all-to-all's connections (one per pair, lower host first, in the
// order the collectives make them) leave no host with a plane unused or
// more than two QPs above another plane, on either end of its QPs.
func TestRoCEPlaneSpreadAllToAll(t *testing.T) {
	c := roceCluster(t, "host.netstack=false")
	n, planes := len(c.Hosts), c.Topo.Planes
	per := make([][]int, n)
	for h := range per {
		per[h] = make([]int, planes)
	}
	for a := range n {
		for b := a + 1; b < n; b++ {
			ps, err := c.Connect(a, b)
			if err != nil {
				t.Fatal(err)
			}
			p := pairPlane(t, ps[0])
			per[a][p]++
			per[b][p]++
		}
	}
	for h, row := range per {
		if slices.Min(row) == 0 || slices.Max(row)-slices.Min(row) > 2 {
			t.Errorf("host %d: QPs per plane %v", h, row)
		}
	}
}

// Two hosts with one QP still move their bytes (verified) at one plane's
// rate; a second connection between them goes on the next plane, and one
// the other host opens on that host's first plane.
func TestRoCETwoHostsOneQP(t *testing.T) {
	cfg := load(t, "fabric.preset=C", "fabric.hostsPerT0=2", "fabric.t0PerPlane=1", "fabric.hosts=2", "transport.kind=roce", "host.netstack=false")
	r, err := RunP2P(cfg, 0, 1, 4<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verified || r.GoodputBps < 0.8*r.LineRateBps || r.LineRateBps != 100e9 {
		t.Fatalf("verified %v, %s of %s", r.Verified, gbps(r.GoodputBps), gbps(r.LineRateBps))
	}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got []int
	for _, ab := range [][2]int{{0, 1}, {0, 1}, {1, 0}, {0, 1}} {
		ps, err := c.Connect(ab[0], ab[1])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pairPlane(t, ps[0]))
	}
	if want := []int{0, 1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("planes %v, want %v (the opening host's count decides)", got, want)
	}
}

// The same config and connection order give the same planes and the same
// traffic on every port.
func TestRoCEPlaneSpreadDeterministic(t *testing.T) {
	var runs []string
	for range 2 {
		planes, tx, c := fanOut(t, 6)
		runs = append(runs, fmt.Sprint(planes, tx, c.Now()))
	}
	if runs[0] != runs[1] {
		t.Errorf("two runs differ:\n%s\n%s", runs[0], runs[1])
	}
}
