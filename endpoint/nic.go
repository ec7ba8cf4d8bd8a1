package endpoint

import (
	"encoding/binary"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// Frame offsets (the fabric's layout: Ethernet, then IPv6 at once).
const (
	ethLen   = fabric.EthHeaderLen
	ipLen    = fabric.IPv6HeaderLen
	udpLen   = fabric.UDPHeaderLen
	offIP    = ethLen
	offL4    = ethLen + ipLen
	offInner = ethLen + ipLen // inner IPv6 header of an IPv6-in-IPv6 frame
	outerHop = 64             // hop limit of the outer (uSID) header
)

// RDMAEngine takes the RoCEv2 frames (UDP destination port 4791) a NIC
// receives. p is decapsulated: p.Data starts at the Ethernet header,
// followed by the (inner) IPv6 header, UDP and the BTH; its ECN field
// already carries any CE mark from the outer header. plane is the port it
// arrived on. The engine takes ownership of p (it must Release it).
type RDMAEngine interface {
	Receive(p *fabric.Packet, plane int)
}

// TxReadyEngine is optionally implemented by an RDMAEngine that wants to be
// told when a plane port finished serializing a frame (to pull its next
// segment instead of queueing at the host).
type TxReadyEngine interface {
	TxReady(plane int)
}

// NICCounters count what one NIC did.
type NICCounters struct {
	RxPackets  uint64 // frames received from the fabric
	TxPackets  uint64 // frames put on a port (netstack and RDMA)
	ToNetstack uint64 // frames handed up to netstack
	ToRDMA     uint64 // frames handed to the RDMA engine
	FromStack  uint64 // packets netstack wrote
	RDMASent   uint64 // frames sent by SendRDMA
	Decap      uint64 // IPv6-in-IPv6 frames decapsulated
	Malformed  uint64 // received frames that do not parse (dropped)
	NoRDMA     uint64 // RoCEv2 frames dropped: no RDMA engine attached
	ECNDrop    uint64 // CE outer over Not-ECT inner (RFC 6040: dropped)
	NoStack    uint64 // netstack-bound frames dropped: host closed
	TxNoRoute  uint64 // netstack packets to an address outside the plan, or unconnected port
	TxDropped  uint64 // netstack packets too large or not IPv6
}

// NIC is a host's network card: a stack.LinkEndpoint for the host's
// netstack (one netstack NIC for all planes) and the fabric.Device owning
// the host's port in every plane. It has no goroutines and no queues of its
// own: what netstack writes is on a port queue before WritePackets returns,
// and what a port receives is in netstack (or the RDMA engine) before
// Ingress returns.
type NIC struct {
	// RDMA receives RoCEv2 frames; nil drops them (counted as NoRDMA).
	RDMA     RDMAEngine
	Counters NICCounters

	host  int
	loop  *sim.Loop
	topo  *fabric.Topology
	sh    *shared
	ports []*fabric.Port // [plane], shared with the topology
	mtu   uint32
	disp  stack.NetworkDispatcher
	// eth caches each cabled plane's Ethernet addresses (peer MAC, own
	// MAC; bit p of ethOK: plane p's are there): building them reads the
	// cold ends of two ports, a cache miss each at a million-port scale.
	eth   []byte
	ethOK uint32
	// bridge, when set (Host.SetBridge), takes the netstack-bound IPv6
	// packets instead of netstack (bridge.go).
	bridge *bridge
}

var (
	_ stack.LinkEndpoint        = (*NIC)(nil)
	_ fabric.Device             = (*NIC)(nil)
	_ fabric.TxReadyNotifier    = (*NIC)(nil)
	_ stack.NetworkLinkEndpoint = (*NIC)(nil)
)

// Host returns the host id.
func (n *NIC) Host() int { return n.host }

// Port returns the NIC's port in plane.
func (n *NIC) Port(plane int) *fabric.Port { return n.ports[plane] }

// Planes returns the number of ports (planes).
func (n *NIC) Planes() int { return len(n.ports) }

// Capture taps the plane's port: t sees every frame it sends or receives
// (fabric.Port.Tap). A *pcap.Writer is a fabric.FrameTap.
func (n *NIC) Capture(plane int, t fabric.FrameTap) { n.ports[plane].Tap(t) }

// --- stack.LinkEndpoint ---

// MTU implements stack.LinkEndpoint: the largest IPv6 packet.
func (n *NIC) MTU() uint32 { return n.mtu }

// SetMTU implements stack.LinkEndpoint.
func (n *NIC) SetMTU(mtu uint32) { n.mtu = mtu }

// MaxHeaderLength implements stack.LinkEndpoint. Frames are copied into
// fabric packets, so netstack need not reserve link headroom.
func (*NIC) MaxHeaderLength() uint16 { return 0 }

// LinkAddress implements stack.LinkEndpoint. The NIC spans several ports
// (one MAC each) and needs no link-address resolution, so it has none.
func (*NIC) LinkAddress() tcpip.LinkAddress { return "" }

// SetLinkAddress implements stack.LinkEndpoint (ignored).
func (*NIC) SetLinkAddress(tcpip.LinkAddress) {}

// Capabilities implements stack.LinkEndpoint: receive checksum offload
// (the fabric drops corrupted frames, so what arrives is intact) and no
// link-address resolution. Transmit checksum offload is deliberately not
// claimed: with it netstack leaves UDP/TCP checksums 0, which is invalid on
// IPv6 and shows as bad in every capture; letting netstack compute them
// costs the same as the NIC doing it.
func (*NIC) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityRXChecksumOffload
}

