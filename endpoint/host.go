package endpoint

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// DefaultMTU is the IPv6 MTU (largest IPv6 packet, header included) of a
// host's netstack NIC when HostOptions.MTU is 0.
const DefaultMTU = 4200

// NICID is the id of the one netstack NIC of every host.
const NICID tcpip.NICID = 1

// HostOptions configures the hosts built by NewHosts.
type HostOptions struct {
	// MTU is the IPv6 MTU of the netstack NIC (default DefaultMTU). In uSID
	// mode frames carry 40 more bytes of outer header.
	MTU uint32
	// TCP registers netstack's TCP. Each TCP stack runs GOMAXPROCS
	// processor goroutines of its own, so TCP work is asynchronous to the
	// loop (see docs NETSTACK.md); leave it off unless a host needs TCP.
	TCP bool
	// PrefixLen of each host address (default 64).
	PrefixLen int
	// NoNetstack builds bare hosts: NIC, ports and (on first use) the RDMA
	// engine, but no netstack (Host.Stack is nil; frames for netstack are
	// counted as NICCounters.NoStack and dropped; Ping fails). The RDMA
	// path never uses netstack, so RDMA-only runs of 10^5 hosts save its
	// ~14 KiB and ~30 µs of build time per host. TCP needs a netstack.
	NoNetstack bool
	// Partition, when set, gives host h the loop it runs on and the
	// topology view it attaches through (fabric.Partitioning.Views: the
	// same fabric with the partition's loop and packet pool), for
	// partitioned parallel runs. Nil: every host uses NewHosts' loop and
	// topology.
	Partition func(h int) (*sim.Loop, *fabric.Topology)
	// RDMAChecksum makes SendRDMA compute the UDP checksum of RDMA frames
	// whose payload is fully stored. Off (checksum 0), as RoCEv2 NICs send.
	RDMAChecksum bool
	// NICTxLatency and NICRxLatency are every RDMA engine's TxLatency and
	// RxLatency (host.nicTxLatency, host.nicRxLatency).
	NICTxLatency, NICRxLatency time.Duration
}

// Host is one virtual host: a netstack and the NIC wiring it to the fabric.
type Host struct {
	ID int
	// Stack is the host's netstack: NIC NICID holding one address per
	// plane (Topology.HostAddr), default route to it. All hosts share one
	// empty, never-modified IPTables (netstack then skips every hook); give
	// a host its own with Stack.SetIPTables before changing rules.
	Stack *stack.Stack
	NIC   *NIC

	loop    *sim.Loop
	pingers []*pinger // created by Ping, one per ICMP identifier
}

// Loop returns the loop the host runs on.
func (h *Host) Loop() *sim.Loop { return h.loop }

// Addr returns the host's address in plane.
func (h *Host) Addr(plane int) [16]byte { return h.NIC.topo.HostAddr(h.ID, plane) }

// shared is what all hosts of one NewHosts call share: the random sources
// handed to netstack and read-only settings.
type shared struct {
	opts  HostOptions
	rng   *lockedRand
	seed  uint64 // flow-hash seed (uSID path choice, flow labels)
	encap bool   // uSID mode: IPv6-in-IPv6 with a uSID outer destination
}

// lockedRand is one deterministic stream serving both netstack's RandSource
// (math/rand.Source64) and its SecureRNG (io.Reader), so stack.New never
// reads crypto/rand. Netstack requires RandSource to be thread-safe (TCP
// processors draw from it), hence the mutex.
type lockedRand struct {
	mu sync.Mutex
	r  *mrand.Rand
}

// Int63 implements math/rand.Source.
func (l *lockedRand) Int63() int64 {
	l.mu.Lock()
	v := l.r.Int64()
	l.mu.Unlock()
	return v
}

// Uint64 implements math/rand.Source64.
func (l *lockedRand) Uint64() uint64 {
	l.mu.Lock()
	v := l.r.Uint64()
	l.mu.Unlock()
	return v
}

// Seed implements math/rand.Source; the stream is fixed by the run seed.
func (*lockedRand) Seed(int64) {}

