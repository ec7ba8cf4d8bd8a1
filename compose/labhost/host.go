package labhost

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// DefaultKeepalive is how often a host says Hello on every plane.
const DefaultKeepalive = time.Second

// Options configure a lab host.
type Options struct {
	// ID is the host this process runs (0..hosts-1).
	ID int
	// Lab is the resolved lab configuration (labspec.Resolve); the host
	// builds its cluster from LabTimers(Lab.Config) and says Lab.Digest.
	Lab labspec.Lab
	// Fabric is the fabric's tunnel address (host:port), or one address
	// per plane, comma-separated in plane order, when each plane has its
	// own fabric (a lab's --fabric-per-plane). A name is resolved again
	// while its plane hears nothing (a fabric container restarted with a
	// new address).
	Fabric string
	// Secret is the lab's secret (tunnel.LoadSecret).
	Secret []byte
	// API is the HTTP listen address ("127.0.0.1:0" picks a port).
	API string
	// TunNetNS, when set, opens a TUN device in that network namespace
	// with the host's plane-0 address (bridge.go).
	TunNetNS string
	// TunOptional, with TunNetNS, goes on without the TUN device when the
	// machine does not allow one (no /dev/net/tun, no CAP_NET_ADMIN: a
	// Swarm service), saying so in the log.
	TunOptional bool
	// TunName is the TUN device's name (tunbridge.DefaultName when "";
	// a CNI plugin passes CNI_IFNAME).
	TunName string
	// Keepalive is the Hello period (default DefaultKeepalive).
	Keepalive time.Duration
	// Log receives the host's log lines (default: stderr).
	Log *log.Logger
}

