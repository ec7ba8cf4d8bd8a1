package fabric

import (
	"testing"
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// TestHotLayout pins the field placement the prefetch stages rely on: a
// port's admission and transmission fields fill its first line and
// reception its second; a packet's per-hop fields and a link's arrival
// fields share one line; a switch forwards from its first line and counts
// in its second. A field added in the wrong place fails here; padding is
// computed (layout.go), never adjusted by hand.
func TestHotLayout(t *testing.T) {
	var pt Port
	var p Packet
	var l Link
	var sw Switch
	t.Logf("Port %d (%d padded), Switch %d (%d), Packet %d (%d), Link %d (%d) bytes",
		unsafe.Sizeof(pt), unsafe.Sizeof(linePort{}), unsafe.Sizeof(sw), unsafe.Sizeof(lineSwitch{}),
		unsafe.Sizeof(p), unsafe.Sizeof(linePacket{}), unsafe.Sizeof(l), unsafe.Sizeof(lineLink{}))
	for _, c := range []struct {
		what      string
		end, want uintptr // end: offset + size of the last field of a line
	}{
		{"Port's admission fields end", unsafe.Offsetof(pt.maxQ) + unsafe.Sizeof(pt.maxQ), cacheLine},
		{"Port's Tx/Rx counters end", unsafe.Offsetof(pt.Counters) + unsafe.Offsetof(pt.Counters.RxBytes) + 8, 2 * cacheLine},
		{"Switch's forwarding fields end", unsafe.Offsetof(sw.Trace) + unsafe.Sizeof(sw.Trace), cacheLine},
		{"Switch's counters end", unsafe.Offsetof(sw.Counters) + unsafe.Sizeof(sw.Counters), 2 * cacheLine},
		{"Packet's per-hop fields end", unsafe.Offsetof(p.InPort) + unsafe.Sizeof(p.InPort), cacheLine},
		{"Link's arrival fields end", unsafe.Offsetof(l.Counters) + unsafe.Offsetof(l.Counters.Bytes) + 8, cacheLine},
	} {
		if c.end > c.want {
			t.Errorf("%s at %d, beyond byte %d", c.what, c.end, c.want)
		}
	}
	// Lines that must start where they do (a stage prefetches them by
	// address: Port's reception line, Switch's counters).
	if o := unsafe.Offsetof(pt.Owner); o != cacheLine {
		t.Errorf("Port's reception line starts at %d, not %d", o, cacheLine)
	}
	if o := unsafe.Offsetof(sw.Counters); o != cacheLine {
		t.Errorf("Switch's counters start at %d, not %d", o, cacheLine)
	}
	// Fields only high-delay capture and telemetry touch stay out of the
	// hot lines: a fabric without them never loads their lines.
	if o := unsafe.Offsetof(p.hopIn); o < cacheLine {
		t.Errorf("Packet.hopIn at %d, in the per-hop line", o)
	}
	if o := unsafe.Offsetof(pt.obs); o < 2*cacheLine {
		t.Errorf("Port.obs at %d, in a hot line", o)
	}
	if o := unsafe.Offsetof(sw.hdcOn); o >= cacheLine {
		t.Errorf("Switch.hdcOn at %d, not in the forwarding line", o)
	}
	if s := unsafe.Sizeof(linePacket{}); s != 2*cacheLine {
		t.Errorf("a padded Packet is %d bytes, want %d (two lines)", s, 2*cacheLine)
	}
}

// TestHotObjectsStartLines: every switch, link and packet a fabric
// allocates starts a cache line (the padded sizes are size classes of the
// allocator whose objects are line-aligned), and a switch's port slab has
// a whole-line stride, so all its ports sit alike in their lines. A port
// (over 512 bytes, with pointers) carries the runtime's malloc header
// unless its slab is a large object (at least 32 KiB: switches of radix
// ≥ 47), so small slabs and NIC ports start 8 bytes into a line — as on
// every Go since 1.22; the test logs where they start.
func TestHotObjectsStartLines(t *testing.T) {
	for _, s := range []uintptr{unsafe.Sizeof(linePort{}), unsafe.Sizeof(lineSwitch{}), unsafe.Sizeof(linePacket{}), unsafe.Sizeof(lineLink{})} {
		if s%cacheLine != 0 {
			t.Fatalf("padded size %d is not whole lines", s)
		}
	}
	topo, err := fatTree4(sim.NewLoop(sim.Options{Seed: 1}))
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, p unsafe.Pointer) {
		t.Helper()
		if a := uintptr(p); a%cacheLine != 0 {
			t.Fatalf("%s at %#x: not at the start of a line", what, a)
		}
	}
	offsets := map[uintptr]int{}
	for _, s := range topo.Switches {
		check("switch "+s.Name, unsafe.Pointer(s))
		first := uintptr(unsafe.Pointer(s.Ports[0])) % cacheLine
		for _, p := range s.Ports {
			if o := uintptr(unsafe.Pointer(p)) % cacheLine; o != first {
				t.Fatalf("port %s starts %d bytes into its line, port 0 of its switch %d", p.Name, o, first)
			}
		}
		offsets[first]++
	}
	t.Logf("switch port slabs by the ports' offset in their lines: %v", offsets)
	for _, l := range topo.Links {
		check("link "+l.Name, unsafe.Pointer(l))
	}
	var ps []*Packet
	for i := 0; i < 64; i++ {
		n := 64
		if i&1 != 0 {
			n = 4096
		}
		p := topo.Pool.Get(n)
		check("packet", unsafe.Pointer(p))
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.Release()
	}
}
