package labfabric

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// Options configure a Fabric.
type Options struct {
	Lab    labspec.Lab // labspec.Resolve's result
	Secret []byte      // the lab secret (tunnel.LoadSecret)
	// Listen is the tunnel's UDP address, API the HTTP address (both
	// host:port; port 0 picks one: see Fabric.TunnelAddr, Fabric.APIAddr).
	Listen, API string
	// Planes are the planes this process runs (nil: all of the config's).
	Planes []int
	// Log takes the log lines (nil: discarded). LogEvery is the period of
	// the status line (0: 10 s).
	Log      io.Writer
	LogEvery time.Duration
	// SendQueue is the tunnel sender's queue in frames (0: 4096).
	SendQueue int
}

// CheckPlanes validates a --planes list against a config of n planes:
// each in 0..n-1, no repeats, at least one. flag names the flag.
func CheckPlanes(flag string, planes []int, n int) error {
	if len(planes) == 0 {
		return fmt.Errorf("%s: empty; give plane numbers in 0..%d, e.g. 0,1", flag, n-1)
	}
	seen := map[int]bool{}
	for _, p := range planes {
		if p < 0 || p >= n {
			return fmt.Errorf("%s: plane %d is outside 0..%d (the config has %d planes)", flag, p, n-1, n)
		}
		if seen[p] {
			return fmt.Errorf("%s: plane %d is listed twice", flag, p)
		}
		seen[p] = true
	}
	return nil
}

// ParsePlanes reads a --planes value: comma-separated plane numbers.
func ParsePlanes(s string) ([]int, error) {
	var ps []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--planes: %q is not a plane number; want a comma-separated list such as 0,1", f)
		}
		ps = append(ps, v)
	}
	return ps, nil
}

// portTunnel is one host NIC port's tunnel: loop goroutine only.
type portTunnel struct {
	f            *Fabric
	host, plane  int
	run          bool // the plane runs here
	key          *tunnel.Key
	attached     bool
	addr         netip.AddrPort
	session      uint64
	lastSeen     int64         // wall ns (Fabric.wall)
	stream       tunnel.Stream // numbers the frames toward the host
	in, out      uint64        // frames
	digestLogged bool
	toFabric     *fabric.Link // NIC→T0: frames from the host Arrive here
}

// Fabric is a running lab fabric.
type Fabric struct {
	opt     Options
	lab     labspec.Lab
	digest  []byte
	wall    *wallclock.Clock
	unix0   int64 // Unix ns at virtual time 0
	slow    float64
	loop    *sim.Loop
	topo    *fabric.Topology
	planes  []int
	session uint64
	log     *logger

	conn     *tunnel.Conn
	sender   *tunnel.Sender
	counters *tunnel.Counters
	recv     *tunnel.Receiver // reader goroutine only
	ports    [][]*portTunnel  // [host][plane]
	free     chan *batch

	// Loop goroutine only.
	stopping  bool
	lag       lagHist
	framesIn  uint64
	framesOut uint64
	scratch   []byte
	recs      []*faults.Recorder
	captures  map[*fabric.Port]*portCapture

	apiLn    net.Listener
	srv      *http.Server
	loopDone chan struct{}
	readDone chan struct{}
	stopped  chan struct{} // closed by Stop: readers waiting for a batch give up
	stopOnce sync.Once
	started  bool
}

