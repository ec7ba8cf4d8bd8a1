package main

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// observer follows a run for the CLI: it implements experiments.Observer,
// drives the progress display and publishes counter snapshots for the
// metrics endpoint. Every method runs on the simulation goroutine; the only
// thing it hands to other goroutines is an immutable *snapshot (through
// metricsServer.publish). Nothing it does changes what the simulation
// computes: it reads counters and the wall clock, and schedules no events.
type observer struct {
	wall    sim.WallClock
	ui      progressUI
	metrics *metricsServer // nil without --metrics

	exp        string // what runs: experiment name, "preflight", ...
	i, n       int    // current point (from 0) of n
	label      string
	expStart   int64 // wall ns
	pointStart int64

	cur        *cluster.Cluster
	base       counters // finished clusters of the whole run
	events     uint64   // events of finished clusters
	curEvents  uint64   // events of cur at its last reading
	virtual    sim.Time // cur's virtual time at its last reading
	clusters   int
	rateWall   int64 // wall ns and total events at the last rate sample
	rateEvents uint64
	rateSet    bool
	rate       float64 // events per wall second
	lastPub    int64   // wall ns of the last snapshot
	lastUI     int64   // wall ns of the last display update
}

// publishEvery bounds how often a snapshot is built from inside the loop
// (points and cluster switches always publish one).
const publishEvery = 250 * time.Millisecond

// progressEvery is how many events pass between loop progress callbacks.
const progressEvery = 1 << 15

func newObserver(ui progressUI, m *metricsServer) *observer {
	return newObserverClock(ui, m, wallclock.New())
}

func newObserverClock(ui progressUI, m *metricsServer, wall sim.WallClock) *observer {
	if ui == nil {
		ui = noProgress{}
	}
	return &observer{wall: wall, ui: ui, metrics: m}
}

// Log is where an experiment's own log lines go (env.Progress).
func (o *observer) Log() io.Writer { return o.ui }

// Begin starts a new phase (an experiment, or the preflight).
func (o *observer) Begin(name string) {
	o.fold()
	o.exp, o.i, o.n, o.label = name, 0, 0, ""
	o.expStart = o.wall.Now()
	o.pointStart = o.expStart
	o.ui.begin(name)
	o.publish(true)
}

// Point implements experiments.Observer.
func (o *observer) Point(i, n int, label string) {
	o.fold()
	o.i, o.n, o.label = i, n, label
	o.pointStart = o.wall.Now()
	o.ui.point(o.status())
	o.publish(true)
}

// Watch implements experiments.Observer: it reads c's counters from the
// loop's progress callback from now on. A partitioned cluster (--parallel)
// runs on several goroutines: it is read between windows instead
// (sim.Parallel.OnBarrier, called with every partition stopped, on the
// goroutine that ends the window while the one that called Run waits),
// every progressEvery events.
func (o *observer) Watch(c *cluster.Cluster) {
	o.fold()
	o.cur = c
	o.clusters++
	o.curEvents, o.virtual = c.Executed(), c.Now()
	if p := c.Parallel(); p != nil {
		next := c.Executed() + progressEvery
		p.OnBarrier = func(sim.Time) {
			if ev := p.Executed(); ev >= next {
				next = ev + progressEvery
				o.progress(sim.Progress{Now: p.Now(), Events: ev, Pending: p.Pending()})
			}
		}
	} else {
		c.Loop.OnProgress(progressEvery, o.progress)
	}
	o.publish(true)
}

// where says where the run is, for the interrupt line: the virtual time
// of the cluster being simulated and the point ("at virtual time 1.234 ms
// (point 3 of 9: RoCE, 1 QP, loss 1%)"). Call it on the simulation
// goroutine after the run returned, before End.
func (o *observer) where() string {
	t := o.virtual
	if o.cur != nil {
		t = o.cur.Now()
	}
	s := virtualAt(t)
	if o.n > 0 {
		s += fmt.Sprintf(" (point %d of %d: %s)", o.i+1, o.n, o.label)
	} else if o.exp != "" {
		s += " (" + o.exp + ")"
	}
	return s
}

// End closes the phase: final counters, the display's summary line.
func (o *observer) End() {
	o.fold()
	o.publish(true)
	o.ui.end(o.status())
}

// fold adds the current cluster's final counters to the run's totals and
// forgets it. The cluster may be closed already: closing releases the
// netstacks, the counters stay readable.
func (o *observer) fold() {
	if o.cur == nil {
		return
	}
	o.base.add(readCounters(o.cur))
	o.events += o.cur.Executed()
	o.cur, o.curEvents, o.virtual = nil, 0, 0
}

