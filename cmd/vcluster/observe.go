package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// observer follows a run for the CLI: it implements experiments.Observer,
// drives the progress display, publishes counter snapshots for the
// metrics endpoint and, given a counters.csv (setCountersCSV), writes the
// per-port counters of every cluster it folds. Every method runs on the
// simulation goroutine; the only thing it hands to other goroutines is an
// immutable *snapshot (through metricsServer.publish). Nothing it does
// changes what the simulation computes: it reads counters and the wall
// clock, and schedules no events.
type observer struct {
	wall    sim.WallClock
	ui      progressUI
	metrics *metricsServer // nil without --metrics

	exp   string // what runs: experiment name, "preflight", ...
	i, n  int    // current point (from 0) of n
	label string
	// stepped: i and n count the steps of one cluster (Step), shown as
	// stepLabel; the counters stay filed under the phase.
	stepped    bool
	stepLabel  string
	expStart   int64 // wall ns
	pointStart int64
	// phaseEvents, pointEvents: totalEvents at Begin and at the current
	// point's start; phaseClusters, pointClusters: clusters watched since.
	phaseEvents, pointEvents     uint64
	phaseClusters, pointClusters int
	// expect is the virtual time a point of the phase is expected to
	// simulate (pointVirtualer; 0: unknown); share is how much of the
	// current point the display showed done, which never goes down.
	expect time.Duration
	share  float64

	cur *cluster.Cluster
	// points are the finished clusters' counters, one entry per experiment
	// and point label (the clusters of a point add up). An entry is never
	// changed once stored, so snapshots share them: a fold replaces it.
	points   []*pointCounters
	pointIdx map[pointID]int
	csv      *countersCSV      // nil: no counters.csv
	pqFiles  *pathQualityFiles // nil: no path-quality files
	watchers []*watcher

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

// pointID names a point in the metrics: the phase (experiment) and the
// label the experiment gave the point ("" for phases that give none).
type pointID struct{ exp, point string }

// pointCounters are the counters of one point's clusters.
type pointCounters struct {
	id pointID
	c  counters
}

// watcher is told about every cluster the observer watches (with the
// current point, from 0, and its label) and about the end of each phase.
type watcher struct {
	watch func(c *cluster.Cluster, point int, label string)
	end   func()
}

// publishEvery bounds how often a snapshot is built from inside the loop
// (points and cluster switches always publish one).
const publishEvery = 250 * time.Millisecond

// progressEvery is how many events pass between loop progress callbacks.
const progressEvery = 1 << 15

// firstPointScale sets the guess for a first point whose experiment gave
// no expected virtual time (pointVirtualer): the share shown done at
// virtual time v is guessFirstPoint(v), which moves on every scale (a
// 50 µs point reaches 0.39, a 1 ms one 0.60, a 100 ms one 0.72) and never
// reaches 0.9. Only a guess: it makes the bar move, nothing more.
const firstPointScale = 10 * sim.Microsecond

func guessFirstPoint(v sim.Time) float64 {
	return 0.9 * (1 - 1/(1+math.Log10(1+float64(v)/float64(firstPointScale))))
}

func newObserver(ui progressUI, m *metricsServer) *observer {
	return newObserverClock(ui, m, wallclock.New())
}

func newObserverClock(ui progressUI, m *metricsServer, wall sim.WallClock) *observer {
	if ui == nil {
		ui = noProgress{}
	}
	return &observer{wall: wall, ui: ui, metrics: m, pointIdx: map[pointID]int{}}
}

// Log is where an experiment's own log lines go (env.Progress).
func (o *observer) Log() io.Writer { return o.ui }

// addWatcher adds a watcher: watch (if not nil) is called on every Watch
// after the observer's own reading is set up, end (if not nil) on every
// End after the last cluster was folded; watchers are called in the order
// they were added. remove takes the watcher off again (a job's capture
// watches only that job's clusters).
func (o *observer) addWatcher(watch func(c *cluster.Cluster, point int, label string), end func()) (remove func()) {
	w := &watcher{watch: watch, end: end}
	o.watchers = append(o.watchers, w)
	return func() {
		if i := slices.Index(o.watchers, w); i >= 0 {
			o.watchers = slices.Delete(o.watchers, i, i+1)
		}
	}
}

// setCountersCSV makes every fold write the folded cluster's per-port
// counters to w (nil: stop). The caller closes w.
func (o *observer) setCountersCSV(w *countersCSV) { o.csv = w }

// setPathQualityFiles makes every fold of a cluster with a path-quality
// control plane write its outputs to w (nil: stop). The caller closes w.
func (o *observer) setPathQualityFiles(w *pathQualityFiles) { o.pqFiles = w }

// expectVirtual says how much virtual time a point of the current phase
// is expected to simulate (0: unknown); Begin forgets it.
func (o *observer) expectVirtual(d time.Duration) { o.expect = d }

// Begin starts a new phase (an experiment, or the preflight).
func (o *observer) Begin(name string) {
	o.fold()
	o.exp, o.i, o.n, o.label, o.stepped, o.stepLabel = name, 0, 0, "", false, ""
	o.expStart = o.wall.Now()
	o.pointStart = o.expStart
	o.phaseEvents, o.pointEvents = o.totalEvents(), o.totalEvents()
	o.phaseClusters, o.pointClusters = 0, 0
	o.expect, o.share = 0, 0
	o.ui.begin(name)
	o.publish(true)
}

// Point implements experiments.Observer.
func (o *observer) Point(i, n int, label string) {
	o.fold()
	o.i, o.n, o.label, o.stepped, o.stepLabel = i, n, label, false, ""
	o.pointClusters = 0
	o.startPoint()
}

// startPoint starts the current point's (or step's) clock, event count
// and share, and shows it.
func (o *observer) startPoint() {
	o.pointStart = o.wall.Now()
	o.pointEvents, o.share = o.totalEvents(), 0
	o.ui.point(o.status())
	o.publish(true)
}

// Step says the run is at step i (from 0) of n of one cluster — a size of
// a collective sweep — for the display only: the bar shows "i of n" and
// its ETA as for points, while the counters stay one cluster's, filed
// under the phase (Point would end the cluster being watched).
func (o *observer) Step(i, n int, label string) {
	o.i, o.n, o.stepped, o.stepLabel = i, n, true, label
	o.startPoint()
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
	o.phaseClusters++
	o.pointClusters++
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
	if o.n == 0 && o.phaseClusters > 1 {
		// A phase without points: its clusters are what it counts.
		o.ui.point(o.status())
	}
	for _, w := range o.watchers {
		if w.watch != nil {
			w.watch(c, o.i, o.label)
		}
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
	switch {
	case o.stepped:
		s += fmt.Sprintf(" (step %d of %d: %s)", o.i+1, o.n, o.stepLabel)
	case o.n > 0:
		s += fmt.Sprintf(" (point %d of %d: %s)", o.i+1, o.n, o.label)
	case o.exp != "":
		s += " (" + o.exp + ")"
	}
	return s
}

// End closes the phase: final counters, the watchers' ends, the display's
// summary line.
func (o *observer) End() {
	o.fold()
	for _, w := range o.watchers {
		if w.end != nil {
			w.end()
		}
	}
	o.publish(true)
	o.ui.end(o.status())
}

// fold adds the current cluster's final counters to its point's, writes
// them to counters.csv if asked, and forgets the cluster. The cluster may
// be closed already: closing releases the netstacks, the counters stay
// readable.
func (o *observer) fold() {
	if o.cur == nil {
		return
	}
	id := o.pointID()
	c := readCounters(o.cur)
	if k, ok := o.pointIdx[id]; ok {
		o.points[k] = o.points[k].plus(c)
	} else {
		o.pointIdx[id] = len(o.points)
		o.points = append(o.points, &pointCounters{id: id, c: c})
	}
	point := o.exp // a phase without points (the preflight) or of steps
	if o.n > 0 && !o.stepped {
		point = strconv.Itoa(o.i + 1)
	}
	if o.csv != nil {
		o.csv.block(o.cur.Topo, point, o.label, o.pointClusters)
	}
	if o.pqFiles != nil && o.cur.PathQuality != nil {
		o.pqFiles.block(o.cur.PathQuality, point, o.label, o.pointClusters)
	}
	o.events += o.cur.Executed()
	o.cur, o.curEvents, o.virtual = nil, 0, 0
}

func (o *observer) pointID() pointID { return pointID{exp: o.exp, point: o.label} }

// plus is a new entry: p's counters and c.
func (p *pointCounters) plus(c counters) *pointCounters {
	q := &pointCounters{id: p.id}
	q.c.add(p.c)
	q.c.add(c)
	return q
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
	label := o.label
	if o.stepped {
		label = o.stepLabel
	}
	s := progressStatus{exp: o.exp, i: o.i, n: o.n, label: label, clusters: o.phaseClusters, share: o.pointShare(), virtual: time.Duration(o.virtual),
		events: ev - o.phaseEvents, rate: o.rate, elapsed: time.Duration(now - o.expStart), eta: -1, interrupted: sim.Interrupted()}
	// ETA from the points done so far: their mean wall time times the
	// points left, the current one included.
	if o.i > 0 && o.n > o.i {
		done := time.Duration(o.pointStart - o.expStart)
		s.eta = done/time.Duration(o.i)*time.Duration(o.n-o.i) - time.Duration(now-o.pointStart)
		s.eta = max(s.eta, 0)
	}
	return s
}

// pointShare estimates how much of the current point is done, in [0, 1),
// for the bar to move within a point: after the first point, the events
// executed in this point against the mean of the points done; in the
// first, the virtual time against expectVirtual, or guessFirstPoint when
// the experiment gave none. Never less than it said before in the same
// point.
func (o *observer) pointShare() float64 {
	if o.n == 0 {
		return 0
	}
	var s float64
	switch {
	case o.i > 0 && o.pointEvents > o.phaseEvents:
		mean := float64(o.pointEvents-o.phaseEvents) / float64(o.i)
		s = ease(float64(o.totalEvents()-o.pointEvents) / mean)
	case o.expect > 0:
		s = ease(float64(o.virtual) / float64(o.expect))
	default:
		s = guessFirstPoint(o.virtual)
	}
	o.share = max(o.share, s)
	return o.share
}

// ease maps an estimated ratio done r ≥ 0 to a share below 1: r itself up
// to 0.9, then ever more slowly towards 0.99, so a point that takes
// longer than estimated still moves and never looks finished.
func ease(r float64) float64 {
	if r <= 0.9 {
		return max(r, 0)
	}
	return 0.99 - 0.081/r
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
		events: o.totalEvents(), rate: o.rate, clusters: o.clusters}
	s.counters = make([]*pointCounters, len(o.points), len(o.points)+1)
	copy(s.counters, o.points)
	if o.cur != nil {
		id, c := o.pointID(), readCounters(o.cur)
		if k, ok := o.pointIdx[id]; ok {
			s.counters[k] = s.counters[k].plus(c)
		} else {
			s.counters = append(s.counters, &pointCounters{id: id, c: c})
		}
	}
	o.metrics.publish(s)
}

// countersCSV is a report directory's counters.csv: per-port counters
// (fabric.Topology.WriteCountersRows) of every cluster the observer
// folds, one block each, under point,label,cluster columns. It is written
// as the run goes, never held: a point of a large fabric is a million
// rows.
type countersCSV struct {
	f   *os.File
	err error // the first write error
}

// countersFile is counters.csv's name in a report directory.
const countersFile = "counters.csv"

// createCountersCSV creates path with its header: point (from 1, or the
// phase's name — "preflight" — for a phase without points), label (the
// point's, as the experiment gave it), cluster (from 1 within the point),
// then fabric.CountersCSVHeader's columns.
func createCountersCSV(path string) (*countersCSV, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := &countersCSV{f: f}
	_, w.err = io.WriteString(f, "point,label,cluster,"+fabric.CountersCSVHeader()+"\n")
	return w, nil
}

// block writes t's rows for one cluster.
func (w *countersCSV) block(t *fabric.Topology, point, label string, cluster int) {
	if w.err != nil {
		return
	}
	w.err = t.WriteCountersRows(w.f, csvField(point)+","+csvField(label)+","+strconv.Itoa(cluster)+",")
}

// Close closes the file; it returns the first error writing it.
func (w *countersCSV) Close() error {
	if err := w.f.Close(); w.err == nil {
		w.err = err
	}
	if w.err != nil {
		return fmt.Errorf("%s: %w", w.f.Name(), w.err)
	}
	return nil
}

// csvField quotes s as RFC 4180 wants when it holds a comma, a quote or a
// line break (point labels have commas: "MRC, 1 QP, loss 1%").
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
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
	// tor sums the programmable ToRs' counters (OrderRE), torOn: a
	// cluster read had them.
	tor   fabric.TorMulticastCounters
	torOn bool
	// pq is the path-quality control plane's reading (nil: none ran).
	pq *pqCounters
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
	c.tor.Add(o.tor)
	c.torOn = c.torOn || o.torOn
	c.pq = c.pq.plus(o.pq)
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
	out.tor, out.torOn = t.TorMulticastCounters()
	out.pq = readPathQuality(c)
	return out
}

