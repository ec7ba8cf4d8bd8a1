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