func (o *observer) progress(p sim.Progress) {
	o.curEvents, o.virtual = p.Events, p.Now
	now := o.wall.Now()
	if time.Duration(now-o.lastUI) >= o.ui.interval() {
		o.lastUI = now
		o.ui.update(o.status())
	}
	o.publish(false)
}

// totalEvents is every event executed in watched clusters so far.
func (o *observer) totalEvents() uint64 { return o.events + o.curEvents }

// status is what the display shows; it also updates the events/s rate.
func (o *observer) status() progressStatus {
	now := o.wall.Now()
	ev := o.totalEvents()
	if dt := now - o.rateWall; dt >= int64(200*time.Millisecond) || !o.rateSet {
		if o.rateSet && ev >= o.rateEvents {
			o.rate = float64(ev-o.rateEvents) / (float64(dt) / 1e9)
		}
		o.rateWall, o.rateEvents, o.rateSet = now, ev, true
	}
	s := progressStatus{exp: o.exp, i: o.i, n: o.n, label: o.label, virtual: time.Duration(o.virtual),
		events: ev, rate: o.rate, elapsed: time.Duration(now - o.expStart), eta: -1, interrupted: sim.Interrupted()}
	// ETA from the points done so far: their mean wall time times the
	// points left, the current one included.
	if o.i > 0 && o.n > o.i {
		done := time.Duration(o.pointStart - o.expStart)
		s.eta = done/time.Duration(o.i)*time.Duration(o.n-o.i) - time.Duration(now-o.pointStart)
		s.eta = max(s.eta, 0)
	}
	return s
}

// publish hands a snapshot to the metrics endpoint (at most every
// publishEvery unless forced).
func (o *observer) publish(force bool) {
	if o.metrics == nil {
		return
	}
	now := o.wall.Now()
	if !force && time.Duration(now-o.lastPub) < publishEvery {
		return
	}
	o.lastPub = now
	s := &snapshot{exp: o.exp, point: o.i, points: o.n, virtual: time.Duration(o.virtual).Seconds(),
		events: o.totalEvents(), rate: o.rate, clusters: o.clusters, counters: counters{}}
	s.counters.add(o.base)
	if o.cur != nil {
		s.counters.add(readCounters(o.cur))
	}
	o.metrics.publish(s)
}

// portKey groups ports: tier is "nic" for host NIC ports, "t0", "t1" (and
// "t2" for fat-tree cores) for switch ports; plane is the fabric plane.
type portKey struct {
	tier  string
	plane int
}

type portAgg struct {
	ports                                  int
	txPackets, txBytes, rxPackets, rxBytes uint64
	drops                                  [len(fabric.DropReasonNames)]uint64
	ecnMarks, trims                        uint64
	pauseTx, pauseRx                       uint64
	linkLost                               uint64
	maxQueue                               int
}

type qpAgg struct {
	qps                                             int
	dataPackets, retransmissions, timeouts, nacksRx uint64
	cnpsSent, trimmedRx, ecnMarksRx, bytesCompleted uint64
}

// counters are a run's fabric and transport counters, summed per group.
type counters struct {
	ports map[portKey]*portAgg
	qps   map[string]*qpAgg // by transport kind
	// fabric is the fabric-wide frame accounting (sent = delivered +
	// dropped + lost + in flight) of the clusters read.
	fabric fabric.Conservation
}

func (c *counters) port(k portKey) *portAgg {
	if c.ports == nil {
		c.ports = map[portKey]*portAgg{}
	}
	a := c.ports[k]
	if a == nil {
		a = &portAgg{}
		c.ports[k] = a
	}
	return a
}

func (c *counters) qp(kind string) *qpAgg {
	if c.qps == nil {
		c.qps = map[string]*qpAgg{}
	}
	a := c.qps[kind]
	if a == nil {
		a = &qpAgg{}
		c.qps[kind] = a
	}
	return a
}

func (c *counters) add(o counters) {
	for k, b := range o.ports {
		c.port(k).merge(b)
	}
	for k, b := range o.qps {
		c.qp(k).merge(b)
	}
	c.fabric.Add(o.fabric)
}

