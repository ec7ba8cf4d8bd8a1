package endpoint

import (
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/header"

	"github.com/vcluster/vcluster/fabric"
)

// echoBridge answers ICMPv6 echo requests as a kernel behind a TUN would:
// it swaps the addresses, turns the request into a reply and sends it back
// through the host's NIC.
type echoBridge struct {
	h       *Host
	got     int
	replied int
}

func (b *echoBridge) DeliverIPv6(pkt []byte) {
	b.got++
	ip := header.IPv6(pkt)
	if !ip.IsValid(len(pkt)) || ip.TransportProtocol() != header.ICMPv6ProtocolNumber {
		return
	}
	out := append([]byte(nil), pkt...)
	oip := header.IPv6(out)
	src, dst := ip.SourceAddress(), ip.DestinationAddress()
	oip.SetSourceAddress(dst)
	oip.SetDestinationAddress(src)
	icmp := header.ICMPv6(oip.Payload())
	if icmp.Type() != header.ICMPv6EchoRequest {
		return
	}
	icmp.SetType(header.ICMPv6EchoReply)
	icmp.SetChecksum(0)
	icmp.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: icmp, Src: dst, Dst: src}))
	if b.h.SendIPv6(out) {
		b.replied++
	}
}

func TestBridgeTakesNetstackTrafficBothWays(t *testing.T) {
	for _, mode := range modes() {
		n := newTestNet(t, mode, 1)
		b := &echoBridge{h: n.hosts[3]}
		n.hosts[3].SetBridge(b)
		before := n.hosts[3].NIC.Counters.ToNetstack
		var ok bool
		calls := 0
		if err := n.hosts[0].Ping(n.topo.HostAddr(3, 1), 9, 1, 64, time.Millisecond, func(_ time.Duration, k bool) { ok = k; calls++ }); err != nil {
			t.Fatal(err)
		}
		n.loop.Run()
		if calls != 1 || !ok {
			t.Fatalf("%v: ping through the bridge: done %d times, ok=%v", mode, calls, ok)
		}
		if b.got != 1 || b.replied != 1 {
			t.Fatalf("%v: bridge got %d packets, replied %d; want 1 and 1", mode, b.got, b.replied)
		}
		if n.hosts[3].NIC.Counters.ToNetstack != before {
			t.Fatalf("%v: netstack got %d packets with a bridge set", mode, n.hosts[3].NIC.Counters.ToNetstack-before)
		}
		c := n.hosts[3].BridgeCounters()
		if c.Delivered != 1 || c.Sent != 1 || c.Dropped != 0 {
			t.Fatalf("%v: bridge counters %+v", mode, c)
		}
	}
}

func TestBridgeRefusesWhatIsNotIPv6(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	n.hosts[0].SetBridge(&echoBridge{h: n.hosts[0]})
	for _, pkt := range [][]byte{nil, make([]byte, 39), append([]byte{0x45}, make([]byte, 60)...), make([]byte, 1<<17)} {
		if len(pkt) > 0 && pkt[0] == 0 {
			pkt[0] = 0x60
		}
		if n.hosts[0].SendIPv6(pkt) {
			t.Fatalf("SendIPv6 of %d bytes (first %x) accepted", len(pkt), pkt[:min(1, len(pkt))])
		}
	}
	// An address outside the plan: counted as no route.
	pkt := make([]byte, 48)
	pkt[0] = 0x60
	before := n.hosts[0].NIC.Counters.TxNoRoute
	if n.hosts[0].SendIPv6(pkt) || n.hosts[0].NIC.Counters.TxNoRoute != before+1 {
		t.Fatalf("unroutable packet: accepted or not counted (TxNoRoute %d → %d)", before, n.hosts[0].NIC.Counters.TxNoRoute)
	}
	if c := n.hosts[0].BridgeCounters(); c.Dropped != 4 || c.Sent != 0 {
		t.Fatalf("bridge counters %+v, want 4 dropped", c)
	}
	n.hosts[0].SetBridge(nil)
	if c := n.hosts[0].BridgeCounters(); c != (BridgeCounters{}) {
		t.Fatalf("counters without a bridge %+v", c)
	}
}
