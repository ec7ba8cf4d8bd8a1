package fabric

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// Topology kinds (Topology.Kind): config's words for fabric.topology.
const (
	KindClos    = "clos"    // multi-plane 2-tier Clos (BuildClos)
	KindFatTree = "fattree" // 3-tier k-ary fat-tree, one plane (BuildFatTree)
)

// ClosSpec describes a multi-plane 2-tier Clos: every host has one NIC port
// per plane; in each plane, T0 switches take HostsPerT0 hosts each and have
// one uplink to each of the plane's T1 switches.
type ClosSpec struct {
	Planes, HostsPerT0, T0, T1 int
	HostRate, FabricRate       uint64 // bits/s
	HostDelay, FabricDelay     time.Duration
	// SwitchLatency is every switch's forwarding latency (Link.Pipeline of
	// the links leaving a switch).
	SwitchLatency time.Duration
}

// FatTreeSpec describes a 3-tier k-ary fat-tree (one plane): k pods of k/2
// edge and k/2 aggregation switches, (k/2)² cores, k³/4 hosts.
type FatTreeSpec struct {
	K     int
	Rate  uint64
	Delay time.Duration
	// SwitchLatency is every switch's forwarding latency (as in ClosSpec).
	SwitchLatency time.Duration
}

// Options are the fabric-wide settings a topology is built with.
type Options struct {
	Mode     ForwardingMode
	ECMPSeed uint64
	// Port roles: switch ports facing switches, switch ports facing hosts
	// (the last hop: ECN usually off, trims marked LASTHOP), NIC ports.
	FabricPort, HostFacingPort, NICPort *PortConfig
	PFC                                 *PFCConfig
	MaxFrame                            int // largest frame (without FCS)
	// TorMulticast, when set, makes every T0 (edge) switch a programmable
	// ToR for OrderRE (tor_multicast.go); zero fields take the defaults.
	// It needs ECMP or static forwarding (path addresses route the copies).
	TorMulticast *TorMulticastConfig
}

// checkTor validates o.TorMulticast for a build.
func (o Options) checkTor() error {
	if o.TorMulticast == nil {
		return nil
	}
	if o.Mode == ForwardUSID {
		return fmt.Errorf("torMulticast: needs ecmp or static forwarding (the copies are routed by path address), got %v", o.Mode)
	}
	_, err := o.TorMulticast.withDefaults()
	return err
}

// Topology is a built fabric: switches, cables and the NIC-side ports that
// hosts attach to.
type Topology struct {
	Kind     string // KindClos or KindFatTree
	Planes   int
	Hosts    int
	Clos     ClosSpec
	FatTree  FatTreeSpec
	Mode     ForwardingMode
	Switches []*Switch
	Links    []*Link
	// HostPorts[h][plane] is host h's NIC port in that plane. Its Owner is
	// set when a NIC attaches.
	HostPorts [][]*Port
	Pool      *Pool
	Loop      *sim.Loop

	subnetSize int              // hosts per T0 / edge
	byName     map[string]*Port // built on the first Port call
	swByName   map[string]*Switch
	routing    *routing // SetReconvergence; nil: ECMP tables stay as built
}

// HostSubnet returns host h's subnet (its T0 / edge index) and index in it.
func (t *Topology) HostSubnet(h int) (subnet, index int) { return h / t.subnetSize, h % t.subnetSize }

// HostAddr returns host h's address in plane.
func (t *Topology) HostAddr(h, plane int) [16]byte {
	s, i := t.HostSubnet(h)
	return HostAddr(plane, s, i)
}

// HostPathAddr returns host h's path address for path (fabric.HostPathAddr).
func (t *Topology) HostPathAddr(h, plane, path int) [16]byte {
	s, i := t.HostSubnet(h)
	return HostPathAddr(plane, s, i, path)
}

// HostOf maps a host or path address back to the host id.
func (t *Topology) HostOf(a []byte) (host, plane int, ok bool) {
	plane, s, i, ok := ParseHostAddr(a)
	if !ok || i >= t.subnetSize || s*t.subnetSize+i >= t.Hosts || plane >= t.Planes {
		return 0, 0, false
	}
	return s*t.subnetSize + i, plane, true
}