// Attach implements stack.LinkEndpoint.
func (n *NIC) Attach(d stack.NetworkDispatcher) { n.disp = d }

// IsAttached implements stack.LinkEndpoint.
func (n *NIC) IsAttached() bool { return n.disp != nil }

// Wait implements stack.LinkEndpoint (no goroutines to wait for).
func (*NIC) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint.
func (*NIC) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }

// AddHeader implements stack.LinkEndpoint; the link header is written when
// the packet is copied to the fabric.
func (*NIC) AddHeader(*stack.PacketBuffer) {}

// ParseHeader implements stack.LinkEndpoint; packets are delivered without
// a link header.
func (*NIC) ParseHeader(*stack.PacketBuffer) bool { return true }

// Close implements stack.LinkEndpoint.
func (n *NIC) Close() { n.disp = nil }

// SetOnCloseAction implements stack.LinkEndpoint.
func (*NIC) SetOnCloseAction(func()) {}

// WritePackets implements stack.LinkEndpoint: every packet is copied into a
// fabric frame and queued on the port of its destination's plane, now.
// Packets the NIC cannot send are counted and dropped (as a real NIC does);
// netstack keeps ownership of pkts.
func (n *NIC) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	s := pkts.AsSlice()
	for _, pkt := range s {
		n.sendStack(pkt)
	}
	return len(s), nil
}

func (n *NIC) sendStack(pkt *stack.PacketBuffer) {
	n.Counters.FromStack++
	size := pkt.Size()
	off := offIP
	if n.sh.encap {
		off += ipLen
	}
	if size < ipLen || off+size > n.topo.Pool.LargeCap {
		n.Counters.TxDropped++
		return
	}
	p := n.topo.Pool.Get(off + size)
	// Copy the packet's views into the frame without allocating.
	vl, skip := pkt.AsViewList()
	dst := p.Data[off:]
	for v := vl.Front(); v != nil && len(dst) > 0; v = v.Next() {
		b := v.AsSlice()
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		dst = dst[copy(dst, b):]
	}
	n.route(p, off, size)
}

