package labhost

import (
	"errors"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/vcluster/vcluster/compose/tunbridge"
)

// tunBridge joins the host to a TUN device in a network namespace
// (--tun-netns): the namespace's kernel becomes the host's IP stack.
// IPv6 packets it sends leave the NIC on their destination's plane (the
// device has the host's plane-0 address and a route to plane 0's hosts);
// inbound IPv6 that is not RDMA goes to it instead of netstack
// (endpoint.Host.SetBridge), so the kernel answers a ping.
type tunBridge struct {
	h    *Host
	dev  *tunbridge.Bridge
	out  chan []byte // toward the device, written by writeLoop
	free sync.Pool
	once sync.Once
	wg   sync.WaitGroup
}

// plane0Prefix is every plane-0 host address (fabric.HostAddr: fd00:0:0::/48).
var plane0Prefix = netip.MustParsePrefix("fd00:0:0::/48")

func openBridge(h *Host, netns, name string) (*tunBridge, error) {
	mtu := min(max(h.cl.Config.Fabric.MTU, tunbridge.MinMTU), tunbridge.MaxMTU)
	addr := netip.PrefixFrom(netip.AddrFrom16(h.cl.Topo.HostAddr(h.id, 0)), 64)
	dev, err := tunbridge.Open(tunbridge.Options{NetNS: netns, Name: name, Addr: addr, MTU: mtu, Routes: []netip.Prefix{plane0Prefix}})
	if err != nil {
		return nil, err
	}
	b := &tunBridge{h: h, dev: dev, out: make(chan []byte, 256)}
	b.free.New = func() any { return make([]byte, 0, mtu) }
	h.cl.Hosts[h.id].SetBridge(b) // before the driver runs the loop
	b.wg.Add(1)
	go func() { defer b.wg.Done(); b.writeLoop() }()
	return b, nil
}

// DeliverIPv6 implements endpoint.PacketBridge (on the loop goroutine):
// the packet is copied and written to the device by writeLoop; when the
// device falls behind it is dropped, as a full NIC ring drops.
func (b *tunBridge) DeliverIPv6(pkt []byte) {
	buf := append(b.free.Get().([]byte)[:0], pkt...)
	select {
	case b.out <- buf:
	default:
		b.free.Put(buf[:0])
	}
}

func (b *tunBridge) writeLoop() {
	for pkt := range b.out {
		if _, err := b.dev.Write(pkt); err != nil && errors.Is(err, os.ErrClosed) {
			return
		}
		b.free.Put(pkt[:0])
	}
}

// readLoop moves what the namespace sends onto the NIC until Close.
func (b *tunBridge) readLoop() {
	h := b.h
	host := h.cl.Hosts[h.id]
	buf := make([]byte, 65536)
	for {
		n, err := b.dev.Read(buf)
		if err != nil {
			if h.stopping.Load() || errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond) // a transient error: do not spin
			continue
		}
		pkt := append([]byte(nil), buf[:n]...)
		h.loop.Inject(func() { host.SendIPv6(pkt) })
	}
}

func (b *tunBridge) close() {
	b.once.Do(func() {
		b.dev.Close()
		close(b.out)
		b.wg.Wait()
	})
}