// Port returns a port by name ("p0.t0.1/3", "h5/p2"), or nil.
func (t *Topology) Port(name string) *Port {
	if t.byName == nil {
		t.byName = map[string]*Port{}
		for _, s := range t.Switches {
			for _, p := range s.Ports {
				t.byName[p.Name] = p
			}
		}
		for _, hp := range t.HostPorts {
			for _, p := range hp {
				t.byName[p.Name] = p
			}
		}
	}
	return t.byName[name]
}

// Switch returns a switch by name, or nil.
func (t *Topology) Switch(name string) *Switch { return t.swByName[name] }

// PortNames lists every port name (switch ports first, build order).
func (t *Topology) PortNames() []string {
	var n []string
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			n = append(n, p.Name)
		}
	}
	for _, hp := range t.HostPorts {
		for _, p := range hp {
			n = append(n, p.Name)
		}
	}
	return n
}

func newTopology(loop *sim.Loop, o Options, kind string, planes, hosts, subnet int) *Topology {
	mf := o.MaxFrame
	if mf == 0 {
		mf = 9216
	}
	return &Topology{Kind: kind, Planes: planes, Hosts: hosts, Mode: o.Mode, Pool: NewPool(mf), Loop: loop,
		subnetSize: subnet, swByName: map[string]*Switch{}}
}

func (t *Topology) addSwitch(o Options, name string, tier, plane, index, nports int, usidType int) *Switch {
	ls := &lineSwitch{Switch: Switch{Name: name, ID: len(t.Switches) + 1, Tier: tier, Plane: plane, plane: uint8(plane), Index: index,
		mode: o.Mode, next: o.Mode.forwarding().next,
		seed: sim.Hash64(o.ECMPSeed, uint64(len(t.Switches)+1)), localSubnet: -1,
		USID: USID(plane, usidType, index)}}
	s := &ls.Switch
	s.usid = &s.usidPorts // until shareUSIDTables points it at the shared copy
	// One allocation for all of the switch's ports: forwarding finds the
	// egress port by address arithmetic instead of loading a pointer.
	s.slab = newPortSlab(nports)
	s.Ports = make([]*Port, nports)
	for i := range s.Ports {
		p := s.slab.at(int32(i))
		p.init(t.Loop, t.Pool, fmt.Sprintf("%s/%d", name, i), o.FabricPort)
		p.Owner, p.Index, p.MAC = s, int32(i), MAC(s.ID, i)
		s.Ports[i] = p
	}
	if o.PFC != nil && o.PFC.Enabled {
		s.acct = NewIngressAccounting(t.Loop, o.PFC, s.Ports)
		for _, p := range s.Ports {
			p.setAcct(s.acct)
		}
	}
	if tier == 0 && o.TorMulticast != nil {
		if err := s.EnableTorMulticast(*o.TorMulticast); err != nil {
			panic(err) // checkTor ran before the build
		}
	}
	t.Switches = append(t.Switches, s)
	t.swByName[name] = s
	return s
}

// connect cables a and b: one Link each way at rate with delay, each
// ranked by its position in Links + 1. That order does not depend on how
// the fabric is later cut into partitions, which is what makes every loop
// mode give the same result.
//
// A direction sent by a switch port gets the switch's forwarding latency
// sw as its Pipeline; one sent by a NIC port (no owner yet) none.
func (t *Topology) connect(a, b *Port, rate uint64, delay, sw time.Duration) {
	if len(t.Links) >= 1<<32-3 {
		panic("fabric: too many links to rank")
	}
	a.Tx = NewLink(t.Loop, a.Name+">"+b.Name, rate, delay, b)
	b.Tx = NewLink(t.Loop, b.Name+">"+a.Name, rate, delay, a)
	for _, p := range []*Port{a, b} {
		if _, ok := p.Owner.(*Switch); ok {
			p.Tx.Pipeline = sw
		}
	}
	a.Tx.rank, b.Tx.rank = uint32(len(t.Links)+1), uint32(len(t.Links)+2)
	a.Tx.src, b.Tx.src = a, b
	a.Peer, b.Peer = b, a
	t.Links = append(t.Links, a.Tx, b.Tx)
}

