package fabric

import "encoding/binary"

// FrameSpec describes a synthetic RoCEv2-port UDP frame for tests and
// benchmarks: Ethernet / [outer IPv6 with a uSID path] / IPv6 / UDP 4791 /
// a 32-bit sequence number / payload.
type FrameSpec struct {
	Src, Dst  [16]byte
	Outer     *[16]byte // uSID path: encapsulate IPv6-in-IPv6
	Sport     uint16
	Flow      uint32
	DSCP, ECN uint8
	Payload   int // bytes of UDP payload on the wire
	Stored    int // payload bytes actually stored (the rest elided); -1: all
	Seq       uint32
}

// PutIPv6 writes an IPv6 header into b.
func PutIPv6(b []byte, tc uint8, flow uint32, plen int, nh uint8, src, dst [16]byte) {
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tc)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(b[4:], uint16(plen))
	b[6], b[7] = nh, 64
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
}

// BuildFrame builds the frame f describes from pool.
func BuildFrame(pool *Pool, f FrameSpec) *Packet {
	stored := f.Payload
	if f.Stored >= 0 && f.Stored < stored {
		stored = f.Stored
	}
	if stored < 4 {
		stored = 4
	}
	hdr := EthHeaderLen + IPv6HeaderLen + UDPHeaderLen
	if f.Outer != nil {
		hdr += IPv6HeaderLen
	}
	p := pool.Get(hdr + stored)
	clear(p.Data)
	binary.BigEndian.PutUint16(p.Data[12:], EtherTypeIPv6)
	off := EthHeaderLen
	tc := f.DSCP<<2 | f.ECN
	udpLen := UDPHeaderLen + f.Payload
	if f.Outer != nil {
		PutIPv6(p.Data[off:], tc, f.Flow, IPv6HeaderLen+udpLen, ProtoIPv6, f.Src, *f.Outer)
		off += IPv6HeaderLen
	}
	PutIPv6(p.Data[off:], tc, f.Flow, udpLen, ProtoUDP, f.Src, f.Dst)
	off += IPv6HeaderLen
	binary.BigEndian.PutUint16(p.Data[off:], f.Sport)
	binary.BigEndian.PutUint16(p.Data[off+2:], RoCEv2Port)
	binary.BigEndian.PutUint16(p.Data[off+4:], uint16(udpLen))
	binary.BigEndian.PutUint32(p.Data[off+8:], f.Seq)
	p.SetWireLen(hdr + f.Payload)
	return p
}
