package fabric

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Addressing plan (docs/addressing.md):
//
//	host address, one per host per plane:  fd00:0:<plane>:<subnet>::<host+1>
//	  subnet = the host's T0 (Clos) or edge switch (fat-tree), global index
//	  host   = the host's index under that switch (= its switch port)
//	path address of the same host:          fd00:0:<plane>:<subnet>:<path+1>::<host+1>
//	  path   = which member of each multi-member next-hop group carries it
//	           (the spine in a 2-tier Clos); 0 in the field = a host address
//	uSID locator block (RFC 9800 example block): fcbb:bb00::/32
//	uSID (16 bits) = plane(4) | type(2) | index(10)
//	  type 0: a host-facing downlink of a T0/edge switch (index = port)
//	  type 1: a T0 / edge switch, 2: a T1 / aggregation switch, 3: a core
//	SRv6 path (outer DA) = fcbb:bb00 : uSID(first switch) : ... : uSID(host port) : 0…
const (
	HostPrefix16 = 0xfd00
	USIDBlock    = 0xfcbbbb00
	USIDHostPort = 0
	USIDT0       = 1
	USIDT1       = 2
	USIDCore     = 3
	// MaxUSIDIndex bounds switch counts per tier and ports per T0.
	MaxUSIDIndex = 1 << 10
	MaxPlanes    = 16
)

// HostAddr returns the address of host (subnet, index) in plane.
func HostAddr(plane, subnet, index int) [16]byte {
	var a [16]byte
	binary.BigEndian.PutUint16(a[0:], HostPrefix16)
	binary.BigEndian.PutUint16(a[4:], uint16(plane))
	binary.BigEndian.PutUint16(a[6:], uint16(subnet))
	binary.BigEndian.PutUint16(a[14:], uint16(index+1))
	return a
}

// MaxPaths bounds the path field of a path address (16 bits, 0 = none).
const MaxPaths = 1<<16 - 1

// HostPathAddr returns the address of host (subnet, index) in plane that
// ECMP and static forwarding route over path (0-based): at every switch
// whose next-hop group toward the host has several members it takes member
// path mod size (docs/addressing.md). Multipath transports that pick paths
// by destination address (MP-RDMA) give a receiver one per path.
func HostPathAddr(plane, subnet, index, path int) [16]byte {
	a := HostAddr(plane, subnet, index)
	binary.BigEndian.PutUint16(a[8:], uint16(path+1))
	return a
}

// AddrPath returns the path of a path address (0-based) and true, or false
// for a host address (or anything shorter than an address).
func AddrPath(a []byte) (path int, ok bool) {
	if len(a) < 16 {
		return 0, false
	}
	f := int(binary.BigEndian.Uint16(a[8:]))
	return f - 1, f != 0
}

// ParseHostAddr splits a host or path address (the path is ignored: see
// AddrPath); ok is false for anything outside the plan.
func ParseHostAddr(a []byte) (plane, subnet, index int, ok bool) {
	if len(a) < 16 || binary.BigEndian.Uint16(a[0:]) != HostPrefix16 || binary.BigEndian.Uint16(a[2:]) != 0 ||
		binary.BigEndian.Uint32(a[10:]) != 0 {
		return 0, 0, 0, false
	}
	h := int(binary.BigEndian.Uint16(a[14:]))
	if h == 0 {
		return 0, 0, 0, false
	}
	return int(binary.BigEndian.Uint16(a[4:])), int(binary.BigEndian.Uint16(a[6:])), h - 1, true
}

// USID builds a 16-bit micro-segment identifier.
func USID(plane, typ, index int) uint16 {
	return uint16(plane&0xf)<<12 | uint16(typ&3)<<10 | uint16(index&0x3ff)
}

// HostPortUSID is the uSID of downlink port (0-based) of a T0/edge switch.
func HostPortUSID(plane, port int) uint16 { return USID(plane, USIDHostPort, port+1) }

// SplitUSID returns the parts of a uSID.
func SplitUSID(s uint16) (plane, typ, index int) {
	return int(s >> 12), int(s >> 10 & 3), int(s & 0x3ff)
}

// USIDAddr packs a uSID list behind the locator block (at most 6 uSIDs).
func USIDAddr(sids ...uint16) [16]byte {
	var a [16]byte
	binary.BigEndian.PutUint32(a[0:], USIDBlock)
	for i, s := range sids {
		binary.BigEndian.PutUint16(a[4+2*i:], s)
	}
	return a
}

// AddrString formats a 16-byte address.
func AddrString(a [16]byte) string { return netip.AddrFrom16(a).String() }

// MAC returns the locally administered MAC of device id, port.
func MAC(device, port int) [6]byte {
	return [6]byte{0x02, byte(device >> 16), byte(device >> 8), byte(device), byte(port >> 8), byte(port)}
}

func checkUSIDIndex(what string, n int) error {
	if n > MaxUSIDIndex {
		return fmt.Errorf("%s: %d exceeds the uSID plan's %d", what, n, MaxUSIDIndex)
	}
	return nil
}