func (t *Topology) addHosts(o Options, n, planes int) {
	t.HostPorts = make([][]*Port, n)
	for h := 0; h < n; h++ {
		t.HostPorts[h] = make([]*Port, planes)
		for pl := 0; pl < planes; pl++ {
			p := NewPort(t.Loop, t.Pool, fmt.Sprintf("h%d/p%d", h, pl), o.NICPort)
			p.Index, p.MAC = int32(pl), MAC(1<<23|h, pl)
			t.HostPorts[h][pl] = p
		}
	}
}

func table(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = -1
	}
	return t
}

// hostPortTable maps host-port uSID indexes (port+1) to ports.
func hostPortTable(n int) []int32 {
	t := make([]int32, n+1)
	t[0] = -1
	for i := 0; i < n; i++ {
		t[i+1] = int32(i)
	}
	return t
}

func portRange(lo, n int) []int32 {
	g := make([]int32, n)
	for i := range g {
		g[i] = int32(lo + i)
	}
	return g
}

// BuildClos builds a multi-plane 2-tier Clos.
func BuildClos(loop *sim.Loop, c ClosSpec, o Options) (*Topology, error) {
	switch {
	case c.Planes < 1 || c.Planes > MaxPlanes:
		return nil, fmt.Errorf("planes: must be 1..%d, got %d", MaxPlanes, c.Planes)
	case c.HostsPerT0 < 1 || c.T0 < 1 || c.T1 < 1:
		return nil, fmt.Errorf("hostsPerT0, t0, t1: must be ≥ 1, got %d, %d, %d", c.HostsPerT0, c.T0, c.T1)
	case c.HostRate == 0 || c.FabricRate == 0:
		return nil, fmt.Errorf("link rates must be > 0")
	}
	if !o.Mode.Valid() {
		return nil, fmt.Errorf("forwarding: unknown mode %v", o.Mode)
	}
	if err := o.checkTor(); err != nil {
		return nil, err
	}
	for _, e := range []error{checkUSIDIndex("hostsPerT0+1", c.HostsPerT0+1), checkUSIDIndex("t0", c.T0), checkUSIDIndex("t1", c.T1)} {
		if e != nil {
			return nil, e
		}
	}
	t := newTopology(loop, o, KindClos, c.Planes, c.HostsPerT0*c.T0, c.HostsPerT0)
	t.Clos = c
	t.addHosts(o, t.Hosts, c.Planes)
	for pl := 0; pl < c.Planes; pl++ {
		t0s := make([]*Switch, c.T0)
		for i := range t0s {
			s := t.addSwitch(o, fmt.Sprintf("p%d.t0.%d", pl, i), 0, pl, i, c.HostsPerT0+c.T1, USIDT0)
			s.localSubnet = i
			s.hostPorts = portRange(0, c.HostsPerT0)
			up := portRange(c.HostsPerT0, c.T1)
			s.groups = [][]int32{up}
			s.subnetGroup = make([]int32, c.T0) // every other subnet: all uplinks
			s.usidPorts[USIDHostPort] = hostPortTable(c.HostsPerT0)
			s.usidPorts[USIDT1] = up
			for h := 0; h < c.HostsPerT0; h++ {
				s.Ports[h].SetConfig(o.HostFacingPort)
				s.Ports[h].HostFacing = true
				t.connect(t.HostPorts[i*c.HostsPerT0+h][pl], s.Ports[h], c.HostRate, c.HostDelay, c.SwitchLatency)
			}
			t0s[i] = s
		}
		for j := 0; j < c.T1; j++ {
			s := t.addSwitch(o, fmt.Sprintf("p%d.t1.%d", pl, j), 1, pl, j, c.T0, USIDT1)
			s.subnetGroup = make([]int32, c.T0)
			for i := 0; i < c.T0; i++ {
				s.groups = append(s.groups, []int32{int32(i)})
				s.subnetGroup[i] = int32(i)
				t.connect(t0s[i].Ports[c.HostsPerT0+j], s.Ports[i], c.FabricRate, c.FabricDelay, c.SwitchLatency)
			}
			s.usidPorts[USIDT0] = portRange(0, c.T0)
		}
	}
	t.shareUSIDTables()
	return t, nil
}

