package fabric

import (
	"encoding/binary"

	"github.com/vcluster/vcluster/sim"
)

// ForwardECMP hashes addresses, flow label and UDP ports over the
// equal-cost next hops toward the destination's subnet. It is the zero
// ForwardingMode.
const ForwardECMP ForwardingMode = 0

// ForwardECMPName is ForwardECMP's config word.
const ForwardECMPName = "ecmp"

func init() {
	registerForwarding(ForwardECMP, forwarding{
		name:        ForwardECMPName,
		next:        ecmpNext,
		holeOffset:  6, // the subnet of a host address
		reconverges: true,
	})
}

// ecmpNext hashes p over the FIB's next-hop group of its destination.
func ecmpNext(s *Switch, p *Packet) int32 {
	g, _ := s.fibGroup(p)
	switch len(g) {
	case 0:
		return -1
	case 1:
		return g[0]
	}
	return g[ecmpHash(p, s.seed)%uint64(len(g))]
}

// ecmpHash hashes the 5-tuple-like fields: source and destination address,
// flow label and, for UDP, the port pair.
func ecmpHash(p *Packet, seed uint64) uint64 {
	d := p.Data
	be := binary.BigEndian
	h := sim.Hash64(seed, be.Uint64(d[offIPv6Src:]))
	h = sim.Hash64(h, be.Uint64(d[offIPv6Src+8:]))
	h = sim.Hash64(h, be.Uint64(d[offIPv6Dst:]))
	h = sim.Hash64(h, be.Uint64(d[offIPv6Dst+8:]))
	var ports uint64
	if d[offIPv6+6] == ProtoUDP && len(d) >= offL4+4 {
		ports = uint64(be.Uint32(d[offL4:]))
	}
	return sim.Hash64(h, uint64(p.FlowLabel())<<32|ports)
}
