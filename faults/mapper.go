package faults

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/sim"
)

// MapperConfig tunes Clustermapper.
type MapperConfig struct {
	Interval      time.Duration // probe round per host (default 1 ms)
	Timeout       time.Duration // a probe not back by then is lost (default 200 µs)
	T1PerRound    int           // T1s each host probes through per round and plane (default 4)
	HardStreak    int           // consecutive losses on an element that make a hard failure (default 2)
	GrayThreshold float64       // windowed loss rate that makes a gray failure (default 0.5%)
	MinLosses     int           // and at least this many losses in the window (default 3)
	Window        time.Duration // gray statistics window (default 1 s; rotated by halves)
	ProbeBytes    int           // UDP payload of a probe (default 64)
}

func (c *MapperConfig) defaults() {
	if c.Interval == 0 {
		c.Interval = time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = 200 * time.Microsecond
	}
	if c.T1PerRound == 0 {
		c.T1PerRound = 4
	}
	if c.HardStreak == 0 {
		c.HardStreak = 2
	}
	if c.GrayThreshold == 0 {
		c.GrayThreshold = 0.005
	}
	if c.MinLosses == 0 {
		c.MinLosses = 3
	}
	if c.Window == 0 {
		c.Window = time.Second
	}
	if c.ProbeBytes == 0 {
		c.ProbeBytes = 64
	}
}

// Finding is a failure Clustermapper located.
type Finding struct {
	Kind     string // nic_link | t0_t1_link | switch
	Element  string // NIC port (h3/p1), T0 port of the cable (p1.t0.0/6), or switch name
	Plane    int
	Host     int // nic_link
	T0, T1   int // t0_t1_link (switch: the T0 or T1 index, the other -1)
	Hard     bool
	LossRate float64 // gray: windowed probe loss rate
	At       sim.Time
}

func (f Finding) String() string {
	kind := "gray"
	if f.Hard {
		kind = "hard"
	}
	return fmt.Sprintf("%s %s %s (probe loss %.2f%%)", kind, f.Kind, f.Element, 100*f.LossRate)
}

const (
	probeMagic = 0xC1A5_7E12 << 24 // TraceID prefix of probe frames (fast filter)
	probeSport = 0xC1A5            // UDP source port of probe frames
)

type elemStats struct {
	streak               int
	cur, prev            [2]uint64 // sent, lost
	hardSince, graySince sim.Time
}

func (e *elemStats) add(lost bool) {
	e.cur[0]++
	if lost {
		e.cur[1]++
		e.streak++
	} else {
		e.streak = 0
	}
}

func (e *elemStats) rate() (float64, uint64) {
	s, l := e.cur[0]+e.prev[0], e.cur[1]+e.prev[1]
	if s == 0 {
		return 0, 0
	}
	return float64(l) / float64(s), l
}

type probeSlot struct {
	t1   int // -1: host → T0 → host
	back bool
}

type agent struct {
	host  int
	round uint32
	slots [][]probeSlot // [plane][k]
}

// Mapper is Clustermapper: an agent per host sends SRv6 loopback probes
// every Interval of virtual time — real frames through the fabric, host →
// T0 → host and host → T0 → T1 → T0 → host over a rotating subset of T1s,
// in every plane — and a locator turns the losses into findings: a NIC–T0
// link, a T0–T1 link or a switch, hard (consecutive losses) or gray
// (windowed loss rate above a threshold).
//
// Probe rounds, evaluations and the analysis run on a sim.Scheduler (the
// classic loop, or a partitioned cluster's global events); only the taps
// that catch returning probes run inside the hosts' partitions, each
// touching its own host's agent.
type Mapper struct {
	Topo  *fabric.Topology
	Sched sim.Scheduler
	Cfg   MapperConfig
	Rec   *Recorder
	// Pool returns the packet pool of host h's partition (probes are built
	// from it); nil means Topo.Pool (a classic cluster).
	Pool func(h int) *fabric.Pool
	// OnFinding hears every new finding (the controller).
	OnFinding func(Finding)

	agents   []*agent
	nic      []elemStats // [host*planes+plane]
	link     []elemStats // [(plane*T0+t0)*T1+t1]
	findings map[string]Finding
	owners   [][]fabric.Device // the NIC each host port had before the tap
	stopped  bool
	// Counters (Received is added to atomically: read it after a run).
	Sent, Received, Lost uint64
}

