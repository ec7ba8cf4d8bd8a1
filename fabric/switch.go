package fabric

import (
	"encoding/binary"
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// ForwardingMode selects how every switch of a fabric forwards.
type ForwardingMode int

const (
	// ForwardECMP hashes addresses, flow label and UDP ports over the
	// equal-cost next hops toward the destination's subnet.
	ForwardECMP ForwardingMode = iota
	// ForwardUSID is SRv6 uN shift-and-forward on the outer destination
	// (RFC 9800 NEXT-C-SID) with a static /48 FIB; no ECMP.
	ForwardUSID
	// ForwardStatic is a plain static FIB: one fixed next hop per
	// destination (destination-mod-k over the equal-cost set).
	ForwardStatic
)

func (m ForwardingMode) String() string {
	return [...]string{"ecmp", "usid", "static"}[m]
}

// ParseForwardingMode maps a config word to a mode.
func ParseForwardingMode(s string) (ForwardingMode, bool) {
	switch s {
	case "ecmp":
		return ForwardECMP, true
	case "usid":
		return ForwardUSID, true
	case "static":
		return ForwardStatic, true
	}
	return 0, false
}

// SwitchCounters are a switch's forwarding totals (per-port counters live
// on the ports).
type SwitchCounters struct {
	Forwarded, USIDShifts, NoRoute, HopLimit uint64
	Down                                     uint64 // frames that arrived while the switch was down
	BlackHoled                               uint64 // silently dropped by a black hole
}

// Switch forwards frames between its ports. Its tables are filled by the
// topology builder: a per-subnet next-hop group table (ECMP / static) and a
// per-uSID port table (the static /48 FIB of SRv6 mode, dense because every
// /48 is locator block + one uSID).
//
// Layout: forwarding a frame reads only the first line (state, identity,
// tables, egress slab, hooks) and writes only the second (Counters), so
// one frame costs two of the switch's cache lines, both prefetched with
// the frame (Link.Prefetch). The uSID tables are shared by every switch
// with the same contents (all T0s of a Clos, all its T1s) and stay cached.
type Switch struct {
	// Line 0.
	down  bool
	hole  bool  // a black hole is set (holeFrac > 0)
	plane uint8 // = Plane, here for the uSID check
	USID  uint16
	mode  ForwardingMode
	usid  *usidFIB // shared, immutable once built
	slab  []Port   // the ports Ports points at, in one allocation
	acct  *IngressAccounting
	// Trace, when set, sees every forwarding decision (tests, path tracing).
	Trace func(sw *Switch, p *Packet, out *Port)

	// Line 1.
	Counters SwitchCounters

	Name  string
	ID    int // fabric-wide device id
	Tier  int // 0 = T0/edge, 1 = T1/agg, 2 = core
	Plane int
	Index int // within its tier and plane
	Ports []*Port

	seed        uint64
	localSubnet int
	hostPorts   []int32 // own subnet: host index → port
	subnetGroup []int32 // subnet → index into groups; -1: no route
	groups      [][]int32
	usidPorts   usidFIB // filled while building; usid points at the shared copy

	holeSID  uint16
	holeFrac float64
	holeRNG  sim.FastRand
	_        [56]byte // a whole number of lines (448 B, a size class): line 0 starts a line
}

// usidFIB is a switch's uSID port tables: uSID type, index → port; -1: none.
type usidFIB [4][]int32

// Mode returns the switch's forwarding mode.
func (s *Switch) Mode() ForwardingMode { return s.mode }

// PFC returns the switch's ingress PFC accounting, or nil.
func (s *Switch) PFC() *IngressAccounting { return s.acct }

func (s *Switch) dropIn(p *Packet, in *Port, reason int) {
	switch reason {
	case DropNoRoute:
		s.Counters.NoRoute++
	case DropHopLimit:
		s.Counters.HopLimit++
	}
	in.drop(p, reason)
}

// Ingress implements Device: decide, account, enqueue.
func (s *Switch) Ingress(p *Packet, in *Port) {
	p.InPort = -1
	if s.down {
		s.Counters.Down++
		in.drop(p, DropSwitchDown)
		return
	}
	if in.feat&featWd != 0 && in.wd.dropsIngress(in.classOf(p)) {
		// SONiC's pfcwd drop action covers both directions of the stormed
		// queue: what the storming peer sends in on it drops too.
		in.drop(p, DropWatchdog)
		return
	}
	if p.HopLimit() <= 1 {
		// A router would answer ICMPv6 Time Exceeded; vcluster counts it.
		s.dropIn(p, in, DropHopLimit)
		return
	}
	var out int32 = -1
	switch s.mode {
	case ForwardUSID:
		out = s.usidNext(p)
	default:
		out = s.fibNext(p)
	}
	if out < 0 {
		s.dropIn(p, in, DropNoRoute)
		return
	}
	if s.hole && s.inHole(p) && s.holeRNG.Float64() < s.holeFrac {
		s.Counters.BlackHoled++
		in.Counters.BlackHoled++ // not a port drop: silent (see BlackHole)
		p.Release()
		return
	}
	p.Data[offIPv6+7]--
	op := &s.slab[out] // = s.Ports[out]
	if s.acct != nil {
		c := op.classOf(p)
		p.Class = c
		if s.acct.cfg.lossless(c) {
			if !s.acct.admit(p, in.Index) {
				s.dropIn(p, in, DropHeadroom)
				return
			}
			p.InPort = in.Index // released when it leaves the egress queue
		}
	}
	s.Counters.Forwarded++
	if s.Trace != nil {
		s.Trace(s, p, op)
	}
	op.enqueue(p)
}

// inHole reports whether p's destination is under the black-holed prefix
// (checked after the uSID shift, so the top uSID is the next hop's).
func (s *Switch) inHole(p *Packet) bool {
	dst := p.Data[offIPv6Dst : offIPv6Dst+16]
	if s.mode == ForwardUSID {
		return binary.BigEndian.Uint16(dst[4:]) == s.holeSID
	}
	return binary.BigEndian.Uint16(dst[6:]) == s.holeSID
}

// usidNext applies uN: the top uSID must be this switch's; shift the rest
// left by 16 bits and look the new top /48 up.
func (s *Switch) usidNext(p *Packet) int32 {
	dst := p.Data[offIPv6Dst : offIPv6Dst+16]
	if !s.ownsTopUSID(dst) {
		return -1
	}
	slot := s.usidSlot(binary.BigEndian.Uint16(dst[6:]))
	copy(dst[4:14], dst[6:16])
	dst[14], dst[15] = 0, 0
	s.Counters.USIDShifts++
	if slot == nil {
		return -1 // no such next hop, or the argument is exhausted
	}
	return *slot
}

// ownsTopUSID reports whether the active uSID of dst is this switch's.
func (s *Switch) ownsTopUSID(dst []byte) bool {
	return binary.BigEndian.Uint32(dst) == USIDBlock && binary.BigEndian.Uint16(dst[4:]) == s.USID
}

// usidSlot returns the table entry (egress port, or -1) of the uSID next,
// or nil when next names nothing this switch can reach.
func (s *Switch) usidSlot(next uint16) *int32 {
	if next == 0 {
		return nil
	}
	plane, typ, idx := SplitUSID(next)
	if plane != int(s.plane) {
		return nil
	}
	t := s.usid[typ]
	if idx >= len(t) {
		return nil
	}
	return &t[idx]
}

// prefetchEgress is the uSID part of Link.Prefetch (stages 3 to 5) for
// frame p arriving at s: only reads, no shift.
func (s *Switch) prefetchEgress(stage int, p *Packet) {
	if len(p.Data) < offL4 {
		return
	}
	dst := p.Data[offIPv6Dst : offIPv6Dst+16]
	if !s.ownsTopUSID(dst) {
		return
	}
	slot := s.usidSlot(binary.BigEndian.Uint16(dst[6:]))
	if slot == nil {
		return
	}
	if stage == 3 {
		sim.PrefetchLine(unsafe.Pointer(slot))
		return
	}
	out := *slot
	if out < 0 || int(out) >= len(s.slab) {
		return
	}
	op := &s.slab[out]
	if stage == 4 {
		op.prefetchHot()
		return
	}
	op.prefetchClass(op.cfg.Classes[p.DSCP()])
}

// fibNext looks the destination host address up: own subnet → the host's
// port; otherwise the subnet's next-hop group, hashed (ECMP) or fixed per
// destination (static).
func (s *Switch) fibNext(p *Packet) int32 {
	plane, subnet, host, ok := ParseHostAddr(p.Data[offIPv6Dst : offIPv6Dst+16])
	if !ok || plane != s.Plane {
		return -1
	}
	if subnet == s.localSubnet {
		if host >= len(s.hostPorts) {
			return -1
		}
		return s.hostPorts[host]
	}
	if subnet >= len(s.subnetGroup) || s.subnetGroup[subnet] < 0 {
		return -1
	}
	g := s.groups[s.subnetGroup[subnet]]
	if len(g) == 1 {
		return g[0]
	}
	if s.mode == ForwardStatic {
		return g[(subnet*65536+host)%len(g)]
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
