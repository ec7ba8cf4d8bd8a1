package fabric

import (
	"encoding/binary"

	"github.com/vcluster/vcluster/sim"
)

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
// /48 is locator block + one uSID). How it picks an egress port is its
// forwarding mode's (forward_*.go); the switch does the rest of a hop.
//
// Layout: forwarding a frame reads only the first line (state, identity,
// next-hop function, tables, egress slab, hooks) and writes only the
// second (Counters), so one frame costs two of the switch's cache lines,
// both prefetched with the frame (Link.Prefetch); TestHotLayout pins
// this. The uSID tables are shared by every switch with the same contents
// (all T0s of a Clos, all its T1s) and stay cached.
type Switch struct {
	// Line 0.
	down  bool
	hole  bool  // a black hole is set (holeFrac > 0)
	plane uint8 // = Plane, here for the uSID check
	mode  ForwardingMode
	tor   bool // a programmable ToR (torm, tor_multicast.go)
	hdcOn bool // high-delay capture: forward stamps Packet.hopIn (hdc.go)
	USID  uint16
	next  nextHop  // the mode's next-hop function
	seed  uint64   // ECMP's hash seed
	usid  *usidFIB // shared, immutable once built
	slab  portSlab // the ports Ports points at
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

	localSubnet int
	hostPorts   []int32 // own subnet: host index → port
	subnetGroup []int32 // subnet → index into groups; -1: no route
	groups      [][]int32
	usidPorts   usidFIB // filled while building; usid points at the shared copy

	holeSID  uint16
	holeFrac float64
	holeRNG  sim.FastRand

	torm *torMulticast // set with tor
	pw   *pathWeights  // pathquality's weighted tables (forward_pathquality.go); nil: unweighted
	hdc  *HDCCollector // high-delay capture (hdc.go); nil: off
}

// Mode returns the switch's forwarding mode.
func (s *Switch) Mode() ForwardingMode { return s.mode }

// PFC returns the switch's ingress PFC accounting, or nil.
func (s *Switch) PFC() *IngressAccounting { return s.acct }

// port returns port i (= s.Ports[i]) by address arithmetic on the slab.
func (s *Switch) port(i int32) *Port { return s.slab.at(i) }

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
	if s.tor && s.torm.ingress(s, p, in) {
		return // replicated (each copy forwarded) or dropped
	}
	s.forward(p, in)
}

// forward is the rest of a hop for a frame the switch accepted: hop
// limit, next hop, black hole, PFC admission, enqueue. Every copy a
// programmable ToR makes goes through it too.
func (s *Switch) forward(p *Packet, in *Port) {
	if p.HopLimit() <= 1 {
		// A router would answer ICMPv6 Time Exceeded; vcluster counts it.
		s.dropIn(p, in, DropHopLimit)
		return
	}
	out := s.next(s, p)
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
	op := s.port(out)
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
	if s.hdcOn {
		p.hopIn = in.Index + 1
	}
	if s.Trace != nil {
		s.Trace(s, p, op)
	}
	op.enqueue(p)
}

// inHole reports whether p's destination is under the black-holed prefix
// (checked after the next-hop function ran: after a uSID shift the top
// uSID is the next hop's).
func (s *Switch) inHole(p *Packet) bool {
	off := s.mode.forwarding().holeOffset
	return binary.BigEndian.Uint16(p.Data[offIPv6Dst+off:]) == s.holeSID
}