// NewMapper prepares Clustermapper on a uSID Clos fabric, running on s
// (cluster.Scheduler).
func NewMapper(topo *fabric.Topology, s sim.Scheduler, cfg MapperConfig, rec *Recorder) (*Mapper, error) {
	if topo.Kind != fabric.KindClos || topo.Mode != fabric.ForwardUSID {
		return nil, fmt.Errorf("faults: Clustermapper needs a Clos fabric with uSID forwarding (probes are SRv6 loopback paths)")
	}
	cfg.defaults()
	c := topo.Clos
	return &Mapper{Topo: topo, Sched: s, Cfg: cfg, Rec: rec, nic: make([]elemStats, topo.Hosts*topo.Planes),
		link: make([]elemStats, topo.Planes*c.T0*c.T1), findings: map[string]Finding{}}, nil
}

// tap sits between a host port and its NIC: probe frames stop here,
// everything else goes on to the NIC unchanged.
type tap struct {
	m    *Mapper
	host int
	next fabric.Device
}

func (t *tap) Ingress(p *fabric.Packet, in *fabric.Port) {
	if p.TraceID&^0xffffff == probeMagic && t.m.isProbe(p) {
		t.m.rx(t.host, p)
		return
	}
	t.next.Ingress(p, in)
}

// Start installs the probe taps and starts every agent, staggered over one
// interval so the probes spread out.
func (m *Mapper) Start() {
	t := m.Topo
	m.owners = make([][]fabric.Device, t.Hosts)
	for h := 0; h < t.Hosts; h++ {
		a := &agent{host: h, slots: make([][]probeSlot, t.Planes)}
		m.agents = append(m.agents, a)
		m.owners[h] = make([]fabric.Device, t.Planes)
		for pl, p := range t.HostPorts[h] {
			m.owners[h][pl] = p.Owner
			p.Owner = &tap{m: m, host: h, next: p.Owner}
		}
		// Spread the hosts of each T0 evenly over the interval, so every
		// T0's links are probed every Interval/HostsPerT0.
		sub, idx := t.HostSubnet(h)
		slot := idx*t.Clos.T0 + sub
		off := time.Duration(int64(m.Cfg.Interval) * int64(slot) / int64(t.Clos.HostsPerT0*t.Clos.T0))
		m.Sched.AfterFunc(off, func() { m.round(a) })
	}
	m.Sched.AfterFunc(m.Cfg.Window/2, m.rotate)
}

// Stop ends probing and removes the taps.
func (m *Mapper) Stop() {
	m.stopped = true
	for h, ps := range m.Topo.HostPorts {
		for pl, p := range ps {
			if m.owners != nil && m.owners[h][pl] != nil {
				p.Owner = m.owners[h][pl]
			}
		}
	}
}

func (m *Mapper) rotate() {
	if m.stopped {
		return
	}
	for i := range m.nic {
		m.nic[i].prev, m.nic[i].cur = m.nic[i].cur, [2]uint64{}
	}
	for i := range m.link {
		m.link[i].prev, m.link[i].cur = m.link[i].cur, [2]uint64{}
	}
	m.Sched.AfterFunc(m.Cfg.Window/2, m.rotate)
}

func (m *Mapper) round(a *agent) {
	if m.stopped {
		return
	}
	t, c := m.Topo, m.Topo.Clos
	a.round++
	t0, port := t.HostSubnet(a.host)
	k := min(m.Cfg.T1PerRound, c.T1)
	for pl := 0; pl < t.Planes; pl++ {
		s := a.slots[pl][:0]
		s = append(s, probeSlot{t1: -1})
		for j := 0; j < k; j++ {
			s = append(s, probeSlot{t1: (int(a.round)*k + j + a.host) % c.T1})
		}
		a.slots[pl] = s
		for i, sl := range s {
			var path [16]byte
			if sl.t1 < 0 {
				path = fabric.USIDAddr(fabric.USID(pl, fabric.USIDT0, t0), fabric.HostPortUSID(pl, port))
			} else {
				path = fabric.USIDAddr(fabric.USID(pl, fabric.USIDT0, t0), fabric.USID(pl, fabric.USIDT1, sl.t1),
					fabric.USID(pl, fabric.USIDT0, t0), fabric.HostPortUSID(pl, port))
			}
			m.send(a, pl, i, path)
		}
	}
	r := a.round
	m.Sched.AfterFunc(m.Cfg.Timeout, func() { m.evaluate(a, r) })
	m.Sched.AfterFunc(m.Cfg.Interval, func() { m.round(a) })
}

// seq packs (round, plane, slot) into the probe's sequence number.
func probeSeq(round uint32, plane, slot int) uint32 {
	return round<<16 | uint32(plane)<<10 | uint32(slot)
}

