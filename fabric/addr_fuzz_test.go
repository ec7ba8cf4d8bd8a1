package fabric

import (
	"bytes"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// FuzzParseHostAddr: ParseHostAddr never panics (short and long inputs
// too), an address it accepts is exactly the one HostAddr builds from its
// parts, and Topology.HostOf accepts only addresses of its own hosts.
func FuzzParseHostAddr(f *testing.F) {
	topo := smallClos(f, sim.NewLoop(sim.Options{Seed: 1}), 2, 3, 2, 2, DefaultOptions(ForwardUSID))
	for h := range topo.Hosts {
		for p := range topo.Planes {
			a := topo.HostAddr(h, p)
			f.Add(a[:])
		}
	}
	for _, a := range [][16]byte{HostAddr(15, 1023, 1022), HostAddr(0xffff, 0xffff, 0xfffe), USIDAddr(HostPortUSID(0, 1)), {}} {
		f.Add(a[:])
	}
	f.Add([]byte{0xfd, 0x00})
	pa := HostPathAddr(1, 0, 2, 0)
	f.Add(pa[:])
	f.Fuzz(func(t *testing.T, a []byte) {
		plane, subnet, index, ok := ParseHostAddr(a)
		if !ok {
			if _, _, ok := topo.HostOf(a); ok {
				t.Fatalf("HostOf(%x) accepts what ParseHostAddr refuses", a)
			}
			return
		}
		if plane < 0 || subnet < 0 || index < 0 {
			t.Fatalf("ParseHostAddr(%x) = %d, %d, %d", a, plane, subnet, index)
		}
		// A path address (bytes 8..9 not zero) names the same host.
		back := HostAddr(plane, subnet, index)
		path, isPath := AddrPath(a)
		if isPath {
			back = HostPathAddr(plane, subnet, index, path)
		}
		if !bytes.Equal(back[:], a[:16]) {
			t.Fatalf("ParseHostAddr(%x) = plane %d subnet %d index %d path %d/%v, which builds as %x", a, plane, subnet, index, path, isPath, back)
		}
		if h, p, ok := topo.HostOf(a); ok {
			back := topo.HostAddr(h, p)
			if isPath {
				back = topo.HostPathAddr(h, p, path)
			}
			if !bytes.Equal(back[:], a[:16]) || h >= topo.Hosts || p >= topo.Planes {
				t.Fatalf("HostOf(%x) = host %d plane %d, whose address is %x", a, h, p, back)
			}
		}
	})
}