// progressStatus is one reading for the display.
type progressStatus struct {
	exp      string
	i, n     int
	label    string
	clusters int           // clusters watched in the phase
	share    float64       // estimated share of the current point done, [0, 1)
	virtual  time.Duration // virtual time of the cluster being simulated
	events   uint64        // executed in this phase (since Begin)
	rate     float64       // events per wall second
	elapsed  time.Duration
	eta      time.Duration // < 0: unknown
	// interrupted: a signal stopped the run (sim.Interrupt), so the phase
	// ends "interrupted at point i/n", not "done".
	interrupted bool
}

// countText is where the phase is: "point 3/9", or "cluster 2" for a
// phase that reports no points but builds several clusters; "" otherwise.
func (s progressStatus) countText() string {
	switch {
	case s.n > 0:
		return fmt.Sprintf("point %d/%d", s.i+1, s.n)
	case s.clusters > 1:
		return fmt.Sprintf("cluster %d", s.clusters)
	}
	return ""
}

func (s progressStatus) pointText() string {
	t := s.countText()
	if s.n > 0 && s.label != "" {
		t += " " + s.label
	}
	return t
}

func (s progressStatus) doneText() string {
	if s.interrupted {
		t := "interrupted"
		if c := s.countText(); c != "" {
			t += " at " + c
		}
		return t + fmt.Sprintf(", %d events, %v", s.events, s.elapsed.Round(100*time.Millisecond))
	}
	t := "done"
	switch {
	case s.n == 1:
		t += ", 1 point"
	case s.n > 1:
		t += fmt.Sprintf(", %d points", s.n)
	case s.clusters > 1:
		t += fmt.Sprintf(", %d clusters", s.clusters)
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