func (m *Mapper) send(a *agent, plane, slot int, path [16]byte) {
	pt := m.Topo.HostPorts[a.host][plane]
	if pt.Peer == nil {
		return
	}
	addr := m.Topo.HostAddr(a.host, plane)
	seq := probeSeq(a.round, plane, slot)
	pool := m.Topo.Pool
	if m.Pool != nil {
		pool = m.Pool(a.host)
	}
	p := probeFrame(pool, addr, &path, m.Cfg.ProbeBytes, seq)
	copy(p.Data[0:6], pt.Peer.MAC[:])
	copy(p.Data[6:12], pt.MAC[:])
	p.TraceID = probeMagic | uint64(seq&0xffffff)
	p.SentAt = m.Sched.Now()
	m.Sent++
	pt.Enqueue(p)
}

// probeFrame builds a probe from addr to itself along path: its UDP payload
// (at least bytes long) is an MRC EV Probe endpoint request, so captures
// decode it as one; the request id carries seq's round, the PSN its plane
// and slot (probeSeq).
func probeFrame(pool *fabric.Pool, addr [16]byte, path *[16]byte, bytes int, seq uint32) *fabric.Packet {
	p := fabric.BuildFrame(pool, fabric.FrameSpec{Src: addr, Dst: addr, Outer: path, Sport: probeSport,
		DSCP: fabric.DSCPControl, Payload: max(bytes, mrc.EndpointLen), Stored: -1})
	mrc.EncodeEndpoint(p.Data[probePayload:], mrc.BTH{PKey: mrc.DefaultPKey, PSN: seq & 0xffff}, false,
		mrc.EndpointHeader{Op: mrc.EndpointEVProbe, ReqID: uint16(seq >> 16)})
	return p
}

// probePayload is where a probe's UDP payload starts.
const probePayload = fabric.EthHeaderLen + 2*fabric.IPv6HeaderLen + fabric.UDPHeaderLen

// probeSeqOf reads back the sequence number probeFrame wrote.
func probeSeqOf(p *fabric.Packet) (uint32, bool) {
	bth, resp, e, err := mrc.DecodeEndpoint(p.Data[probePayload:])
	if err != nil || resp || e.Op != mrc.EndpointEVProbe {
		return 0, false
	}
	return uint32(e.ReqID)<<16 | bth.PSN&0xffff, true
}

// isProbe checks the bytes: IPv6-in-IPv6, inner UDP from probeSport, the
// inner source and destination the same address.
func (m *Mapper) isProbe(p *fabric.Packet) bool {
	d := p.Data
	const inner = fabric.EthHeaderLen + fabric.IPv6HeaderLen
	const udp = inner + fabric.IPv6HeaderLen
	if len(d) < udp+12 || d[fabric.EthHeaderLen+6] != fabric.ProtoIPv6 || d[inner+6] != fabric.ProtoUDP {
		return false
	}
	if binary.BigEndian.Uint16(d[udp:]) != probeSport {
		return false
	}
	for i := 0; i < 16; i++ {
		if d[inner+8+i] != d[inner+24+i] {
			return false
		}
	}
	return true
}

func (m *Mapper) rx(host int, p *fabric.Packet) {
	seq, ok := probeSeqOf(p)
	p.TraceID = 0
	p.Release()
	if !ok {
		return
	}
	a := m.agents[host]
	round, plane, slot := seq>>16, int(seq>>10&0x3f), int(seq&0x3ff)
	if uint16(round) != uint16(a.round) || plane >= len(a.slots) || slot >= len(a.slots[plane]) {
		return // late: already counted lost
	}
	a.slots[plane][slot].back = true
	atomic.AddUint64(&m.Received, 1) // taps of several partitions
}

func (m *Mapper) evaluate(a *agent, round uint32) {
	if m.stopped || a.round != round {
		return
	}
	t, c := m.Topo, m.Topo.Clos
	t0, _ := t.HostSubnet(a.host)
	changed := false
	for pl, s := range a.slots {
		direct := s[0].back
		e := &m.nic[a.host*t.Planes+pl]
		if !direct {
			m.Lost++
			changed = true
			if m.Rec != nil {
				m.Rec.probeLoss(fmt.Sprintf("h%d/p%d direct", a.host, pl))
			}
		} else if e.streak > 0 {
			changed = true
		}
		e.add(!direct)
		if !direct {
			continue // the NIC link explains the rest
		}
		for _, sl := range s[1:] {
			le := &m.link[(pl*c.T0+t0)*c.T1+sl.t1]
			if !sl.back {
				m.Lost++
				changed = true
				if m.Rec != nil {
					m.Rec.probeLoss(fmt.Sprintf("h%d/p%d via t1.%d", a.host, pl, sl.t1))
				}
			} else if le.streak > 0 {
				changed = true
			}
			le.add(!sl.back)
		}
	}
	if changed || a.host == 0 {
		m.analyze()
	}
}

