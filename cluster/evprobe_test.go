package cluster

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
)

// probeOnce sends one EV probe 0 → 15 and runs the loop until it is
// answered or timed out.
func probeOnce(t *testing.T, c *Cluster, ev uint32, timeout time.Duration) (time.Duration, bool) {
	t.Helper()
	var rtt time.Duration
	var ok, done bool
	if err := c.ProbeEV(0, 15, ev, timeout, func(r time.Duration, k bool) { rtt, ok, done = r, k, true }); err != nil {
		t.Fatal(err)
	}
	c.Loop.RunWhile(func() bool { return !done })
	if !done {
		t.Fatal("probe neither answered nor timed out")
	}
	return rtt, ok
}

// TestProbeEV: an EV Probe endpoint request on a healthy EV is answered on
// the reflected EV within the zero-load round trip of two endpoint frames;
// one whose path crosses a cut cable times out, while another path of the
// same plane still answers.
func TestProbeEV(t *testing.T) {
	c := mrcCluster(t)
	frame := mrc.EndpointLen + c.frameOverhead() - fabric.FCSLen - c.Config.Fabric.IFGBytes
	want := c.Topo.ZeroLoadLatency(0, 15, frame, c.Config.Fabric.IFGBytes) + c.Topo.ZeroLoadLatency(15, 0, frame, c.Config.Fabric.IFGBytes)
	onCut := mrc.MakeEV(1, 2, 7) // plane 1, through T1 2
	other := mrc.MakeEV(1, 1, 7) // plane 1, through T1 1
	rtt, ok := probeOnce(t, c, onCut, 100*time.Microsecond)
	t.Logf("healthy EV probe: RTT %v, zero-load %v", rtt, want)
	if !ok || rtt < want || rtt > want+want/20 {
		t.Fatalf("healthy EV probe: ok %v, RTT %v, want ≈ %v", ok, rtt, want)
	}
	// The cable between T0 0 and T1 2 in plane 1 (T0 port 4 + 2).
	up := c.Topo.Switch("p1.t0.0").Ports[4+2]
	up.Tx.SetUp(false)
	up.Peer.Tx.SetUp(false)
	start := c.Loop.Now()
	if _, ok := probeOnce(t, c, onCut, 100*time.Microsecond); ok {
		t.Fatal("probe across the cut cable was answered")
	}
	if d := time.Duration(c.Loop.Now() - start); d != 100*time.Microsecond {
		t.Fatalf("timeout reported after %v, want 100µs of virtual time", d)
	}
	if rtt, ok := probeOnce(t, c, other, 100*time.Microsecond); !ok || rtt > want+want/20 {
		t.Fatalf("probe on another path: ok %v, RTT %v", ok, rtt)
	}
	if err := c.ProbeEV(0, 0, onCut, time.Microsecond, func(time.Duration, bool) {}); err == nil {
		t.Fatal("ProbeEV to itself accepted")
	}
	if err := c.ProbeEV(0, 1, onCut, 0, func(time.Duration, bool) {}); err == nil {
		t.Fatal("ProbeEV with no timeout accepted")
	}
}