func (a *portAgg) merge(b *portAgg) {
	a.ports += b.ports
	a.txPackets += b.txPackets
	a.txBytes += b.txBytes
	a.rxPackets += b.rxPackets
	a.rxBytes += b.rxBytes
	for i := range a.drops {
		a.drops[i] += b.drops[i]
	}
	a.ecnMarks += b.ecnMarks
	a.trims += b.trims
	a.pauseTx += b.pauseTx
	a.pauseRx += b.pauseRx
	a.linkLost += b.linkLost
	a.maxQueue = max(a.maxQueue, b.maxQueue)
}

func (a *qpAgg) merge(b *qpAgg) {
	a.qps += b.qps
	a.dataPackets += b.dataPackets
	a.retransmissions += b.retransmissions
	a.timeouts += b.timeouts
	a.nacksRx += b.nacksRx
	a.cnpsSent += b.cnpsSent
	a.trimmedRx += b.trimmedRx
	a.ecnMarksRx += b.ecnMarksRx
	a.bytesCompleted += b.bytesCompleted
}

// readCounters sums c's port and QP counters. It must run on the goroutine
// that runs c's loop (or after the loop stopped).
func readCounters(c *cluster.Cluster) counters {
	var out counters
	addPort := func(k portKey, p *fabric.Port) {
		pc := &p.Counters
		one := portAgg{ports: 1, txPackets: pc.TxPackets, txBytes: pc.TxBytes, rxPackets: pc.RxPackets, rxBytes: pc.RxBytes, drops: pc.Drops,
			ecnMarks: pc.ECNMarks, trims: pc.Trims, pauseTx: pc.PauseTx, pauseRx: pc.PauseRx, maxQueue: pc.MaxQueueBytes}
		if p.Tx != nil {
			one.linkLost = p.Tx.Counters.Lost
		}
		out.port(k).merge(&one)
	}
	t := c.Topo
	for _, s := range t.Switches {
		k := portKey{tier: "t" + strconv.Itoa(s.Tier), plane: s.Plane}
		for _, p := range s.Ports {
			addPort(k, p)
		}
	}
	for _, hp := range t.HostPorts {
		for plane, p := range hp {
			addPort(portKey{tier: "nic", plane: plane}, p)
		}
	}
	kind := c.Config.Transport.Kind
	for _, h := range c.Hosts {
		// Only hosts that already have an RDMA engine: h.RDMA() would
		// create one.
		e, ok := h.NIC.RDMA.(*endpoint.Engine)
		if !ok {
			continue
		}
		for _, q := range e.QPs() {
			if q == nil {
				continue
			}
			st := q.Stats()
			out.qp(kind).merge(&qpAgg{qps: 1, dataPackets: st.DataPacketsSent, retransmissions: st.Retransmissions, timeouts: st.Timeouts,
				nacksRx: st.NacksReceived, cnpsSent: st.CNPsSent, trimmedRx: st.TrimmedReceived, ecnMarksRx: st.ECNMarksReceived, bytesCompleted: st.BytesCompleted})
		}
	}
	out.fabric = t.Conservation()
	return out
}

// progressStatus is one reading for the display.
type progressStatus struct {
	exp     string
	i, n    int
	label   string
	virtual time.Duration // virtual time of the cluster being simulated
	events  uint64
	rate    float64 // events per wall second
	elapsed time.Duration
	eta     time.Duration // < 0: unknown
	// interrupted: a signal stopped the run (sim.Interrupt), so the phase
	// ends "interrupted at point i/n", not "done".
	interrupted bool
}

func (s progressStatus) pointText() string {
	if s.n == 0 {
		return ""
	}
	t := fmt.Sprintf("point %d/%d", s.i+1, s.n)
	if s.label != "" {
		t += " " + s.label
	}
	return t
}

func (s progressStatus) doneText() string {
	if s.interrupted {
		t := "interrupted"
		if s.n > 0 {
			t += fmt.Sprintf(" at point %d/%d", s.i+1, s.n)
		}
		return t + fmt.Sprintf(", %d events, %v", s.events, s.elapsed.Round(100*time.Millisecond))
	}
	t := "done"
	if s.n == 1 {
		t += ", 1 point"
	} else if s.n > 1 {
		t += fmt.Sprintf(", %d points", s.n)
	}
	return t + fmt.Sprintf(", %d events, %v", s.events, s.elapsed.Round(100*time.Millisecond))
}

func (s progressStatus) etaText() string {
	switch {
	case s.eta < 0:
		return "ETA ?"
	case s.eta < 10*time.Second:
		return "ETA " + s.eta.Round(100*time.Millisecond).String()
	}
	return "ETA " + s.eta.Round(time.Second).String()
}
