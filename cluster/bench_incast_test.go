package cluster

import (
	"reflect"
	"testing"
	"time"
)

// TestIncast runs a small incast on htsim's k=4 fat-tree settings: every
// flow completes, the last hop is sampled every period up to the last
// completion, it fills (an incast of 4 at line rate builds a queue) but
// never beyond its buffer, and the run replays exactly.
func TestIncast(t *testing.T) {
	cfg, err := HtsimFatTreeConfig(HtsimIncastK, 1)
	if err != nil {
		t.Fatal(err)
	}
	const size = 300_000
	period := time.Microsecond
	run := func() IncastResult {
		c, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, err := c.RunIncast([]int{1, 2, 5, 9}, 0, size, period)
		if err != nil {
			t.Fatal(err)
		}
		if port := c.LastHopPort(0); port.Tx.Dst() != c.Topo.HostPorts[0][0] {
			t.Fatalf("last-hop port %v does not send to host 0", port)
		}
		return r
	}
	r := run()
	if len(r.Flows) != 4 {
		t.Fatalf("%d flows, want 4", len(r.Flows))
	}
	for _, f := range r.Flows {
		if f.Dst != 0 || f.Bytes != size || f.Placed != size {
			t.Errorf("flow %d→%d: %d completed, %d placed, want %d", f.Src, f.Dst, f.Bytes, f.Placed, size)
		}
	}
	if len(r.Queue) == 0 || r.Queue[len(r.Queue)-1].T > r.SimTime {
		t.Fatalf("%d samples, the last after the last completion %v", len(r.Queue), r.SimTime)
	}
	for i := 1; i < len(r.Queue); i++ {
		if d := time.Duration(r.Queue[i].T - r.Queue[i-1].T); d != period {
			t.Fatalf("samples %d and %d %v apart, want %v", i-1, i, d, period)
		}
	}
	if want := int(time.Duration(r.SimTime)/period) + 1; len(r.Queue) != want {
		t.Errorf("%d samples over %v, want %d", len(r.Queue), time.Duration(r.SimTime), want)
	}
	peak, mean := r.QueueStats()
	if peak <= 4*HtsimWirePacket || peak > HtsimQueueBytes+HtsimWirePacket || mean <= 0 || mean > float64(peak) {
		t.Errorf("last-hop queue peak %d B, mean %.0f B: want a queue of more than 4 packets, at most the %d B buffer (+1 frame of control)", peak, mean, HtsimQueueBytes)
	}
	t.Logf("FCT %v, trims %d, queue peak %d mean %.0f", r.Flows, r.Trims, peak, mean)
	if b := run(); !reflect.DeepEqual(r.Queue, b.Queue) || r.SimTime != b.SimTime {
		t.Error("replay differs")
	}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, bad := range [][]int{{0}, {1, 1}, {16}} {
		if _, err := c.RunIncast(bad, 0, size, period); err == nil {
			t.Errorf("senders %v into 0: no error", bad)
		}
	}
}
