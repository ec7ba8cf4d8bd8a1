package pathquality

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// ControlPlane is every switch's control plane over one topology.
type ControlPlane struct {
	topo  *fabric.Topology
	sched sim.Scheduler
	cfg   Config
	wsum  float64 // Σ weights
	sw    []*switchCP

	stats      Stats
	adverts    []advert
	sent       []sentUpdate
	ticks      []sim.Time // the sample times (every port's series has one sample each)
	nextSample sim.Time
	nextAdvert sim.Time
	stopped    bool
}

// switchCP is one switch's control plane.
type switchCP struct {
	s     *fabric.Switch
	idx   int
	as    uint32
	addr  [16]byte // its uSID locator: the next hop it advertises
	plane int
	hdc   *fabric.HDCCollector
	ports []portCP
	// Per subnet: the value last advertised (valid once sentOnce), the
	// path bandwidth computed at the last tick and the weights last
	// computed.
	advertised []float64
	sentOnce   []bool
	path       []float64
	weights    [][]float64
	// setFor[d], setW[d]: the next-hop group the switch's table toward d
	// was last set for and the weights set (nil: none; a reconvergence
	// replaces the group, which makes the table stale).
	setFor [][]int32
	setW   [][]float64
	dirty  []bool // receive: d is queued for recomputation
}

// portCP is the sampler's state of one switch port, and what the
// neighbour at its far end (a switch) advertised.
type portCP struct {
	p      *fabric.Port
	peer   *switchCP // nil: the far end is not a switch
	peerAt int32     // the far end's port index on peer
	prev   fabric.PortSnapshot
	last   LinkState
	// The samples' scores since the last advertise tick.
	scoreSum float64
	scoreN   int
	// routeGbps is the link's quality the routes use: its capacity at the
	// last advertise tick × the mean score of the period before it.
	routeGbps float64
	// rx[d]: the path bandwidth toward subnet d the neighbour advertised
	// (NaN: nothing yet); nil when peer is nil.
	rx     []float64
	series []sample // the TSDB: one per tick
}

// sample is one sampler period of one port as the series keeps it
// (32 bytes: float32 holds more digits than the CSV writes).
type sample struct {
	util, meanQ, score, quality float32
	watermark, hdc              uint32
	delay                       time.Duration
}

// advert is one advertisement decision.
type advert struct {
	at         sim.Time
	sw, subnet int
	gbps       float64
	sent       bool
	neighbours int
}

// New enables telemetry and HDC on every switch port of topo and starts
// sampling and advertising on sched from its current time. cfg is
// validated (WithDefaults first). At New every switch takes its baseline
// reading and advertises every subnet once from its links' capacities
// (the attribute a BGP session carries when it comes up), so a link
// degraded before the run is known from the start.
//
// sched runs the periodic work until Stop; a run that waits for its loop
// to drain must call Stop when its traffic is done.
func New(topo *fabric.Topology, sched sim.Scheduler, cfg Config) (*ControlPlane, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cp := &ControlPlane{topo: topo, sched: sched, cfg: cfg,
		wsum: cfg.Weights.Bandwidth + cfg.Weights.Queue + cfg.Weights.Delay}
	bySwitch := make(map[*fabric.Switch]*switchCP, len(topo.Switches))
	for i, s := range topo.Switches {
		h, err := s.EnableHDC(cfg.HDC)
		if err != nil {
			return nil, fmt.Errorf("pathquality: %s: %w", s.Name, err)
		}
		n := s.NumSubnets()
		sc := &switchCP{s: s, idx: i, as: ASBase + uint32(s.ID), plane: s.Plane, hdc: h,
			addr:       fabric.USIDAddr(s.USID),
			ports:      make([]portCP, len(s.Ports)),
			advertised: make([]float64, n), sentOnce: make([]bool, n),
			path: make([]float64, n), weights: make([][]float64, n),
			setFor: make([][]int32, n), setW: make([][]float64, n), dirty: make([]bool, n)}
		cp.sw = append(cp.sw, sc)
		bySwitch[s] = sc
	}
	now := sched.Now()
	for _, sc := range cp.sw {
		for i, p := range sc.s.Ports {
			pc := &sc.ports[i]
			pc.p = p
			p.EnableTelemetry()
			pc.prev = p.ReadTelemetry()
			c := capacityGbps(p)
			pc.routeGbps = c
			pc.last = LinkState{Switch: sc.s.Name, Port: p.Name, CapacityGbps: c, Score: 1, QualityGbps: c}
			if p.Peer != nil {
				pc.last.Peer = p.Peer.Name
				if ps, ok := p.Peer.Owner.(*fabric.Switch); ok {
					pc.peer, pc.peerAt = bySwitch[ps], p.Peer.Index
					pc.rx = make([]float64, sc.s.NumSubnets())
					for d := range pc.rx {
						pc.rx[d] = math.NaN()
					}
				}
			}
		}
	}
	for _, sc := range cp.sw {
		cp.advertise(sc, now, true)
	}
	cp.nextSample = now + sim.Time(cfg.SamplePeriod)
	cp.nextAdvert = now + sim.Time(cfg.AdvertisePeriod)
	cp.schedule()
	return cp, nil
}

