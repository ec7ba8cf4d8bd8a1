package fabric

import (
	"testing"
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// TestPrefetchChangesNothing: the loop's Prefetch calls (links, ports,
// uSID egress lookahead) only read: a congested run gives byte-identical
// counters, arrival logs and event counts with and without them, for ECMP
// and uSID fabrics, classic and ranked loops.
func TestPrefetchChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(*sim.Loop) (*Topology, error)
	}{{"fat-tree ecmp", fatTree4}, {"clos usid", clos2}} {
		for _, parts := range []int{0, 1} {
			prefetchOff = false
			on := runPartitioned(t, c.build, parts, 1, 60)
			prefetchOff = true
			off := runPartitioned(t, c.build, parts, 1, 60)
			prefetchOff = false
			if on.prefetched == 0 || off.prefetched != 0 {
				t.Fatalf("%s parts %d: %d Prefetch calls with, %d without", c.name, parts, on.prefetched, off.prefetched)
			}
			samePartRun(t, c.name, on, off)
		}
	}
}

// TestHotLayout pins the field order the prefetch stages rely on: a
// port is a whole number of cache lines (switch ports are one slab), a
// packet's per-hop fields and a link's arrival fields share one line; a
// switch forwards from its first line and counts in its second.
func TestHotLayout(t *testing.T) {
	t.Logf("Port %d bytes", unsafe.Sizeof(Port{}))
	var pt Port
	var p Packet
	var l Link
	if s := unsafe.Sizeof(pt); s%64 != 0 {
		t.Errorf("Port is %d bytes, not a multiple of 64 (adjust portPad)", s)
	}
	if o := unsafe.Offsetof(pt.maxQ) + 4; o > 64 {
		t.Errorf("Port's admission fields end at %d, beyond its first line", o)
	}
	if o := unsafe.Offsetof(pt.Owner); o != 64 {
		t.Errorf("Port's reception line starts at %d, not 64", o)
	}
	if o := unsafe.Offsetof(pt.Counters) + unsafe.Offsetof(pt.Counters.RxBytes) + 8; o > 128 {
		t.Errorf("Port's Tx/Rx counters end at %d, beyond its second line", o)
	}
	var sw Switch
	if s := unsafe.Sizeof(sw); s%64 != 0 || s > 448 {
		t.Errorf("Switch is %d bytes, want a multiple of 64 up to 448 (a size class whose objects start lines; adjust its padding)", s)
	}
	if o := unsafe.Offsetof(sw.Trace) + 8; o > 64 {
		t.Errorf("Switch's forwarding fields end at %d, beyond its first line", o)
	}
	if o := unsafe.Offsetof(sw.Counters); o != 64 {
		t.Errorf("Switch's counters start at %d, not 64", o)
	}
	if s := unsafe.Sizeof(p); s != 128 {
		t.Errorf("Packet is %d bytes, want 128 (a line-aligned size class)", s)
	}
	if o := unsafe.Offsetof(p.InPort) + 4; o > 64 {
		t.Errorf("Packet's per-hop fields end at %d, beyond one line", o)
	}
	if o := unsafe.Offsetof(l.Counters) + unsafe.Offsetof(l.Counters.Bytes) + 8; o > 64 {
		t.Errorf("Link's arrival fields end at %d, beyond one line", o)
	}
}
