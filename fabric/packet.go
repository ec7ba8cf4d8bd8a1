package fabric

import (
	"encoding/binary"

	"github.com/vcluster/vcluster/sim"
)

// Frame layout constants. Every frame on the simulated wire starts with an
// Ethernet header; IPv6 follows directly (no VLAN tag: PFC priorities come
// from DSCP, as in DSCP-based lossless fabrics).
const (
	EthHeaderLen  = 14
	IPv6HeaderLen = 40
	UDPHeaderLen  = 8
	FCSLen        = 4 // counted in WireLen, never stored
	EtherTypeIPv6 = 0x86DD
	EtherTypeMACC = 0x8808 // MAC control (PFC PAUSE)
	ProtoUDP      = 17
	ProtoIPv6     = 41 // IPv6-in-IPv6 (SRv6 encapsulation)
	ProtoICMPv6   = 58
	RoCEv2Port    = 4791
	offIPv6       = EthHeaderLen
	offIPv6Src    = offIPv6 + 8
	offIPv6Dst    = offIPv6 + 24
	offL4         = offIPv6 + IPv6HeaderLen
	// MinFrameLen is Ethernet's minimum frame without FCS.
	MinFrameLen = 60
)

// Packet flags.
const (
	// FlagElided: payload bytes past Data are not stored; WireLen counts them.
	FlagElided uint8 = 1 << iota
	// FlagTrimmed: a switch cut the packet to its headers.
	FlagTrimmed
)

// Packet is one frame on the wire: real header bytes (and, unless elided,
// real payload bytes) plus metadata. Packets come from a Pool and are owned
// by exactly one component at a time: whoever receives a *Packet must pass
// it on or Release it.
type Packet struct {
	// Data is the frame from the Ethernet header on, without FCS.
	Data []byte
	// WireLen is the frame's size on the wire including FCS and any elided
	// payload (but not preamble/IFG, which ports add).
	WireLen int
	next    *Packet  // intrusive FIFO link (queues, links)
	due     sim.Time // on a link: when it arrives
	EnqAt   sim.Time // when it entered its current queue
	Class   uint8    // egress traffic class (0..NumClasses-1), set at each hop from DSCP
	Flags   uint8
	InPort  int32 // ingress port index at the current switch (PFC accounting)
	// The fields above are what every hop reads (one cache line).

	SentAt  sim.Time // when the source put it on the wire
	TraceID uint64   // caller's tag, carried unchanged
	// hopIn is the ingress port index + 1 at the current switch, set only
	// by a switch with high-delay capture on (hdc.go); 0: the frame did
	// not come through its forwarding (a device put it on the port).
	hopIn int32

	pool *Pool
	buf  []byte
}

// Release returns p to its pool. p must not be used afterwards.
func (p *Packet) Release() {
	if p.pool != nil {
		p.pool.put(p)
	}
}

// EtherType returns the frame's EtherType.
func (p *Packet) EtherType() uint16 { return binary.BigEndian.Uint16(p.Data[12:14]) }

// IsIPv6 reports whether the frame carries a complete IPv6 header.
func (p *Packet) IsIPv6() bool {
	return len(p.Data) >= offL4 && p.EtherType() == EtherTypeIPv6 && p.Data[offIPv6]>>4 == 6
}

// TrafficClass returns the (outer) IPv6 traffic class byte: DSCP<<2 | ECN.
func (p *Packet) TrafficClass() uint8 {
	return p.Data[offIPv6]<<4 | p.Data[offIPv6+1]>>4
}

func (p *Packet) setTrafficClass(tc uint8) {
	p.Data[offIPv6] = 6<<4 | tc>>4
	p.Data[offIPv6+1] = p.Data[offIPv6+1]&0x0f | tc<<4
}

// DSCP returns the outer DSCP.
func (p *Packet) DSCP() uint8 { return p.TrafficClass() >> 2 }

// SetDSCP rewrites the outer DSCP, keeping ECN.
func (p *Packet) SetDSCP(d uint8) { p.setTrafficClass(d<<2 | p.TrafficClass()&3) }

// ECN codepoints.
const (
	ECNNotECT = 0
	ECNECT1   = 1
	ECNECT0   = 2
	ECNCE     = 3
)

// ECN returns the outer ECN field.
func (p *Packet) ECN() uint8 { return p.TrafficClass() & 3 }

// MarkCE sets CE if the packet is ECN-capable and reports whether it did.
func (p *Packet) MarkCE() bool {
	tc := p.TrafficClass()
	if tc&3 == ECNNotECT {
		return false
	}
	p.setTrafficClass(tc | ECNCE)
	return true
}