// Stop ends the periodic sampling and advertising (updates in flight are
// still delivered).
func (cp *ControlPlane) Stop() { cp.stopped = true }

// Config returns the configuration in use (defaults applied).
func (cp *ControlPlane) Config() Config { return cp.cfg }

// Stats returns the totals so far.
func (cp *ControlPlane) Stats() Stats {
	st := cp.stats
	for _, sc := range cp.sw {
		st.HDCRecords += uint64(len(sc.hdc.Records)) + sc.hdc.Overflow
	}
	return st
}

// Links returns every switch port's latest LinkState (switch, port order).
func (cp *ControlPlane) Links() []LinkState {
	var l []LinkState
	for _, sc := range cp.sw {
		for i := range sc.ports {
			l = append(l, sc.ports[i].last)
		}
	}
	return l
}

// Routes returns every (switch, subnet) RouteState (switch, subnet order).
func (cp *ControlPlane) Routes() []RouteState {
	var r []RouteState
	for _, sc := range cp.sw {
		for d := range sc.path {
			rs := RouteState{Switch: sc.s.Name, Subnet: d, Path: sc.path[d], Weights: slices.Clone(sc.weights[d])}
			if sc.sentOnce[d] {
				rs.Advertised = sc.advertised[d]
			}
			r = append(r, rs)
		}
	}
	return r
}

// schedule posts the next tick: the earlier of the next sample and the
// next advertisement (one event for both when they coincide, sampling
// first).
func (cp *ControlPlane) schedule() {
	cp.sched.At(min(cp.nextSample, cp.nextAdvert), cp.tick)
}

func (cp *ControlPlane) tick() {
	if cp.stopped {
		return
	}
	now := cp.sched.Now()
	if now >= cp.nextSample {
		cp.sample(now)
		cp.nextSample += sim.Time(cp.cfg.SamplePeriod)
	}
	if now >= cp.nextAdvert {
		for _, sc := range cp.sw {
			cp.advertise(sc, now, false)
		}
		cp.nextAdvert += sim.Time(cp.cfg.AdvertisePeriod)
	}
	cp.schedule()
}

// capacityGbps is the rate of the link p sends on now, 0 when down.
func capacityGbps(p *fabric.Port) float64 {
	if p.Tx == nil || !p.Tx.Up() {
		return 0
	}
	return float64(p.Tx.Rate) / 1e9
}

// sample reads every switch port's counters and HDC window.
func (cp *ControlPlane) sample(now sim.Time) {
	cp.ticks = append(cp.ticks, now)
	for _, sc := range cp.sw {
		win := sc.hdc.TakeWindow()
		for i := range sc.ports {
			pc := &sc.ports[i]
			snap := pc.p.ReadTelemetry()
			var hd fabric.HDCPortDelay
			if i < len(win) {
				hd = win[i]
			}
			s := cp.measure(pc, snap, hd)
			pc.series = append(pc.series, s)
			pc.prev = snap
			pc.scoreSum += pc.last.Score
			pc.scoreN++
			cp.stats.Samples++
		}
	}
}

// measure differences snap against the port's previous reading, scores
// the period into pc.last and returns its point of the series.
func (cp *ControlPlane) measure(pc *portCP, snap fabric.PortSnapshot, hd fabric.HDCPortDelay) sample {
	prev := pc.prev
	var util, meanQ float64
	var delay time.Duration
	var wm int
	dt := float64(snap.At - prev.At)
	if dt > 0 && snap.RateBps > 0 {
		util = min(1, max(0, float64(snap.TxBytes-prev.TxBytes)*8/(dt/1e9*float64(snap.RateBps))))
	}
	var occ uint64
	for c := range snap.OccupancyByteNanos {
		occ += snap.OccupancyByteNanos[c] - prev.OccupancyByteNanos[c]
		wm = max(wm, snap.Watermark[c])
	}
	if dt > 0 {
		meanQ = float64(occ) / dt
	}
	if tx := snap.TxPackets - prev.TxPackets; tx > 0 {
		delay = hd.SumLatency / time.Duration(tx)
	}
	score := cp.score(pc.p, util, meanQ, delay)
	c := capacityGbps(pc.p)
	pc.last.CapacityGbps, pc.last.Utilization, pc.last.MeanQueueBytes = c, util, meanQ
	pc.last.MeanDelay, pc.last.Score, pc.last.QualityGbps = delay, score, c*score
	return sample{util: float32(util), meanQ: float32(meanQ), score: float32(score), quality: float32(c * score),
		watermark: uint32(min(wm, math.MaxUint32)), hdc: uint32(min(hd.Records, math.MaxUint32)), delay: delay}
}

