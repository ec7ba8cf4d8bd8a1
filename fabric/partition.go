package fabric

import (
	"fmt"

	"github.com/vcluster/vcluster/sim"
)

// Partitioning is a fabric cut into partitions, each driven by its own
// loop and packet pool, for a parallel run (sim.Parallel). Frames on a cut
// link (one joining two partitions) leave the sending partition when their
// serialization starts (with their arrival time) and are handed to the receiving one between
// windows; every other object is touched by its own partition only.
type Partitioning struct {
	Topo  *Topology
	Loops []*sim.Loop // partition p's loop; Loops[0] is Topo.Loop
	Pools []*Pool     // partition p's packet pool; Pools[0] is Topo.Pool
	// Views[p] is the topology as seen from partition p: the same
	// switches, links and ports, with Loop and Pool set to p's (hosts
	// attach through it, so their NICs allocate from p's pool).
	Views []*Topology
	// HostPart[h] and SwitchPart[i] (index into Topo.Switches) are the
	// partitions of hosts and switches.
	HostPart, SwitchPart []int
	Cut                  []*Link // the cut links
	// Lookahead is the window of sim.Parallel: the least propagation delay
	// of the links that partitionings cut (those touching the top tier:
	// core switches, T1s), the same for any number of partitions.
	Lookahead sim.Time

	parts []*partState
}

// partState is one partition's side of the exchange: what it sent in the
// two most recent windows, per destination partition.
type partState struct {
	out     [2][][]xframe // [window parity][destination]
	parity  int
	minSent sim.Time
	sent    uint64 // frames sent to other partitions
}

// xframe is a frame on a cut link, between partitions.
type xframe struct {
	l  *Link
	p  *Packet
	at sim.Time
}

// cutLink is the cross-partition side of a Link.
type cutLink struct {
	src *partState
	dst int
	// due holds the arrival times of the frames in flight (from head on),
	// so the sender keeps Counters.InFlightHW exactly as an uncut link
	// does: arrivals run before ordinary events of their time, so a frame
	// is in flight at a transmit at t while it is due after t.
	due  []sim.Time
	head int
	// remote, when set, takes the link's frames out of the process (a
	// lab tunnel, SetExporter) instead of another partition.
	remote FrameExporter
}

// send queues a frame that arrives at at in the destination partition. The
// frame leaves the sending pool's accounting; Deliver adopts it into the
// receiving pool, where it is released.
func (c *cutLink) send(l *Link, p *Packet, at sim.Time) {
	if c.remote != nil {
		l.Counters.Packets++
		l.Counters.Bytes += uint64(p.WireLen)
		c.remote.ExportFrame(l, p, at)
		return
	}
	now := l.loop.Now()
	for c.head < len(c.due) && c.due[c.head] <= now {
		c.head++
	}
	if c.head > 64 && 2*c.head >= len(c.due) {
		c.due, c.head = c.due[:copy(c.due, c.due[c.head:])], 0
	}
	c.due = append(c.due, at)
	if n := uint64(len(c.due) - c.head); n > l.Counters.InFlightHW {
		l.Counters.InFlightHW = n
	}
	s := c.src
	s.out[s.parity][c.dst] = append(s.out[s.parity][c.dst], xframe{l, p, at})
	s.minSent = min(s.minSent, at)
	s.sent++
	if p.pool != nil {
		p.pool.Live--
	}
}