// Check validates o against its lab: every problem names the option.
func (o Options) Check() error {
	hosts := o.Lab.Config.Fabric.Hosts
	switch {
	case o.ID < 0 || o.ID >= hosts:
		return fmt.Errorf("--id: %d is out of range; must be a host in [0, %d]", o.ID, hosts-1)
	case len(o.Secret) == 0:
		return errors.New("--secret-file: no secret (create one with tunnel.NewSecret)")
	case o.Keepalive < 0:
		return fmt.Errorf("keepalive: %v must be > 0", o.Keepalive)
	}
	if _, err := o.fabrics(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(o.API); err != nil {
		return fmt.Errorf("--api: %q is not a host:port address (%v)", o.API, err)
	}
	return nil
}

// fabrics is Fabric as one address per plane.
func (o Options) fabrics() ([]string, error) {
	planes := o.Lab.Config.Fabric.Planes
	items := strings.Split(o.Fabric, ",")
	for i, a := range items {
		a = strings.TrimSpace(a)
		items[i] = a
		if _, err := netip.ParseAddrPort(a); err != nil {
			if _, _, err2 := net.SplitHostPort(a); err2 != nil || a == "" {
				return nil, fmt.Errorf("--fabric: %q is not a host:port address (%v); want one address, or one per plane comma-separated", a, err)
			}
		}
	}
	switch len(items) {
	case 1:
		all := make([]string, planes)
		for i := range all {
			all[i] = items[0]
		}
		return all, nil
	case planes:
		return items, nil
	}
	return nil, fmt.Errorf("--fabric: %d addresses for %d planes; want one address, or one per plane in plane order", len(items), planes)
}

// Host is one running lab host.
type Host struct {
	id      int
	lab     labspec.Lab
	cl      *cluster.Cluster
	loop    *sim.Loop
	planes  int
	log     *log.Logger
	started time.Time
	session uint64

	// tunnel
	conn       *tunnel.Conn
	sender     *tunnel.Sender
	fabricAddr []netip.AddrPort // per plane; loop goroutine
	fabricName string
	fabrics    []string         // per plane, as given
	txKey      *tunnel.Key      // loop goroutine
	rx         *tunnel.Receiver // reader goroutine
	streams    []tunnel.Stream  // per plane, toward the fabric; loop goroutine
	sealBuf    []byte           // loop goroutine
	lastAck    []atomic.Int64   // per plane: wall time (Unix ns) of the last HelloAck
	helloEvery time.Duration
	drops      tunnel.Counters
	framesIn   atomic.Uint64
	framesOut  atomic.Uint64
	digestOnce sync.Once
	batches    sync.Pool

	// HTTP
	apiLn net.Listener
	srv   *http.Server
	ex    *exchange
	qps   *qpBook // loop goroutine
	lag   lagRing
	stats hostStats
	// registered is what the runs accepted so far register (3 × size each).
	registered atomic.Uint64

	// driver
	work     chan func()
	stopping atomic.Bool
	stopOnce sync.Once
	done     chan struct{} // the driver returned
	bg       sync.WaitGroup

	bridge *tunBridge
}

// New builds the host's cluster, opens its tunnel socket and API listener
// and starts it: the loop's driver, the tunnel reader, the keepalive and
// the HTTP server. Close stops it.
func New(o Options) (*Host, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Keepalive == 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.Log == nil {
		o.Log = log.New(os.Stderr, fmt.Sprintf("vcluster host %d: ", o.ID), log.LstdFlags|log.Lmicroseconds)
	}
	cfg := LabTimers(o.Lab.Config)
	cl, err := cluster.New(cfg, wallclock.New())
	if err != nil {
		return nil, err
	}
	h := &Host{
		id: o.ID, lab: o.Lab, cl: cl, loop: cl.Loop, planes: cl.Topo.Planes, log: o.Log,
		started: time.Now(), session: uint64(time.Now().UnixNano()),
		fabricName: o.Fabric,
		txKey:      tunnel.HostKey(o.Secret, o.ID),
		work:       make(chan func(), 64), done: make(chan struct{}),
		ex: newExchange(), qps: newQPBook(),
	}
	h.streams = make([]tunnel.Stream, h.planes)
	for pl := range h.streams {
		h.streams[pl] = tunnel.Stream{Host: uint16(h.id), Plane: uint8(pl), Dir: tunnel.ToFabric, Session: h.session}
	}
	h.rx = tunnel.NewReceiver(tunnel.ToHost, &h.drops)
	h.rx.AddHost(tunnel.HostKey(o.Secret, o.ID))
	h.lastAck = make([]atomic.Int64, h.planes)
	h.helloEvery = o.Keepalive
	h.sealBuf = make([]byte, 0, tunnel.HeaderLen+tunnel.TagLen+cl.Topo.Pool.LargeCap)
	h.batches.New = func() any { return &rxBatch{} }
	h.lag.init(4096)
	h.loop.SetLagObserver(h.lag.add)

	fail := func(err error) (*Host, error) {
		h.closeIO()
		cl.Close()
		return nil, err
	}
	h.fabrics, _ = o.fabrics() // checked
	h.fabricAddr = make([]netip.AddrPort, len(h.fabrics))
	for pl, a := range h.fabrics {
		// A fabric container's name may not resolve yet (a Swarm starts
		// services in any order): wait for it, bounded.
		if h.fabricAddr[pl], err = resolveWithin(a, ResolveWait); err != nil {
			return fail(fmt.Errorf("--fabric %s: %w", a, err))
		}
	}
	// One socket for every plane: it is not connected, so it sends to
	// each plane's fabric.
	if h.conn, err = tunnel.Dial(h.fabricAddr[0].String()); err != nil {
		return fail(fmt.Errorf("--fabric %s: %w", h.fabrics[0], err))
	}
	h.sender = tunnel.NewSender(h.conn, 4096, &h.drops)
	if h.apiLn, err = net.Listen("tcp", o.API); err != nil {
		return fail(fmt.Errorf("--api %s: %w", o.API, err))
	}
	if o.TunNetNS != "" {
		if h.bridge, err = openBridge(h, o.TunNetNS, o.TunName); err != nil {
			if !o.TunOptional {
				return fail(fmt.Errorf("--tun-netns %s: %w", o.TunNetNS, err))
			}
			h.log.Printf("no TUN device (--tun-optional): %v", err)
			h.bridge = nil
		}
	}
	// Only this host is real: its NIC links leave through the tunnel.
	for pl, pt := range cl.Topo.HostPorts[h.id] {
		pt.Tx.SetExporter(fabric.AtArrival(h.loop, &planeExporter{h: h, plane: pl}))
	}
	h.srv = &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second}
	h.bg.Add(3)
	go func() { defer h.bg.Done(); h.readTunnel() }()
	go func() { defer h.bg.Done(); h.keepalive(o.Keepalive) }()
	go func() {
		defer h.bg.Done()
		if err := h.srv.Serve(h.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Printf("API: %v", err)
		}
	}()
	if h.bridge != nil {
		h.bg.Add(1)
		go func() { defer h.bg.Done(); h.bridge.readLoop() }()
	}
	go h.drive()
	h.log.Printf("fabric %s, API %s, tunnel %s, %s, %s", o.Fabric, h.APIAddr(), h.TunnelAddr(),
		cfg.Transport.Kind, o.Lab.Scaling)
	return h, nil
}