// route sends a frame whose IPv6 packet of size bytes is in place at off
// (after the outer header's room in uSID mode): out of the port of its
// destination's plane, with a flow label, the outer header and the
// Ethernet header written.
func (n *NIC) route(p *fabric.Packet, off, size int) {
	ip := header.IPv6(p.Data[off:])
	if ip[0]>>4 != 6 {
		n.Counters.TxDropped++
		p.Release()
		return
	}
	dstHost, plane, ok := n.topo.HostOf(ip[24:40])
	if !ok || plane >= len(n.ports) || !n.cabled(plane) {
		n.Counters.TxNoRoute++
		p.Release()
		return
	}
	h := flowHash(n.sh.seed, ip)
	tc, fl := ip.TOS()
	if fl == 0 {
		// netstack always writes 0; label flows as Linux's auto flow
		// labels do, so ECMP spreads them.
		fl = uint32(h) & 0xfffff
		ip.SetTOS(tc, fl)
	}
	if n.sh.encap {
		choice := int(h>>32) & 0x7fffffff
		n.encap(p.Data, plane, dstHost, choice, tc, fl, size)
	}
	n.writeEth(p.Data, plane)
	n.transmit(p, plane)
}

// encap writes the outer IPv6 header (uSID path destination) of a frame
// whose inner packet of innerLen bytes starts at offInner.
func (n *NIC) encap(d []byte, plane, dstHost, choice int, tc uint8, fl uint32, innerLen int) {
	outer := header.IPv6(d[offIP:offInner])
	outer.Encode(&header.IPv6Fields{
		TrafficClass:      tc,
		FlowLabel:         fl,
		PayloadLength:     uint16(innerLen),
		TransportProtocol: fabric.ProtoIPv6,
		HopLimit:          outerHop,
		SrcAddr:           tcpip.AddrFrom16(n.topo.HostAddr(n.host, plane)),
		DstAddr:           tcpip.AddrFrom16(n.topo.PathUSID(n.host, dstHost, plane, choice)),
	})
}

// cabled reports whether plane's port is connected to a peer.
func (n *NIC) cabled(plane int) bool {
	return n.ethOK&(1<<plane) != 0 || n.ports[plane].Peer != nil
}

// writeEth writes the Ethernet header of a frame leaving plane's port
// (which must be cabled).
func (n *NIC) writeEth(d []byte, plane int) {
	if n.ethOK&(1<<plane) == 0 {
		if n.eth == nil {
			n.eth = make([]byte, 12*len(n.ports))
		}
		pt := n.ports[plane]
		copy(n.eth[plane*12:], pt.Peer.MAC[:])
		copy(n.eth[plane*12+6:], pt.MAC[:])
		n.ethOK |= 1 << plane
	}
	copy(d[0:12], n.eth[plane*12:plane*12+12])
	binary.BigEndian.PutUint16(d[12:14], fabric.EtherTypeIPv6)
}

// transmit queues a complete frame on plane's port.
func (n *NIC) transmit(p *fabric.Packet, plane int) {
	p.SentAt = n.loop.Now()
	n.Counters.TxPackets++
	n.ports[plane].Enqueue(p)
}

// flowHash hashes an IPv6 packet's flow: addresses, next header, and the
// port pair (TCP/UDP) or echo identifier (ICMPv6).
func flowHash(seed uint64, ip []byte) uint64 {
	be := binary.BigEndian
	h := sim.Hash64(seed, be.Uint64(ip[8:]))
	h = sim.Hash64(h, be.Uint64(ip[16:]))
	h = sim.Hash64(h, be.Uint64(ip[24:]))
	h = sim.Hash64(h, be.Uint64(ip[32:]))
	nh := ip[6]
	var l4 uint64
	switch {
	case (nh == fabric.ProtoUDP || nh == uint8(header.TCPProtocolNumber)) && len(ip) >= ipLen+4:
		l4 = uint64(be.Uint32(ip[ipLen:]))
	case nh == fabric.ProtoICMPv6 && len(ip) >= ipLen+6:
		l4 = uint64(be.Uint16(ip[ipLen+4:]))
	}
	return sim.Hash64(h, uint64(nh)<<32|l4)
}

// TxReady implements fabric.TxReadyNotifier.
func (n *NIC) TxReady(pt *fabric.Port) {
	if e, ok := n.RDMA.(TxReadyEngine); ok {
		e.TxReady(int(pt.Index))
	}
}