// Partition cuts a freshly built topology (no traffic yet, no hosts
// attached) into parts partitions (its links are ranked as built). A
// fat-tree is cut by pod: the hosts, edge and aggregation switches of a pod
// stay together, contiguous pods form a partition (parts ≤ k), and core
// switches are spread round-robin; the aggregation–core links are cut. A
// Clos is cut by T0 index: T0 i of every plane and its hosts (which
// connect to T0 i in every plane) stay together (parts ≤ T0 per plane), T1
// switches are spread round-robin over partitions across planes; T0–T1
// links are cut. Cut links need a propagation delay > 0.
func Partition(t *Topology, parts int) (*Partitioning, error) {
	groups := t.partitionGroups()
	if parts < 1 || parts > groups {
		return nil, fmt.Errorf("fabric: %d partitions: a %s of this size can be cut into 1..%d", parts, t.Kind, groups)
	}
	if t.Loop.Pending() != 0 || t.Pool.Live != 0 {
		return nil, fmt.Errorf("fabric: partition the topology before anything runs on it")
	}
	for _, hp := range t.HostPorts {
		for _, p := range hp {
			if p.Owner != nil {
				return nil, fmt.Errorf("fabric: partition the topology before hosts attach")
			}
		}
	}
	pt := &Partitioning{Topo: t, HostPart: make([]int, t.Hosts), SwitchPart: make([]int, len(t.Switches)), Lookahead: sim.MaxTime}
	for p := 0; p < parts; p++ {
		loop, pool, view := t.Loop, t.Pool, t
		if p > 0 {
			loop = sim.NewLoop(sim.Options{Seed: t.Loop.Seed()})
			pool = NewPool(t.Pool.LargeCap)
			v := *t
			v.Loop, v.Pool = loop, pool
			view = &v
		}
		ps := &partState{minSent: sim.MaxTime}
		for i := range ps.out {
			ps.out[i] = make([][]xframe, parts)
		}
		pt.Loops, pt.Pools, pt.Views = append(pt.Loops, loop), append(pt.Pools, pool), append(pt.Views, view)
		pt.parts = append(pt.parts, ps)
	}
	of := func(group int) int { return group * parts / groups }
	index := map[*sim.Loop]int{}
	for p, l := range pt.Loops {
		index[l] = p
	}
	for i, s := range t.Switches {
		var p int
		switch {
		case t.Kind == KindFatTree && s.Tier < 2:
			p = of(s.Index / (t.FatTree.K / 2)) // the pod
		case t.Kind == KindFatTree:
			p = s.Index % parts
		case s.Tier == 0:
			p = of(s.Index)
		default:
			p = (s.Plane*t.Clos.T1 + s.Index) % parts
		}
		pt.SwitchPart[i] = p
		if s.acct != nil {
			s.acct.loop = pt.Loops[p]
		}
		for _, port := range s.Ports {
			port.loop, port.pool = pt.Loops[p], pt.Pools[p]
		}
	}
	for h, hp := range t.HostPorts {
		sub, _ := t.HostSubnet(h)
		if t.Kind == KindFatTree {
			sub /= t.FatTree.K / 2
		}
		p := of(sub)
		pt.HostPart[h] = p
		for _, port := range hp {
			port.loop, port.pool = pt.Loops[p], pt.Pools[p]
		}
	}
	la, err := t.Lookahead()
	if err != nil {
		return nil, err
	}
	pt.Lookahead = la
	for _, l := range t.Links {
		s, d := index[l.src.loop], index[l.dst.loop]
		l.loop = pt.Loops[s]
		if s == d {
			continue
		}
		if !t.topTier(l) {
			return nil, fmt.Errorf("fabric: link %s joins partitions %d and %d below the top tier", l.Name, s, d)
		}
		l.cut = &cutLink{src: pt.parts[s], dst: d}
		pt.Cut = append(pt.Cut, l)
	}
	return pt, nil
}

// Lookahead is the window of a parallel run of the topology (sim.Parallel):
// the least delay (propagation plus the sending switch's pipeline) of the links a partitioning may cut (those
// touching the top tier: core switches, T1s), whatever the number of
// partitions — one included, the classic loop run in windows — so that
// every partitioning runs the same windows. Such a link without delay is
// an error (no lookahead).
func (t *Topology) Lookahead() (sim.Time, error) {
	la := sim.MaxTime
	for _, l := range t.Links {
		if t.topTier(l) {
			if l.Delay+l.Pipeline <= 0 {
				return 0, fmt.Errorf("fabric: link %s may join partitions but has no propagation delay (no lookahead)", l.Name)
			}
			la = min(la, sim.Time(l.Delay+l.Pipeline))
		}
	}
	return la, nil
}

// topTier reports whether l touches a top-tier switch (core, T1).
func (t *Topology) topTier(l *Link) bool {
	top := 1
	if t.Kind == KindFatTree {
		top = 2
	}
	for _, p := range []*Port{l.src, l.dst} {
		if p == nil {
			continue
		}
		if s, ok := p.Owner.(*Switch); ok && s.Tier == top {
			return true
		}
	}
	return false
}

// partitionGroups is the most partitions the topology can be cut into.
func (t *Topology) partitionGroups() int {
	if t.Kind == KindFatTree {
		return t.FatTree.K
	}
	return t.Clos.T0
}

// Parallel returns the sim.Parallel that runs the partitions.
func (pt *Partitioning) Parallel() (*sim.Parallel, error) {
	return sim.NewParallel(pt.Loops, pt.Lookahead, pt)
}

// BeginWindow implements sim.Exchanger.
func (pt *Partitioning) BeginWindow(p int, w uint64) {
	s := pt.parts[p]
	s.parity, s.minSent = int(w&1), sim.MaxTime
}

// EndWindow implements sim.Exchanger.
func (pt *Partitioning) EndWindow(p int, w uint64) sim.Time { return pt.parts[p].minSent }

// Deliver implements sim.Exchanger: the frames the other partitions sent
// partition p in window w join their links' in-flight queues, adopted by
// p's pool, and their arrivals are scheduled (ranked) on p's loop. Sources
// are taken in partition order; frames of one link keep their order.
func (pt *Partitioning) Deliver(p int, w uint64) {
	loop, pool := pt.Loops[p], pt.Pools[p]
	for _, s := range pt.parts {
		box := &s.out[w&1][p]
		for i, x := range *box {
			if x.p.pool != nil {
				x.p.pool = pool
				pool.Live++
			}
			l := x.l
			l.inflight.push(x.p)
			loop.PostRanked(x.at, l, 0, l.rank)
			(*box)[i] = xframe{}
		}
		*box = (*box)[:0]
	}
}

// CrossFrames returns how many frames crossed partitions so far.
func (pt *Partitioning) CrossFrames() uint64 {
	var n uint64
	for _, s := range pt.parts {
		n += s.sent
	}
	return n
}

// Live returns the packets held across all partitions' pools (leak checks:
// a frame between partitions counts in neither pool until delivered).
func (pt *Partitioning) Live() int {
	n := 0
	for _, p := range pt.Pools {
		n += p.Live
	}
	return n
}