// Read implements io.Reader (netstack's SecureRNG).
func (l *lockedRand) Read(b []byte) (int, error) {
	l.mu.Lock()
	for i := 0; i < len(b); i += 8 {
		v := l.r.Uint64()
		for j := i; j < len(b) && j < i+8; j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	l.mu.Unlock()
	return len(b), nil
}

// NewHosts builds one Host per topology host and attaches each NIC to the
// host's ports (port.Owner and port.Notify). All stacks share one random
// stream derived from the loop's seed and run on the loop's virtual clock.
func NewHosts(loop *sim.Loop, topo *fabric.Topology, o HostOptions) ([]*Host, error) {
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.PrefixLen == 0 {
		o.PrefixLen = 64
	}
	if o.MTU < header.IPv6MinimumMTU {
		return nil, fmt.Errorf("mtu: must be ≥ %d, got %d", header.IPv6MinimumMTU, o.MTU)
	}
	if o.PrefixLen < 1 || o.PrefixLen > 128 {
		return nil, fmt.Errorf("prefixLen: must be 1..128, got %d", o.PrefixLen)
	}
	if o.NoNetstack && o.TCP {
		return nil, errors.New("endpoint: TCP needs a netstack")
	}
	if topo == nil || loop == nil {
		return nil, errors.New("endpoint: nil loop or topology")
	}
	sh := &shared{
		opts:  o,
		rng:   &lockedRand{r: sim.NewStream(loop.Seed(), "endpoint/netstack")},
		seed:  sim.StreamSeed(loop.Seed(), "endpoint/flowhash"),
		encap: topo.Mode == fabric.ForwardUSID,
	}
	maxFrame := fabric.EthHeaderLen + int(o.MTU)
	if sh.encap {
		maxFrame += fabric.IPv6HeaderLen
	}
	if maxFrame > topo.Pool.LargeCap {
		return nil, fmt.Errorf("mtu: %d-byte frames exceed the fabric's %d-byte maximum frame", maxFrame, topo.Pool.LargeCap)
	}
	hosts := make([]*Host, topo.Hosts)
	nics := make([]NIC, topo.Hosts) // one allocation for all NICs
	for i := range hosts {
		hl, ht := loop, topo
		if o.Partition != nil {
			hl, ht = o.Partition(i)
		}
		h := &Host{ID: i, loop: hl, NIC: &nics[i]}
		if err := h.init(hl, ht, sh); err != nil {
			return nil, fmt.Errorf("host %d: %w", i, err)
		}
		hosts[i] = h
	}
	return hosts, nil
}

var emptyTables = &stack.IPTables{}

func (h *Host) init(loop *sim.Loop, topo *fabric.Topology, sh *shared) error {
	n := h.NIC
	n.host = h.ID
	n.loop = loop
	n.topo = topo
	n.sh = sh
	n.mtu = sh.opts.MTU
	n.ports = topo.HostPorts[h.ID]
	for _, pt := range n.ports {
		pt.Owner = n
		pt.Notify = n
	}
	if sh.opts.NoNetstack {
		return nil
	}
	tps := []stack.TransportProtocolFactory{udp.NewProtocol, icmp.NewProtocol6}
	if sh.opts.TCP {
		tps = append(tps, tcp.NewProtocol)
	}
	rng := sh.rng
	if sh.opts.Partition != nil {
		// Hosts on different partitions run on different goroutines: each
		// draws from a stream of its own, so the draws do not depend on
		// which partition runs first (the single loop keeps one stream).
		rng = &lockedRand{r: sim.NewStream(loop.Seed(), "endpoint/netstack/"+strconv.Itoa(h.ID))}
	}
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv6.NewProtocolWithOptions(ipv6.Options{})},
		TransportProtocols: tps,
		Clock:              sim.NetstackClock{L: loop},
		RandSource:         rng,
		SecureRNG:          rng,
		// Never modified, so netstack skips every hook; an unmodified
		// table is only read, hence safe to share.
		IPTables: emptyTables,
	})
	h.Stack = s
	if err := s.CreateNIC(NICID, n); err != nil {
		return fmt.Errorf("create NIC: %s", err)
	}
	for pl := 0; pl < topo.Planes; pl++ {
		a := tcpip.AddrFrom16(topo.HostAddr(h.ID, pl))
		pa := tcpip.ProtocolAddress{Protocol: ipv6.ProtocolNumber,
			AddressWithPrefix: tcpip.AddressWithPrefix{Address: a, PrefixLen: sh.opts.PrefixLen}}
		if err := s.AddProtocolAddress(NICID, pa, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("add address %s: %s", a, err)
		}
	}
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv6EmptySubnet, NIC: NICID}})
	return nil
}

// Close shuts the host's netstack down (its endpoints and, with TCP, its
// processor goroutines) and detaches the NIC from netstack. The NIC keeps
// owning its ports: frames still arriving are counted and dropped.
func (h *Host) Close() {
	for _, pg := range h.pingers {
		for _, p := range pg.pend {
			p.timer.Stop()
		}
		pg.ep.Close()
	}
	h.pingers = nil
	if h.Stack == nil {
		return
	}
	h.Stack.Close()
	h.Stack.Wait()
}
