package fabric

import (
	"encoding/binary"
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// ForwardUSID is SRv6 uN shift-and-forward on the outer destination
// (RFC 9800 NEXT-C-SID) with a static /48 FIB; no ECMP.
const ForwardUSID ForwardingMode = 1

// ForwardUSIDName is ForwardUSID's config word.
const ForwardUSIDName = "usid"

func init() {
	registerForwarding(ForwardUSID, forwarding{
		name:       ForwardUSIDName,
		next:       usidNext,
		prefetch:   usidPrefetch,
		holeOffset: 4, // the active uSID, after the shift
	})
}

// usidFIB is a switch's uSID port tables: uSID type, index → port; -1: none.
type usidFIB [4][]int32

// usidNext applies uN: the top uSID must be this switch's; shift the rest
// left by 16 bits and look the new top /48 up.
func usidNext(s *Switch, p *Packet) int32 {
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

// usidPrefetch follows usidNext for frame p about to arrive at s, one
// pointer per stage: the table slot of the next hop, the egress port, its
// class queue. Only reads, no shift.
func usidPrefetch(s *Switch, stage int, p *Packet) {
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
	if stage == PrefetchNextHop {
		sim.PrefetchLine(unsafe.Pointer(slot))
		return
	}
	out := *slot
	if out < 0 || int(out) >= s.slab.n {
		return
	}
	op := s.port(out)
	if stage == PrefetchEgress {
		op.prefetchHot()
		return
	}
	op.prefetchClass(op.cfg.Classes[p.DSCP()])
}