// score is the documented formula: the weighted mean of the available
// bandwidth fraction, the queue factor and the delay factor.
func (cp *ControlPlane) score(p *fabric.Port, util, meanQ float64, delay time.Duration) float64 {
	w := cp.cfg.Weights
	ref := float64(cp.cfg.QueueRefBytes)
	if ref == 0 {
		ref = float64(portBuffer(p))
	}
	qf := 1 - min(1, meanQ/ref)
	df := 1 - min(1, float64(delay)/float64(cp.cfg.DelayRef))
	return Score(w, util, qf, df)
}

// Score combines a link's factors, each 0..1 with 1 best: the available
// bandwidth 1−utilization, the queue factor 1−min(1, meanQueue/QueueRef)
// and the delay factor 1−min(1, meanDelay/DelayRef), as their mean
// weighted by w.
func Score(w Weights, util, queueFactor, delayFactor float64) float64 {
	sum := w.Bandwidth + w.Queue + w.Delay
	return (w.Bandwidth*(1-util) + w.Queue*queueFactor + w.Delay*delayFactor) / sum
}

// fallbackBuffer is the queue reference of a port without a buffer limit.
const fallbackBuffer = 1 << 20

func portBuffer(p *fabric.Port) int {
	if c := p.Config(); c != nil && c.BufferBytes > 0 {
		return c.BufferBytes
	}
	return fallbackBuffer
}

// advertise is switch sc's advertise tick (initial: the session coming up,
// from the links' capacities): it folds the period's scores into its
// links' route quality, computes the path bandwidth of every subnet,
// sets its weights and sends the updates damping lets through.
func (cp *ControlPlane) advertise(sc *switchCP, now sim.Time, initial bool) {
	for i := range sc.ports {
		pc := &sc.ports[i]
		mean := pc.last.Score
		if pc.scoreN > 0 {
			mean = pc.scoreSum / float64(pc.scoreN)
		}
		pc.routeGbps = capacityGbps(pc.p) * mean
		pc.scoreSum, pc.scoreN = 0, 0
	}
	var out []delivery
	for d := range sc.path {
		pb := cp.route(sc, d)
		sc.path[d] = pb
		nbrs := cp.neighbours(sc, d)
		if len(nbrs) == 0 {
			continue
		}
		if !initial && sc.sentOnce[d] {
			last := sc.advertised[d]
			if math.Abs(pb-last) <= max(cp.cfg.DampingFraction*last, cp.cfg.DampingMinGbps) {
				if pb != last {
					cp.stats.UpdatesSuppressed += uint64(len(nbrs))
					cp.adverts = append(cp.adverts, advert{at: now, sw: sc.idx, subnet: d, gbps: pb, neighbours: len(nbrs)})
				}
				continue
			}
		}
		msg := EncodeUpdate(cp.update(sc, d, pb))
		for _, i := range nbrs {
			out = append(out, delivery{to: sc.ports[i].peer, port: sc.ports[i].peerAt, msg: msg})
			cp.sent = append(cp.sent, sentUpdate{at: now, from: sc, port: int32(i), msg: msg})
			cp.stats.UpdatesSent++
			cp.stats.UpdateBytes += uint64(len(msg))
		}
		sc.advertised[d], sc.sentOnce[d] = pb, true
		cp.adverts = append(cp.adverts, advert{at: now, sw: sc.idx, subnet: d, gbps: pb, sent: true, neighbours: len(nbrs)})
	}
	if len(out) > 0 {
		cp.sched.At(now+sim.Time(cp.cfg.ControlDelay), func() { cp.receive(out) })
	}
}

// delivery is one UPDATE on its way to a neighbour's port.
type delivery struct {
	to   *switchCP
	port int32
	msg  []byte
}