// BuildFatTree builds a 3-tier k-ary fat-tree (one plane).
func BuildFatTree(loop *sim.Loop, f FatTreeSpec, o Options) (*Topology, error) {
	k := f.K
	if k < 4 || k%2 != 0 || k > 64 {
		return nil, fmt.Errorf("k: must be even, 4..64, got %d", k)
	}
	if f.Rate == 0 {
		return nil, fmt.Errorf("link rate must be > 0")
	}
	if !o.Mode.Valid() {
		return nil, fmt.Errorf("forwarding: unknown mode %v", o.Mode)
	}
	if err := o.checkTor(); err != nil {
		return nil, err
	}
	h := k / 2
	if o.Mode == ForwardUSID {
		if err := checkUSIDIndex("edge switches (k²/2)", k*h); err != nil {
			return nil, err
		}
	}
	t := newTopology(loop, o, KindFatTree, 1, k*k*k/4, h)
	t.FatTree = f
	t.addHosts(o, t.Hosts, 1)
	edges := make([]*Switch, k*h)
	aggs := make([]*Switch, k*h)
	for pod := 0; pod < k; pod++ {
		for e := 0; e < h; e++ {
			g := pod*h + e
			s := t.addSwitch(o, fmt.Sprintf("edge.%d.%d", pod, e), 0, 0, g, k, USIDT0)
			s.localSubnet = g
			s.hostPorts = portRange(0, h)
			s.groups = [][]int32{portRange(h, h)}
			s.subnetGroup = make([]int32, k*h)
			s.usidPorts[USIDHostPort] = hostPortTable(h)
			s.usidPorts[USIDT1] = table(k * h)
			for a := 0; a < h; a++ {
				s.usidPorts[USIDT1][pod*h+a] = int32(h + a)
			}
			for i := 0; i < h; i++ {
				s.Ports[i].SetConfig(o.HostFacingPort)
				s.Ports[i].HostFacing = true
				t.connect(t.HostPorts[g*h+i][0], s.Ports[i], f.Rate, f.Delay, f.SwitchLatency)
			}
			edges[g] = s
		}
		for a := 0; a < h; a++ {
			g := pod*h + a
			s := t.addSwitch(o, fmt.Sprintf("agg.%d.%d", pod, a), 1, 0, g, k, USIDT1)
			s.groups = [][]int32{portRange(h, h)} // group 0: up to the cores
			s.subnetGroup = make([]int32, k*h)
			s.usidPorts[USIDT0] = table(k * h)
			s.usidPorts[USIDCore] = table(h * h)
			for e := 0; e < h; e++ {
				s.groups = append(s.groups, []int32{int32(e)})
				s.subnetGroup[pod*h+e] = int32(1 + e)
				s.usidPorts[USIDT0][pod*h+e] = int32(e)
				t.connect(edges[pod*h+e].Ports[h+a], s.Ports[e], f.Rate, f.Delay, f.SwitchLatency)
			}
			for j := 0; j < h; j++ {
				s.usidPorts[USIDCore][a*h+j] = int32(h + j)
			}
			aggs[g] = s
		}
	}
	for c := 0; c < h*h; c++ {
		a := c / h // cores a*h .. a*h+h-1 connect to aggregation switch a of every pod
		s := t.addSwitch(o, fmt.Sprintf("core.%d", c), 2, 0, c, k, USIDCore)
		s.subnetGroup = make([]int32, k*h)
		s.usidPorts[USIDT1] = table(k * h)
		for pod := 0; pod < k; pod++ {
			s.groups = append(s.groups, []int32{int32(pod)})
			for e := 0; e < h; e++ {
				s.subnetGroup[pod*h+e] = int32(pod)
			}
			s.usidPorts[USIDT1][pod*h+a] = int32(pod)
			t.connect(aggs[pod*h+a].Ports[h+c%h], s.Ports[pod], f.Rate, f.Delay, f.SwitchLatency)
		}
	}
	t.shareUSIDTables()
	return t, nil
}

// shareUSIDTables points every switch at one shared copy of its uSID
// tables: switches whose tables hold the same entries (every T0 of a Clos,
// every T1, the edges of a pod) share them, so forwarding reads a few
// kilobytes that stay cached instead of one table per switch.
func (t *Topology) shareUSIDTables() {
	seen := map[string]*usidFIB{}
	var key []byte
	for _, s := range t.Switches {
		key = key[:0]
		for _, tab := range s.usidPorts {
			key = binary.LittleEndian.AppendUint32(key, uint32(len(tab)))
			for _, v := range tab {
				key = binary.LittleEndian.AppendUint32(key, uint32(v))
			}
		}
		f, ok := seen[string(key)]
		if !ok {
			f = new(usidFIB)
			*f = s.usidPorts
			seen[string(key)] = f
		}
		s.usid, s.usidPorts = f, *f
	}
}