// Ingress implements fabric.Device: parse, decapsulate, and hand the frame
// to the RDMA engine (UDP 4791) or netstack. Frames that do not parse are
// counted as Malformed and dropped; Ingress never panics on bad bytes.
func (n *NIC) Ingress(p *fabric.Packet, in *fabric.Port) {
	n.Counters.RxPackets++
	plane := 0
	if in != nil {
		plane = int(in.Index)
	}
	d := p.Data
	if len(d) < offL4 || binary.BigEndian.Uint16(d[12:14]) != fabric.EtherTypeIPv6 || d[offIP]>>4 != 6 {
		n.malformed(p)
		return
	}
	// Bytes the frame stands for: stored, or up to the wire length when
	// the payload is elided.
	avail := len(d)
	if p.Flags&fabric.FlagElided != 0 {
		avail = max(avail, p.WireLen-fabric.FCSLen)
	}
	plen := int(binary.BigEndian.Uint16(d[offIP+4:]))
	if offL4+plen > avail {
		n.malformed(p)
		return
	}
	nh := d[offIP+6]
	if nh == fabric.ProtoIPv6 {
		if !n.decap(p, plen) {
			return
		}
		d = p.Data
		plen = int(binary.BigEndian.Uint16(d[offIP+4:]))
		nh = d[offIP+6]
	}
	if nh == fabric.ProtoUDP && plen >= udpLen && len(d) >= offL4+4 &&
		binary.BigEndian.Uint16(d[offL4+2:]) == fabric.RoCEv2Port {
		if len(d) < offL4+udpLen {
			n.malformed(p)
			return
		}
		if n.RDMA == nil {
			n.Counters.NoRDMA++
			p.Release()
			return
		}
		n.Counters.ToRDMA++
		n.RDMA.Receive(p, plane)
		return
	}
	if offL4+plen > len(d) {
		// Elided payload cannot go up into netstack.
		n.malformed(p)
		return
	}
	if n.bridge != nil {
		n.bridge.deliver(d[offIP : offL4+plen])
		p.Release()
		return
	}
	if n.disp == nil {
		n.Counters.NoStack++
		p.Release()
		return
	}
	pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{
		Payload: buffer.MakeWithData(d[offIP : offL4+plen]),
	})
	p.Release()
	n.Counters.ToNetstack++
	n.disp.DeliverNetworkPacket(header.IPv6ProtocolNumber, pkt)
	pkt.DecRef()
}

func (n *NIC) malformed(p *fabric.Packet) {
	n.Counters.Malformed++
	p.Release()
}

// decap strips the outer header of an IPv6-in-IPv6 frame whose outer
// payload length is plen (already checked against the frame), moving the
// Ethernet header forward so p.Data starts at it again, and combines ECN per
// RFC 6040 (normal mode). It reports whether the frame survives.
func (n *NIC) decap(p *fabric.Packet, plen int) bool {
	d := p.Data
	if plen < ipLen || len(d) < offInner+ipLen || d[offInner]>>4 != 6 {
		n.malformed(p)
		return false
	}
	iplen := int(binary.BigEndian.Uint16(d[offInner+4:]))
	if ipLen+iplen != plen {
		n.malformed(p)
		return false
	}
	outer := header.IPv6(d[offIP:])
	inner := header.IPv6(d[offInner:])
	otc, _ := outer.TOS()
	itc, ifl := inner.TOS()
	ecn, ok := decapECN(otc&3, itc&3)
	if !ok {
		n.Counters.ECNDrop++
		p.Release()
		return false
	}
	if ecn != itc&3 {
		inner.SetTOS(itc&^3|ecn, ifl)
	}
	copy(d[ipLen:offInner], d[:ethLen])
	p.Data = d[ipLen:]
	p.WireLen = max(p.WireLen-ipLen, fabric.MinFrameLen+fabric.FCSLen)
	n.Counters.Decap++
	return true
}

// decapECN is RFC 6040's decapsulation table (section 4.2, normal mode):
// the inner ECN field after decapsulation, or !ok to drop.
func decapECN(outer, inner uint8) (uint8, bool) {
	switch {
	case outer == fabric.ECNCE:
		if inner == fabric.ECNNotECT {
			return 0, false
		}
		return fabric.ECNCE, true
	case outer == fabric.ECNECT1 && inner == fabric.ECNECT0:
		return fabric.ECNECT1, true
	}
	return inner, true
}
