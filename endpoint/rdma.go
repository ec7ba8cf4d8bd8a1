package endpoint

import (
	"encoding/binary"
	"errors"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/vcluster/vcluster/fabric"
)

// EV is an entropy value: the 32-bit path selector of one RDMA packet.
//
//	bits  0..3   plane (taken modulo the topology's planes) → the NIC port
//	bits  4..13  path choice inside the plane (0..1023): in uSID mode the
//	             argument of Topology.PathUSID (the T1 index in a Clos, at
//	             most 1024 of them; aggregation and core in a fat-tree,
//	             (k/2)² ≤ 484 under uSID; taken modulo the number of paths)
//	bits 14..15  always 1 (EVPortBase): the source port is in the dynamic
//	             range 0xC000..0xFFFF
//	bits 16..31  flow label bits 0..15 (label bits 16..19 are 0)
//
// On the wire the UDP source port is EV & 0xffff and the IPv6 flow label
// EV >> 16 (PROTOCOLS.md: the low half in the port, the high half in the
// label), so EVFromWire gives back exactly the EV that was sent. Bits 14..15
// make the port what RoCEv2 NICs send: a port from the dynamic range
// carrying per-QP/per-path entropy, never 0 (a zero source port means "no
// reply port" to UDP, and plane 0 / path 0 used to put exactly that on the
// wire). MakeEV sets them, and SrcPort sets them again for an EV built by
// hand. In ECMP mode the path choice is not explicit: switches hash
// addresses, flow label and ports, so distinct EVs spread over paths.
type EV uint32

// EVPortBase are the EV bits (14..15) that are always set: the UDP source
// port EV & 0xffff lies in 0xC000..0xFFFF.
const EVPortBase = 0xc000

// MaxPathChoices is the number of path choices an EV can name (bits 4..13).
const MaxPathChoices = 1 << 10

// MakeEV builds an EV from its fields (choice taken modulo MaxPathChoices).
func MakeEV(plane, choice int, label uint16) EV {
	return EV(uint32(plane)&0xf | uint32(choice)&(MaxPathChoices-1)<<4 | EVPortBase | uint32(label)<<16)
}

// Plane returns the EV's plane bits (before the modulo by planes).
func (e EV) Plane() int { return int(e & 0xf) }

// Choice returns the EV's path-choice bits.
func (e EV) Choice() int { return int(e >> 4 & (MaxPathChoices - 1)) }

// SrcPort returns the UDP source port carrying the EV: its low 16 bits,
// with bits 14..15 forced on (never 0, always in the dynamic range).
func (e EV) SrcPort() uint16 { return uint16(e) | EVPortBase }

// FlowLabel returns the IPv6 flow label carrying the EV.
func (e EV) FlowLabel() uint32 { return uint32(e >> 16) }

// EVFromWire rebuilds the EV from a received frame's UDP source port and
// flow label.
func EVFromWire(srcPort uint16, flowLabel uint32) EV {
	return EV(uint32(srcPort) | (flowLabel&0xffff)<<16)
}

// RDMAHeader describes the headers of one RoCEv2 frame.
type RDMAHeader struct {
	DstHost int
	EV      EV
	// TrafficClass is DSCP<<2 | ECN (e.g. fabric.DSCPTrimmable<<2 |
	// fabric.ECNECT0). It is copied to the outer header in uSID mode.
	TrafficClass uint8
	// PayloadLen is the UDP payload length on the wire: BTH, extension
	// headers, data and ICRC.
	PayloadLen int
	// Stored is how many payload bytes the frame really holds (≤
	// PayloadLen); the rest is elided and only counted in the wire length.
	Stored int
	// DstPath and SrcPath are the path fields of the (inner) destination
	// and source addresses: 0 a host address, k the path address of path
	// k−1 (verbs.Tx.DstPath, fabric.HostPathAddr).
	DstPath, SrcPath uint16
}

// Errors of AllocRDMA (preallocated: the send path does not allocate).
var (
	ErrNoHost      = errors.New("endpoint: RDMA destination host out of range")
	ErrTooLarge    = errors.New("endpoint: RDMA frame larger than the fabric's maximum or IPv6 payload limit")
	ErrStored      = errors.New("endpoint: RDMA stored payload must be 0..PayloadLen")
	ErrUnconnected = errors.New("endpoint: the EV's plane port is not cabled")
)