// ResolveWait bounds how long New waits for a fabric's name to resolve.
const ResolveWait = 60 * time.Second

// resolveWithin resolves s, retrying every half second until wait has
// passed.
func resolveWithin(s string, wait time.Duration) (netip.AddrPort, error) {
	deadline := time.Now().Add(wait)
	for {
		ap, err := resolveAddrPort(s)
		if err == nil || time.Now().After(deadline) {
			return ap, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func resolveAddrPort(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	ua, err := net.ResolveUDPAddr("udp", s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return ua.AddrPort(), nil
}

// ID is the host id.
func (h *Host) ID() int { return h.id }

// APIAddr is the address the HTTP API listens on.
func (h *Host) APIAddr() string { return h.apiLn.Addr().String() }

// TunnelAddr is the host's tunnel UDP address.
func (h *Host) TunnelAddr() string { return h.conn.LocalAddr().String() }

// Cluster is the host's cluster (its loop is driven by the host: touch
// it only through the API or before traffic flows).
func (h *Host) Cluster() *cluster.Cluster { return h.cl }

// Up reports whether every plane has had a HelloAck from the fabric
// within the last AckLapse keepalive periods (a fabric that stopped
// answering makes the host "starting" again).
func (h *Host) Up() bool {
	since := time.Now().UnixNano() - AckLapse*int64(h.helloEvery)
	for i := range h.lastAck {
		if h.lastAck[i].Load() < since {
			return false
		}
	}
	return true
}

// AckLapse is how many keepalive periods without a HelloAck on a plane
// make a host no longer up.
const AckLapse = 3

// Drops returns the tunnel drop counters.
func (h *Host) Drops() *tunnel.Counters { return &h.drops }

// Close stops the host: the driver (a collective in progress ends with
// an error), the HTTP server, the tunnel and the TUN. It waits for the
// host's goroutines.
func (h *Host) Close() error {
	h.stopOnce.Do(func() {
		h.stopping.Store(true)
		h.loop.Inject(func() {})
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			h.log.Printf("driver did not stop within 10 s")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond) // answers in flight; a connection not yet used would hold Shutdown for 5 s
		h.srv.Shutdown(ctx)
		cancel()
		h.srv.Close()
		h.closeIO()
		h.bg.Wait()
		h.cl.Close()
	})
	return nil
}

func (h *Host) closeIO() {
	if h.sender != nil {
		h.sender.Close()
	}
	if h.conn != nil {
		h.conn.Close()
	}
	if h.apiLn != nil && h.srv == nil {
		h.apiLn.Close()
	}
	if h.bridge != nil {
		h.bridge.close()
	}
}
