package labhost

import (
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vcluster/vcluster/compose/tunbridge"
	"github.com/vcluster/vcluster/endpoint"
)

var nsSeq atomic.Int64

// newNamedNS creates a named network namespace for the test, deleted in
// Cleanup.
func newNamedNS(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("vchost-%d-%d", os.Getpid(), nsSeq.Add(1))
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in the namespace
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("creating network namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("deleting network namespace %s: %v", name, err)
		}
	})
	return name
}

// A host with --tun-netns: the namespace's kernel answers another host's
// netstack ping to the host's plane-0 address, across the fabric.
func TestTUNBridgeKernelAnswersPing(t *testing.T) {
	if err := tunbridge.Available(); err != nil {
		t.Skipf("skipping: TUN devices in network namespaces are unavailable here: %v", err)
	}
	lab := testLab(t)
	secret := testSecret(t)
	f := startTestFabric(t, lab, secret)
	ns := newNamedNS(t)
	var hs []*Host
	for id := range 2 {
		o := Options{ID: id, Lab: lab, Fabric: f.Addr(), Secret: secret, API: "127.0.0.1:0", Keepalive: 200 * time.Millisecond,
			Log: log.New(io.Discard, "", 0)}
		if id == 0 {
			o.TunNetNS = ns
		}
		h, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hs = append(hs, h)
	}
	for _, h := range hs {
		waitFor(t, 20*time.Second, fmt.Sprintf("host %d up", h.ID()), h.Up)
	}
	dst := hs[1].cl.Topo.HostAddr(0, 0)
	// The kernel may still be setting the address up: a few tries.
	var answered bool
	for seq := uint16(1); seq <= 20 && !answered; seq++ {
		got := make(chan bool, 1)
		if err := hs[1].onLoop(func() {
			if err := hs[1].cl.Hosts[1].Ping(dst, 77, seq, 56, 500*time.Millisecond, func(_ time.Duration, ok bool) { got <- ok }); err != nil {
				t.Error(err)
				got <- false
			}
		}, loopTimeout); err != nil {
			t.Fatal(err)
		}
		answered = <-got
	}
	if !answered {
		t.Fatal("no echo reply from the namespace's kernel")
	}
	var c endpoint.BridgeCounters
	var n uint64
	if err := hs[0].onLoop(func() { c, n = hs[0].cl.Hosts[0].BridgeCounters(), hs[0].cl.Hosts[0].NIC.Counters.ToNetstack }, loopTimeout); err != nil {
		t.Fatal(err)
	}
	if c.Delivered == 0 || c.Sent == 0 {
		t.Fatalf("bridge counters %+v: the ping did not cross the TUN", c)
	}
	if n != 0 {
		t.Fatalf("host 0's netstack got %d packets with a TUN bridge", n)
	}
}