// RDMAHeaderLen returns the header bytes AllocRDMA writes before the UDP
// payload: Ethernet + IPv6 + UDP, plus the outer IPv6 header in uSID mode.
func (n *NIC) RDMAHeaderLen() int {
	if n.sh.encap {
		return offL4 + ipLen + udpLen
	}
	return offL4 + udpLen
}

// AllocRDMA takes a frame from the pool and writes its Ethernet (toward the
// EV's plane port), [outer IPv6: own plane address → uSID path of the EV's
// plane and choice, traffic class and flow label copied from the inner
// header, hop limit 64], IPv6 and UDP (source port = EV.SrcPort(),
// destination 4791, flow label = EV high 16 bits, checksum 0: see the
// package doc) headers. It
// returns the frame and its UDP payload slice (h.Stored bytes) for the
// caller to fill with BTH, extension headers and data; then the caller
// passes p to SendRDMA (or Releases it). AllocRDMA and SendRDMA do not
// allocate.
func (n *NIC) AllocRDMA(h RDMAHeader) (p *fabric.Packet, payload []byte, err error) {
	if h.DstHost < 0 || h.DstHost >= n.topo.Hosts {
		return nil, nil, ErrNoHost
	}
	if h.Stored < 0 || h.Stored > h.PayloadLen {
		return nil, nil, ErrStored
	}
	hdr := n.RDMAHeaderLen()
	innerLen := ipLen + udpLen + h.PayloadLen
	if hdr+h.Stored > n.topo.Pool.LargeCap || innerLen > 0xffff {
		return nil, nil, ErrTooLarge
	}
	plane := h.EV.Plane() % len(n.ports)
	if !n.cabled(plane) {
		return nil, nil, ErrUnconnected
	}
	p = n.topo.Pool.Get(hdr + h.Stored)
	if h.Stored < h.PayloadLen {
		p.SetWireLen(hdr + h.PayloadLen)
	}
	d := p.Data
	n.writeEth(d, plane)
	off := offIP
	if n.sh.encap {
		n.encap(d, plane, h.DstHost, h.EV.Choice(), h.TrafficClass, h.EV.FlowLabel(), innerLen)
		off = offInner
	}
	ip := header.IPv6(d[off:])
	ip.Encode(&header.IPv6Fields{
		TrafficClass:      h.TrafficClass,
		FlowLabel:         h.EV.FlowLabel(),
		PayloadLength:     uint16(udpLen + h.PayloadLen),
		TransportProtocol: header.UDPProtocolNumber,
		HopLimit:          outerHop,
		SrcAddr:           tcpip.AddrFrom16(n.topo.HostAddr(n.host, plane)),
		DstAddr:           tcpip.AddrFrom16(n.topo.HostAddr(h.DstHost, plane)),
	})
	// The path fields (fabric.HostPathAddr): bytes 8..9 of each address.
	binary.BigEndian.PutUint16(d[off+8+8:], h.SrcPath)
	binary.BigEndian.PutUint16(d[off+24+8:], h.DstPath)
	header.UDP(d[off+ipLen:]).Encode(&header.UDPFields{
		SrcPort: h.EV.SrcPort(),
		DstPort: fabric.RoCEv2Port,
		Length:  uint16(udpLen + h.PayloadLen),
	})
	return p, d[hdr:], nil
}

// SendRDMA queues a frame built by AllocRDMA on the port of its plane (the
// plane of its source address), computing the UDP checksum first if
// HostOptions.RDMAChecksum is set and the payload is fully stored (by
// default it stays 0, as RoCEv2 NICs send it: the package doc says why).
func (n *NIC) SendRDMA(p *fabric.Packet) {
	d := p.Data
	off := offIP
	if n.sh.encap {
		off = offInner
	}
	plane := int(binary.BigEndian.Uint16(d[off+8+4:])) // source address: fd00:0:<plane>:…
	if plane >= len(n.ports) {
		n.Counters.TxNoRoute++
		p.Release()
		return
	}
	if n.sh.opts.RDMAChecksum && p.Flags&fabric.FlagElided == 0 {
		ip := header.IPv6(d[off:])
		u := header.UDP(d[off+ipLen:])
		u.SetChecksum(0)
		c := header.PseudoHeaderChecksum(header.UDPProtocolNumber, ip.SourceAddress(), ip.DestinationAddress(), u.Length())
		c = checksum.Checksum(u[:u.Length()], c)
		if c = ^c; c == 0 {
			c = 0xffff
		}
		u.SetChecksum(c)
	}
	n.Counters.RDMASent++
	n.transmit(p, plane)
}