// HopLimit returns the outer hop limit.
func (p *Packet) HopLimit() uint8 { return p.Data[offIPv6+7] }

// FlowLabel returns the outer 20-bit flow label.
func (p *Packet) FlowLabel() uint32 {
	return binary.BigEndian.Uint32(p.Data[offIPv6:]) & 0xfffff
}

// Dst returns the outer IPv6 destination address bytes (aliasing Data).
func (p *Packet) Dst() []byte { return p.Data[offIPv6Dst : offIPv6Dst+16] }

// Src returns the outer IPv6 source address bytes (aliasing Data).
func (p *Packet) Src() []byte { return p.Data[offIPv6Src : offIPv6Src+16] }

// NextHeader returns the outer IPv6 next-header value.
func (p *Packet) NextHeader() uint8 { return p.Data[offIPv6+6] }

// Pool recycles packets. It is owned by one loop (not safe for concurrent
// use), so it needs no locking and stays deterministic. Buffers come in two
// sizes: small for header-only frames, large for full MTU frames.
type Pool struct {
	small, large []*Packet
	SmallCap     int
	LargeCap     int
	// Live counts packets handed out and not yet released (leak checks).
	Live int
}

// SmallFrameCap is the buffer size of header-only packets.
const SmallFrameCap = 256

// NewPool returns a pool whose large buffers hold maxFrame bytes.
func NewPool(maxFrame int) *Pool {
	if maxFrame < SmallFrameCap {
		maxFrame = SmallFrameCap
	}
	return &Pool{SmallCap: SmallFrameCap, LargeCap: maxFrame}
}

// Get returns a packet whose Data has length n (contents undefined) and
// wire length n+FCS, with metadata zeroed.
func (pl *Pool) Get(n int) *Packet {
	var p *Packet
	if n <= pl.SmallCap {
		if k := len(pl.small); k > 0 {
			p = pl.small[k-1]
			pl.small = pl.small[:k-1]
		} else {
			p = pl.alloc(pl.SmallCap)
		}
	} else {
		if n > pl.LargeCap {
			panic("fabric: frame larger than the pool's maximum")
		}
		if k := len(pl.large); k > 0 {
			p = pl.large[k-1]
			pl.large = pl.large[:k-1]
		} else {
			p = pl.alloc(pl.LargeCap)
		}
	}
	pl.Live++
	p.InPort = -1
	p.Data = p.buf[:n]
	p.WireLen = wireLenOf(n)
	return p
}

// alloc returns a new packet of the pool with a buffer of n bytes, padded
// to whole cache lines (linePacket).
func (pl *Pool) alloc(n int) *Packet {
	lp := &linePacket{Packet: Packet{pool: pl, buf: make([]byte, n)}}
	return &lp.Packet
}

func wireLenOf(frame int) int {
	if frame < MinFrameLen {
		frame = MinFrameLen
	}
	return frame + FCSLen
}

// Clone returns a copy of p from the same pool (for pcap taps and tests).
func (p *Packet) Clone() *Packet {
	q := p.pool.Get(len(p.Data))
	copy(q.Data, p.Data)
	q.WireLen, q.Class, q.Flags, q.InPort = p.WireLen, p.Class, p.Flags, p.InPort
	q.SentAt, q.EnqAt, q.TraceID, q.hopIn = p.SentAt, p.EnqAt, p.TraceID, p.hopIn
	return q
}

func (pl *Pool) put(p *Packet) {
	pl.Live--
	*p = Packet{pool: pl, buf: p.buf}
	if cap(p.buf) == pl.SmallCap {
		pl.small = append(pl.small, p)
	} else {
		pl.large = append(pl.large, p)
	}
}

// SetWireLen sets the wire length for a frame whose payload is elided:
// total is the full frame length (without FCS) the packet stands for.
func (p *Packet) SetWireLen(total int) {
	p.WireLen = wireLenOf(total)
	if total > len(p.Data) {
		p.Flags |= FlagElided
	}
}

// packetFIFO is an intrusive FIFO of packets with a byte count.
type packetFIFO struct {
	head, tail *Packet
	n          int
	bytes      int
}

func (q *packetFIFO) push(p *Packet) {
	p.next = nil
	if q.tail == nil {
		q.head = p
	} else {
		q.tail.next = p
	}
	q.tail = p
	q.n++
	q.bytes += p.WireLen
}

func (q *packetFIFO) pop() *Packet {
	p := q.head
	if p == nil {
		return nil
	}
	q.head = p.next
	if q.head == nil {
		q.tail = nil
	}
	p.next = nil
	q.n--
	q.bytes -= p.WireLen
	return p
}