// analyze turns the statistics into findings, consolidating links into
// switches when every link of a switch fails.
func (m *Mapper) analyze() {
	t, c := m.Topo, m.Topo.Clos
	now := m.Sched.Now()
	want := map[string]Finding{}
	hard := m.Cfg.HardStreak
	for pl := 0; pl < t.Planes; pl++ {
		// NIC links, or a T0 whose every host link fails.
		for t0 := 0; t0 < c.T0; t0++ {
			n := 0
			for i := 0; i < c.HostsPerT0; i++ {
				if m.nic[(t0*c.HostsPerT0+i)*t.Planes+pl].streak >= hard {
					n++
				}
			}
			if n == c.HostsPerT0 && c.HostsPerT0 > 1 {
				name := fmt.Sprintf("p%d.t0.%d", pl, t0)
				want[name] = Finding{Kind: "switch", Element: name, Plane: pl, T0: t0, T1: -1, Host: -1, Hard: true, LossRate: 1}
				continue
			}
			for i := 0; i < c.HostsPerT0; i++ {
				h := t0*c.HostsPerT0 + i
				e := &m.nic[h*t.Planes+pl]
				rate, lost := e.rate()
				name := fmt.Sprintf("h%d/p%d", h, pl)
				switch {
				case e.streak >= hard:
					want[name] = Finding{Kind: "nic_link", Element: name, Plane: pl, Host: h, T0: t0, T1: -1, Hard: true, LossRate: rate}
				case lost >= uint64(m.Cfg.MinLosses) && rate >= m.Cfg.GrayThreshold && e.streak == 0:
					want[name] = Finding{Kind: "nic_link", Element: name, Plane: pl, Host: h, T0: t0, T1: -1, LossRate: rate}
				}
			}
		}
		// T0–T1 links, or a T1 all of whose links fail.
		for u := 0; u < c.T1; u++ {
			n := 0
			for t0 := 0; t0 < c.T0; t0++ {
				if m.link[(pl*c.T0+t0)*c.T1+u].streak >= hard {
					n++
				}
			}
			if n == c.T0 && c.T0 > 1 {
				name := fmt.Sprintf("p%d.t1.%d", pl, u)
				want[name] = Finding{Kind: "switch", Element: name, Plane: pl, T0: -1, T1: u, Host: -1, Hard: true, LossRate: 1}
				continue
			}
			for t0 := 0; t0 < c.T0; t0++ {
				e := &m.link[(pl*c.T0+t0)*c.T1+u]
				rate, lost := e.rate()
				name := fmt.Sprintf("p%d.t0.%d/%d", pl, t0, c.HostsPerT0+u)
				switch {
				case e.streak >= hard:
					want[name] = Finding{Kind: "t0_t1_link", Element: name, Plane: pl, T0: t0, T1: u, Host: -1, Hard: true, LossRate: rate}
				case lost >= uint64(m.Cfg.MinLosses) && rate >= m.Cfg.GrayThreshold:
					want[name] = Finding{Kind: "t0_t1_link", Element: name, Plane: pl, T0: t0, T1: u, Host: -1, LossRate: rate}
				}
			}
		}
	}
	var gone []string
	for k := range m.findings {
		if _, ok := want[k]; !ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	for _, k := range gone {
		f := m.findings[k]
		delete(m.findings, k)
		if m.Rec != nil {
			m.Rec.Log(Entry{Event: "cleared", Target: []string{k}, Kind: f.Kind})
		}
		if m.OnFinding != nil {
			m.OnFinding(Finding{})
		}
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := want[k]
		old, ok := m.findings[k]
		if ok && old.Hard == f.Hard {
			f.At = old.At
			m.findings[k] = f
			continue
		}
		f.At = now
		m.findings[k] = f
		if m.Rec != nil {
			m.Rec.located(f)
		}
		if m.OnFinding != nil {
			m.OnFinding(f)
		}
	}
}

// Findings returns the current findings, sorted by element.
func (m *Mapper) Findings() []Finding {
	out := make([]Finding, 0, len(m.findings))
	for _, f := range m.findings {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Element < out[j].Element })
	return out
}
