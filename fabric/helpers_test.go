package fabric

import (
	"encoding/binary"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// recvHost is a test Device standing in for a NIC: it records what arrives.
type recvHost struct {
	loop   *sim.Loop
	got    []recvd
	onRecv func(p *Packet, in *Port) bool // true: it took ownership
}

type recvd struct {
	at    sim.Time
	seq   uint32
	dscp  uint8
	ecn   uint8
	len   int
	plane int32
	flags uint8
}

func (h *recvHost) Ingress(p *Packet, in *Port) {
	if h.onRecv != nil && h.onRecv(p, in) {
		return
	}
	r := recvd{at: h.loop.Now(), dscp: p.DSCP(), ecn: p.ECN(), len: p.WireLen, plane: in.Index, flags: p.Flags}
	if off := innerL4(p) + UDPHeaderLen; off+4 <= len(p.Data) {
		r.seq = binary.BigEndian.Uint32(p.Data[off:])
	}
	h.got = append(h.got, r)
	p.Release()
}

// innerL4 is the offset of the innermost transport header.
func innerL4(p *Packet) int {
	off := offIPv6
	for p.Data[off+6] == ProtoIPv6 && off+2*IPv6HeaderLen <= len(p.Data) {
		off += IPv6HeaderLen
	}
	return off + IPv6HeaderLen
}

type frameSpec struct {
	src, dst  [16]byte
	outer     *[16]byte // uSID path: encapsulate
	sport     uint16
	flow      uint32
	dscp, ecn uint8
	payload   int // bytes of UDP payload on the wire
	stored    int // payload bytes actually stored (rest elided); -1: all
	seq       uint32
}

func putIPv6(b []byte, tc uint8, flow uint32, plen int, nh uint8, src, dst [16]byte) {
	binary.BigEndian.PutUint32(b[0:], 6<<28|uint32(tc)<<20|flow&0xfffff)
	binary.BigEndian.PutUint16(b[4:], uint16(plen))
	b[6], b[7] = nh, 64
	copy(b[8:24], src[:])
	copy(b[24:40], dst[:])
}

// makeFrame builds Ethernet/[IPv6 outer]/IPv6/UDP(4791)/seq/payload.
func makeFrame(pool *Pool, f frameSpec) *Packet {
	stored := f.payload
	if f.stored >= 0 && f.stored < stored {
		stored = f.stored
	}
	if stored < 4 {
		stored = 4
	}
	hdr := EthHeaderLen + IPv6HeaderLen + UDPHeaderLen
	if f.outer != nil {
		hdr += IPv6HeaderLen
	}
	p := pool.Get(hdr + stored)
	clear(p.Data)
	binary.BigEndian.PutUint16(p.Data[12:], EtherTypeIPv6)
	off := EthHeaderLen
	tc := f.dscp<<2 | f.ecn
	udpLen := UDPHeaderLen + f.payload
	if f.outer != nil {
		putIPv6(p.Data[off:], tc, f.flow, IPv6HeaderLen+udpLen, ProtoIPv6, f.src, *f.outer)
		off += IPv6HeaderLen
	}
	putIPv6(p.Data[off:], tc, f.flow, udpLen, ProtoUDP, f.src, f.dst)
	off += IPv6HeaderLen
	binary.BigEndian.PutUint16(p.Data[off:], f.sport)
	binary.BigEndian.PutUint16(p.Data[off+2:], RoCEv2Port)
	binary.BigEndian.PutUint16(p.Data[off+4:], uint16(udpLen))
	binary.BigEndian.PutUint32(p.Data[off+8:], f.seq)
	p.SetWireLen(hdr + f.payload)
	return p
}

// attach makes every host port of t deliver to one recvHost per host.
func attach(t *Topology) []*recvHost {
	hs := make([]*recvHost, t.Hosts)
	for h := range hs {
		hs[h] = &recvHost{loop: t.Loop}
		for _, p := range t.HostPorts[h] {
			p.Owner = hs[h]
		}
	}
	return hs
}

func smallClos(t interface{ Fatalf(string, ...any) }, loop *sim.Loop, planes, hpt0, t0, t1 int, o Options) *Topology {
	topo, err := BuildClos(loop, ClosSpec{Planes: planes, HostsPerT0: hpt0, T0: t0, T1: t1,
		HostRate: 100e9, FabricRate: 100e9, HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond}, o)
	if err != nil {
		t.Fatalf("BuildClos: %v", err)
	}
	return topo
}