// New builds the fabric and binds its sockets; Start runs it.
func New(o Options) (*Fabric, error) {
	cfg := o.Lab.Config
	if len(o.Secret) < tunnel.SecretMin {
		return nil, fmt.Errorf("--secret-file: the secret has %d bytes, want at least %d", len(o.Secret), tunnel.SecretMin)
	}
	if o.LogEvery == 0 {
		o.LogEvery = 10 * time.Second
	}
	if o.SendQueue == 0 {
		o.SendQueue = 4096
	}
	f := &Fabric{opt: o, lab: o.Lab, digest: o.Lab.Digest[:], wall: wallclock.New(), session: uint64(time.Now().UnixNano()),
		log: &logger{w: o.Log}, counters: new(tunnel.Counters), captures: map[*fabric.Port]*portCapture{},
		loopDone: make(chan struct{}), readDone: make(chan struct{}), stopped: make(chan struct{})}
	f.unix0 = time.Now().UnixNano()
	f.slow = max(cfg.Run.RealtimeSlowdown, 1)
	f.loop = sim.NewLoop(sim.Options{Seed: cfg.Seed, Wall: f.wall, RealTime: true, Slowdown: cfg.Run.RealtimeSlowdown})
	f.loop.SetLagObserver(f.lag.Observe)
	topo, err := cluster.BuildTopology(f.loop, cfg)
	if err != nil {
		return nil, err
	}
	f.topo = topo
	if topo.Hosts > 0xffff {
		return nil, fmt.Errorf("fabric.hosts: %d hosts, a lab tunnel carries host ids 0..65535", topo.Hosts)
	}
	f.planes = o.Planes
	if f.planes == nil {
		for p := 0; p < topo.Planes; p++ {
			f.planes = append(f.planes, p)
		}
	}
	if err := CheckPlanes("--planes", f.planes, topo.Planes); err != nil {
		return nil, err
	}
	f.planes = slices.Clone(f.planes)
	sort.Ints(f.planes)
	f.recv = tunnel.NewReceiver(tunnel.ToFabric, f.counters)
	f.ports = make([][]*portTunnel, topo.Hosts)
	for h := range topo.Hosts {
		k := tunnel.HostKey(o.Secret, h)
		f.recv.AddHost(k)
		f.ports[h] = make([]*portTunnel, topo.Planes)
		for pl := range topo.Planes {
			hp := topo.HostPorts[h][pl]
			pt := &portTunnel{f: f, host: h, plane: pl, run: slices.Contains(f.planes, pl), key: k, toFabric: hp.Tx,
				stream: tunnel.Stream{Host: uint16(h), Plane: uint8(pl), Dir: tunnel.ToHost, Session: f.session}}
			f.ports[h][pl] = pt
			hp.Peer.Tx.SetExporter(fabric.AtArrival(f.loop, pt))
		}
	}
	f.free = make(chan *batch, numBatches)
	for range numBatches {
		f.free <- &batch{f: f}
	}
	if f.conn, err = tunnel.Listen(o.Listen); err != nil {
		return nil, fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	if f.apiLn, err = net.Listen("tcp", o.API); err != nil {
		f.conn.Close()
		return nil, fmt.Errorf("--api %s: %w", o.API, err)
	}
	f.sender = tunnel.NewSender(f.conn, o.SendQueue, f.counters)
	f.srv = &http.Server{Handler: f.handler(), ReadHeaderTimeout: 10 * time.Second}
	return f, nil
}

// TunnelAddr is the bound tunnel address.
func (f *Fabric) TunnelAddr() netip.AddrPort { return f.conn.LocalAddr() }

// APIAddr is the bound HTTP address (host:port).
func (f *Fabric) APIAddr() string { return f.apiLn.Addr().String() }

// Topology is the fabric's topology: touch it only on the loop (Do).
func (f *Fabric) Topology() *fabric.Topology { return f.topo }

// Planes are the planes this process runs.
func (f *Fabric) Planes() []int { return slices.Clone(f.planes) }

// Start runs the loop, the tunnel reader and the HTTP server, each on its
// own goroutine, and logs the start line.
func (f *Fabric) Start() {
	f.started = true
	f.log.printf("fabric: tunnel %s, api %s, planes %v, %d hosts, %s; %s", f.TunnelAddr(), f.APIAddr(), f.planes, f.topo.Hosts,
		f.topo.Mode, f.lab.Scaling)
	go f.runLoop()
	go f.read()
	go f.srv.Serve(f.apiLn)
}

// Run starts the fabric and stops it when ctx is done.
func (f *Fabric) Run(ctx context.Context) error {
	f.Start()
	<-ctx.Done()
	f.Stop()
	return nil
}

// Stop ends the HTTP server (captures end), the loop, the reader and the
// sender, and closes the sockets. It waits for all of them.
func (f *Fabric) Stop() {
	f.stopOnce.Do(func() {
		if !f.started {
			f.apiLn.Close()
			f.sender.Close()
			f.conn.Close()
			return
		}
		close(f.stopped) // captures end, a reader waiting for a batch gives up
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		f.srv.Shutdown(ctx)
		cancel()
		f.srv.Close()
		f.loop.Inject(func() { f.stopping = true })
		<-f.loopDone
		f.conn.Close()
		<-f.readDone
		f.sender.Close()
	})
}

func (f *Fabric) runLoop() {
	defer close(f.loopDone)
	next := f.loop.WallTime() + sim.Time(f.opt.LogEvery)
	var tick func()
	tick = func() {
		f.log.printf("%s", f.statusLine())
		next += sim.Time(f.opt.LogEvery)
		f.loop.At(next, tick)
	}
	f.loop.At(next, tick)
	// In real-time pacing RunWhile waits on an idle queue for the tunnels'
	// injections; Interrupt (a signal) halts it like every loop.
	f.loop.RunWhile(func() bool { return !f.stopping && !sim.Interrupted() })
}

var errStopped = errors.New("the fabric is stopping")

// Do runs fn on the loop goroutine and waits for it (errStopped when the
// loop ended first).
func (f *Fabric) Do(fn func()) error {
	select {
	case <-f.loopDone:
		return errStopped
	default:
	}
	done := make(chan struct{})
	f.loop.Inject(func() { fn(); close(done) })
	select {
	case <-done:
		return nil
	case <-f.loopDone:
		select {
		case <-done:
			return nil
		default:
			return errStopped
		}
	}
}

// numBatches bounds the received batches in flight to the loop: the
// reader waits when all are taken (the socket buffer then absorbs, and
// the kernel drops beyond it).
const (
	numBatches = 64
	batchMsgs  = 64
	readBuf    = tunnel.MaxFrame + 1
)

type item struct {
	h      tunnel.Header
	addr   netip.AddrPort
	off, n int
}

// batch is what one ReadBatch delivered, authenticated, copied for the
// loop.
type batch struct {
	f     *Fabric
	items []item
	data  []byte
	run   func()
}

func (f *Fabric) read() {
	defer close(f.readDone)
	maxFrame := f.topo.Pool.LargeCap // set at build, read-only
	ms := make([]tunnel.Message, batchMsgs)
	for i := range ms {
		ms[i].Buf = make([]byte, readBuf)
	}
	for {
		n, err := f.conn.ReadBatch(ms)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		var b *batch
		select {
		case b = <-f.free:
		case <-f.stopped:
			return
		}
		for i := range n {
			m := &ms[i]
			h, payload, err := f.recv.Receive(m.Buf[:m.N])
			if err != nil {
				continue // counted
			}
			if int(h.Plane) >= f.topo.Planes || !f.ports[h.Host][h.Plane].run {
				f.counters.Drop(tunnel.UnknownHost)
				continue
			}
			if len(payload) > maxFrame {
				// Larger than any frame of the fabric: not copied (a
				// batch's buffer stays within 64 largest frames).
				f.counters.Drop(tunnel.Malformed)
				continue
			}
			b.items = append(b.items, item{h: h, addr: m.Addr, off: len(b.data), n: len(payload)})
			b.data = append(b.data, payload...)
		}
		if len(b.items) == 0 {
			f.free <- b
			continue
		}
		if b.run == nil {
			b.run = b.deliver
		}
		f.loop.Inject(b.run)
	}
}

// deliver runs on the loop: every frame of the batch, in order.
func (b *batch) deliver() {
	f := b.f
	now := f.wall.Now()
	for _, it := range b.items {
		f.handle(it.h, it.addr, b.data[it.off:it.off+it.n], now)
	}
	b.items, b.data = b.items[:0], b.data[:0]
	f.free <- b
}

// handle takes one authenticated frame from a host (loop goroutine).
func (f *Fabric) handle(h tunnel.Header, addr netip.AddrPort, payload []byte, now int64) {
	pt := f.ports[h.Host][h.Plane]
	switch h.Kind {
	case tunnel.KindHello:
		if !bytes.Equal(payload, f.digest) {
			f.counters.Drop(tunnel.Digest)
			if !pt.digestLogged {
				pt.digestLogged = true
				f.log.printf("host %d: config digest differs: start it with the same config, sets and --plane-speed", h.Host)
			}
			return
		}
		if !pt.attached || pt.addr != addr || pt.session != h.Session {
			f.log.printf("host %d plane %d: attached from %s (session %d)", h.Host, h.Plane, addr, h.Session)
		}
		pt.attached, pt.addr, pt.session = true, addr, h.Session
		pt.send(tunnel.KindHelloAck, f.digest, 0, 0)
	case tunnel.KindData:
		if !pt.attached || h.Session != pt.session {
			f.counters.Drop(tunnel.Unattached)
			return
		}
		pool := pt.toFabric.Dst().Pool()
		if len(payload) < fabric.EthHeaderLen || len(payload) > pool.LargeCap ||
			int64(h.WireLen) < int64(len(payload)+fabric.FCSLen) || int64(h.WireLen) > int64(pool.LargeCap+fabric.FCSLen) {
			f.counters.Drop(tunnel.Malformed)
			return
		}
		p := pool.Get(len(payload))
		copy(p.Data, payload)
		p.WireLen, p.Flags = int(h.WireLen), h.Flags
		pt.toFabric.Arrive(p)
	default: // a HelloAck travelling to the fabric
		f.counters.Drop(tunnel.WrongDir)
		return
	}
	pt.lastSeen = now
	pt.in++
	f.framesIn++
}

// send seals a frame toward the port's host and queues it.
func (pt *portTunnel) send(k tunnel.Kind, payload []byte, wireLen uint32, flags uint8) {
	f := pt.f
	f.scratch = pt.stream.Seal(f.scratch[:0], k, wireLen, flags, payload, pt.key)
	if f.sender.Send(f.scratch, pt.addr) {
		pt.out++
		f.framesOut++
	}
}

// ExportFrame takes a frame the T0 sends toward the port's host, at the
// time its last bit would reach the NIC (fabric.AtArrival).
func (pt *portTunnel) ExportFrame(_ *fabric.Link, p *fabric.Packet, _ sim.Time) {
	if !pt.run {
		p.Release() // no host of this plane can be attached here
		return
	}
	if !pt.attached || len(p.Data) > tunnel.MaxPayload {
		pt.f.counters.Drop(tunnel.Unattached)
		p.Release()
		return
	}
	pt.send(tunnel.KindData, p.Data, uint32(p.WireLen), p.Flags)
	p.Release()
}

// Status reads the fabric's state (from any goroutine).
func (f *Fabric) Status() (labapi.FabricStatus, error) {
	var s labapi.FabricStatus
	err := f.Do(func() { s = f.status() })
	return s, err
}

func (f *Fabric) status() labapi.FabricStatus {
	now := f.wall.Now()
	s := labapi.FabricStatus{Listen: f.TunnelAddr().String(), Planes: slices.Clone(f.planes), Hosts: f.topo.Hosts,
		Digest: fmt.Sprintf("%x", f.digest), Scaling: f.lab.Scaling, VirtualNs: int64(f.loop.WallTime()), UptimeNs: now,
		Lag: f.lagStats(), Drops: f.counters.Snapshot(), FramesIn: f.framesIn, FramesOut: f.framesOut,
		Attached: []labapi.Attachment{}, LinksDown: []string{}}
	for _, hp := range f.ports {
		for _, pt := range hp {
			if pt.attached {
				s.Attached = append(s.Attached, labapi.Attachment{Host: pt.host, Plane: pt.plane, Addr: pt.addr.String(),
					LastSeenNs: now - pt.lastSeen, FramesIn: pt.in, FramesOut: pt.out})
			}
		}
	}
	for _, l := range f.topo.Links {
		if !l.Up() {
			s.LinksDown = append(s.LinksDown, l.Name)
		}
	}
	s.FaultEvents = f.faultEvents("inject")
	return s
}

func (f *Fabric) lagStats() labapi.Lag {
	st := f.loop.Lag()
	return labapi.Lag{Events: f.lag.n, P50Ns: f.lag.Quantile(0.5), P99Ns: f.lag.Quantile(0.99), MaxNs: f.lag.max, Early: st.Early}
}

// faultEvents counts the fault recorders' log entries of one kind.
func (f *Fabric) faultEvents(event string) int {
	n := 0
	for _, r := range f.recs {
		for _, e := range r.Entries {
			if e.Event == event {
				n++
			}
		}
	}
	return n
}

// statusLine is the periodic log line (loop goroutine).
func (f *Fabric) statusLine() string {
	s := f.status()
	var drops []string
	for _, r := range tunnel.Reasons() {
		if n := s.Drops[r.String()]; n > 0 {
			drops = append(drops, fmt.Sprintf("%s=%d", r, n))
		}
	}
	return fmt.Sprintf("fabric: virtual %v, lag p50 %v p99 %v max %v, %d ports attached, frames in %d out %d, drops [%s], links down %d",
		time.Duration(s.VirtualNs), time.Duration(s.Lag.P50Ns), time.Duration(s.Lag.P99Ns), time.Duration(s.Lag.MaxNs),
		len(s.Attached), s.FramesIn, s.FramesOut, strings.Join(drops, " "), len(s.LinksDown))
}

// logger writes whole lines, safe from any goroutine.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) printf(format string, a ...any) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, time.Now().UTC().Format("2006-01-02T15:04:05.000Z ")+format+"\n", a...)
}

// Write makes the logger an io.Writer of whole lines (the fault
// recorder's JSON lines).
func (l *logger) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		l.printf("fault: %s", line)
	}
	return len(b), nil
}

// ResetLag clears the lag histogram (status and /metrics then describe
// the events from now on; a benchmark measures one step at a time).
func (f *Fabric) ResetLag() error { return f.Do(func() { f.lag = lagHist{} }) }