// NumPaths returns how many distinct fabric paths (uSID path choices) lead
// from host src to host dst in one plane.
func (t *Topology) NumPaths(src, dst int) int {
	ss, _ := t.HostSubnet(src)
	ds, _ := t.HostSubnet(dst)
	if ss == ds {
		return 1
	}
	if t.Kind == KindClos {
		return t.Clos.T1
	}
	h := t.FatTree.K / 2
	if ss/h == ds/h {
		return h
	}
	return h * h
}

// PathUSID returns the SRv6 outer destination that takes a packet from host
// src to host dst in plane along path choice (0 ≤ choice < NumPaths): in a
// Clos the choice is the T1 index; in a fat-tree the aggregation index (same
// pod) or aggregation × k/2 + core offset (across pods).
func (t *Topology) PathUSID(src, dst, plane, choice int) [16]byte {
	ss, _ := t.HostSubnet(src)
	ds, di := t.HostSubnet(dst)
	down := HostPortUSID(plane, di)
	if ss == ds {
		return USIDAddr(USID(plane, USIDT0, ss), down)
	}
	if t.Kind == KindClos {
		return USIDAddr(USID(plane, USIDT0, ss), USID(plane, USIDT1, choice%t.Clos.T1), USID(plane, USIDT0, ds), down)
	}
	h := t.FatTree.K / 2
	sp, dp := ss/h, ds/h
	if sp == dp {
		a := choice % h
		return USIDAddr(USID(0, USIDT0, ss), USID(0, USIDT1, sp*h+a), USID(0, USIDT0, ds), down)
	}
	choice %= h * h
	a := choice / h
	return USIDAddr(USID(0, USIDT0, ss), USID(0, USIDT1, sp*h+a), USID(0, USIDCore, choice),
		USID(0, USIDT1, dp*h+a), USID(0, USIDT0, ds), down)
}

// Hops returns the number of links a packet crosses from host src to host
// dst in one plane, split into host links and fabric links.
func (t *Topology) Hops(src, dst int) (hostLinks, fabricLinks int) {
	ss, _ := t.HostSubnet(src)
	ds, _ := t.HostSubnet(dst)
	switch {
	case ss == ds:
		return 2, 0
	case t.Kind == KindClos:
		return 2, 2
	case ss/(t.FatTree.K/2) == ds/(t.FatTree.K/2):
		return 2, 2
	default:
		return 2, 4
	}
}

// ZeroLoadLatency is the one-way latency of a frame of frameBytes (without
// FCS) from host src to host dst on an idle fabric: per hop, serialization
// of the wire bytes (frame padded to 60 B, + FCS, + ifg bytes of preamble
// and gap) plus propagation, and the forwarding latency of every switch
// on the way (one fewer than the links). A port keeps a sub-nanosecond
// remainder only between back-to-back frames, so an idle fabric matches
// this exactly.
func (t *Topology) ZeroLoadLatency(src, dst, frameBytes, ifg int) time.Duration {
	hl, fl := t.Hops(src, dst)
	hr, fr, hd, fd, sw := t.Clos.HostRate, t.Clos.FabricRate, t.Clos.HostDelay, t.Clos.FabricDelay, t.Clos.SwitchLatency
	if t.Kind != KindClos {
		hr, fr, hd, fd, sw = t.FatTree.Rate, t.FatTree.Rate, t.FatTree.Delay, t.FatTree.Delay, t.FatTree.SwitchLatency
	}
	w := wireLenOf(frameBytes) + ifg
	var r uint64
	hop := func(rate uint64, d time.Duration) time.Duration {
		r = 0
		return time.Duration(serializationTime(w, rate, &r)) + d
	}
	return time.Duration(hl)*hop(hr, hd) + time.Duration(fl)*hop(fr, fd) + time.Duration(hl+fl-1)*sw
}
