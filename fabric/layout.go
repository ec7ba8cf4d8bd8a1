package fabric

import "unsafe"

// cacheLine is the line size the hot structs are laid out for.
const cacheLine = 64

// The hot structs order their fields by use so that a frame touches few of
// their cache lines, and those lines can be prefetched (prefetch.go); that
// only works if every object starts a line. Go has no alignment
// directive, so the objects fabric allocates on the per-frame path are
// wrapped in a padded holder, its padding a constant expression of the
// struct's size: adding a field never needs a hand-adjusted pad, and
// TestHotLayout fails if one breaks the placement of the hot fields. The
// padding is 1 to 64 bytes, never 0: Go pads a struct that ends in a
// zero-size field past it, which would break the rounding.

// linePort is a Port padded to whole lines: a switch's ports are one slab
// of them (portSlab), and NewPort allocates one.
type linePort struct {
	Port
	_ [cacheLine - unsafe.Sizeof(Port{})%cacheLine]byte
}

// lineSwitch is a Switch padded to whole lines (a size class of the
// allocator whose objects start lines; TestHotLayout checks).
type lineSwitch struct {
	Switch
	_ [cacheLine - unsafe.Sizeof(Switch{})%cacheLine]byte
}

// linePacket is a Packet padded to whole lines (128 bytes: a size class
// whose objects start lines), as a Pool allocates it.
type linePacket struct {
	Packet
	_ [cacheLine - unsafe.Sizeof(Packet{})%cacheLine]byte
}

// lineLink is a Link padded to whole lines (a size class whose objects
// start lines), as NewLink allocates it: a frame's arrival reads only the
// link's first line.
type lineLink struct {
	Link
	_ [cacheLine - unsafe.Sizeof(Link{})%cacheLine]byte
}

// portSlab is a switch's ports: one allocation of linePorts, indexed by
// address arithmetic so that forwarding finds the egress port without
// loading a pointer. It holds the slab as an unsafe.Pointer rather than a
// []linePort because the type checker cannot size linePort (a constant
// of Port's size) inside Switch, a type Port reaches.
type portSlab struct {
	base unsafe.Pointer // the first linePort
	n    int
}

func newPortSlab(n int) portSlab {
	s := make([]linePort, n)
	return portSlab{unsafe.Pointer(unsafe.SliceData(s)), n}
}

// at returns port i; it panics if i is out of range, as indexing would.
func (s portSlab) at(i int32) *Port {
	if uint(i) >= uint(s.n) {
		panic("fabric: switch port index out of range")
	}
	return (*Port)(unsafe.Add(s.base, uintptr(i)*unsafe.Sizeof(linePort{})))
}
