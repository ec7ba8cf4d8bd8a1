package endpoint

// PacketBridge takes a host's IP traffic in netstack's place: a lab host
// hands it to a TUN device, so a kernel's network stack answers for the
// host (ping, TCP) while RDMA stays on the NIC's engine.
type PacketBridge interface {
	// DeliverIPv6 receives one inbound IPv6 packet (header onwards,
	// decapsulated) that netstack would have got. It runs on the loop
	// goroutine and must not keep pkt: the bytes are reused after it
	// returns.
	DeliverIPv6(pkt []byte)
}

// BridgeCounters count what a host's bridge carried.
type BridgeCounters struct {
	Delivered uint64 // inbound packets handed to the bridge
	Sent      uint64 // packets from the bridge put on a port
	Dropped   uint64 // packets from the bridge refused: not IPv6, too short or too large
}

type bridge struct {
	b PacketBridge
	c BridgeCounters
}

func (br *bridge) deliver(pkt []byte) {
	br.c.Delivered++
	br.b.DeliverIPv6(pkt)
}

// SetBridge makes b take every inbound IPv6 packet that is not RDMA
// (UDP 4791) instead of netstack (nil restores netstack). Without a
// bridge nothing of the host changes. Call it on the loop goroutine.
func (h *Host) SetBridge(b PacketBridge) {
	if b == nil {
		h.NIC.bridge = nil
		return
	}
	h.NIC.bridge = &bridge{b: b}
}

// BridgeCounters reports what the bridge carried (zero without one).
func (h *Host) BridgeCounters() BridgeCounters {
	if h.NIC.bridge == nil {
		return BridgeCounters{}
	}
	return h.NIC.bridge.c
}

// SendIPv6 sends one IPv6 packet (header onwards) out of the host's NIC
// as netstack's output goes: on the port of its destination's plane,
// with the Ethernet header (and in uSID mode the outer header) written
// and a flow label if it has none. It copies pkt. It reports whether the
// packet was put on a port; refusals are counted (NICCounters.TxNoRoute
// for a destination outside the addressing plan, BridgeCounters.Dropped
// for a packet that is not IPv6 or does not fit a frame). Call it on the
// loop goroutine.
func (h *Host) SendIPv6(pkt []byte) bool {
	n := h.NIC
	var c *BridgeCounters
	if n.bridge != nil {
		c = &n.bridge.c
	}
	off := offIP
	if n.sh.encap {
		off += ipLen
	}
	if len(pkt) < ipLen || pkt[0]>>4 != 6 || off+len(pkt) > n.topo.Pool.LargeCap {
		if c != nil {
			c.Dropped++
		}
		return false
	}
	p := n.topo.Pool.Get(off + len(pkt))
	copy(p.Data[off:], pkt)
	before := n.Counters.TxPackets
	n.route(p, off, len(pkt))
	ok := n.Counters.TxPackets != before
	if c != nil && ok {
		c.Sent++
	}
	return ok
}