// receive applies updates at their neighbours: each decodes its bytes
// (the wire format is what carries the value); then every (switch,
// subnet) that heard one is recomputed once, in order of arrival.
func (cp *ControlPlane) receive(out []delivery) {
	type key struct {
		sc *switchCP
		d  int
	}
	var todo []key
	for _, m := range out {
		u, err := DecodeUpdate(m.msg)
		if err != nil {
			panic("pathquality: an UPDATE this package encoded does not decode: " + err.Error())
		}
		d := int(binary.BigEndian.Uint16(u.Prefix[6:]))
		pc := &m.to.ports[m.port]
		if pc.rx == nil || d >= len(pc.rx) {
			continue
		}
		pc.rx[d] = u.Gbps()
		if !m.to.dirty[d] {
			m.to.dirty[d] = true
			todo = append(todo, key{m.to, d})
		}
	}
	for _, k := range todo {
		k.sc.dirty[k.d] = false
		cp.route(k.sc, k.d)
	}
}

// route computes switch sc's path bandwidth toward subnet d — its own
// subnet: the capacity of its host-facing ports; another: Σ over its next
// hops of min(the link's quality, what the neighbour advertised, or the
// link's capacity before it has) — and, when they changed, its weights.
func (cp *ControlPlane) route(sc *switchCP, d int) float64 {
	if d == sc.s.LocalSubnet() {
		var c float64
		for i := range sc.ports {
			if sc.ports[i].p.HostFacing {
				c += capacityGbps(sc.ports[i].p)
			}
		}
		sc.weights[d] = nil
		return c
	}
	g := sc.s.NextHops(d)
	w := sc.weights[d]
	if len(w) != len(g) {
		w = make([]float64, len(g))
	}
	var pb float64
	for i, n := range g {
		pc := &sc.ports[n]
		adv := capacityGbps(pc.p)
		if pc.rx != nil && !math.IsNaN(pc.rx[d]) {
			adv = pc.rx[d]
		}
		w[i] = max(0, min(pc.routeGbps, adv))
		pb += w[i]
	}
	sc.weights[d] = w
	cp.apply(sc, d, w)
	return pb
}

// apply sets sc's weights toward d when they differ from those set.
func (cp *ControlPlane) apply(sc *switchCP, d int, w []float64) {
	if !cp.cfg.Apply || len(w) < 2 {
		return
	}
	g := sc.s.NextHops(d)
	// The table is current when it was set for this very group (groups
	// are replaced, never edited).
	current := len(sc.setFor[d]) == len(g) && &sc.setFor[d][0] == &g[0]
	if current && slices.Equal(sc.setW[d], w) {
		return
	}
	moved, err := sc.s.SetPathWeights(d, w)
	if err != nil {
		panic("pathquality: " + err.Error()) // the weights are finite, ≥ 0 and sized to the group
	}
	sc.setFor[d], sc.setW[d] = g, append(sc.setW[d][:0], w...)
	// A first table (at New, or after reconvergence replaced the group)
	// is not a change of weights.
	if current && moved > 0 {
		cp.stats.WeightChanges++
		cp.stats.BucketsMoved += uint64(moved)
	}
}

// neighbours lists the ports of sc whose far end is a switch that
// should hear about subnet d: split horizon leaves out the next hops sc
// itself uses toward d (BGP's AS-path loop check would drop the route
// there).
func (cp *ControlPlane) neighbours(sc *switchCP, d int) []int {
	g := sc.s.NextHops(d)
	var n []int
	for i := range sc.ports {
		if sc.ports[i].peer != nil && !slices.Contains(g, int32(i)) {
			n = append(n, i)
		}
	}
	return n
}

// update builds sc's advertisement of pb Gb/s toward subnet d.
func (cp *ControlPlane) update(sc *switchCP, d int, pb float64) Update {
	return Update{
		Origin:      OriginIGP,
		ASPath:      []uint32{sc.as},
		NextHop:     sc.addr,
		Prefix:      SubnetPrefix(sc.plane, d),
		PrefixLen:   SubnetPrefixLen,
		CommunityAS: ASTrans,
		Bandwidth:   BandwidthFromGbps(pb),
	}
}

// SubnetPrefixLen is the length of a subnet's prefix: fd00:0:plane:subnet::/64.
const SubnetPrefixLen = 64

// SubnetPrefix is the IPv6 prefix of subnet d's hosts in plane (the host
// address plan, fabric/addr.go).
func SubnetPrefix(plane, d int) [16]byte {
	a := fabric.HostAddr(plane, d, 0)
	clear(a[8:])
	return a
}
