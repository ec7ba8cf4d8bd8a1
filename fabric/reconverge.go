package fabric

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// routing is BGP-style reconvergence of the ECMP tables
// (Topology.SetReconvergence): a cable's state reaches the routing view
// delay after it changed, and then every ECMP switch of its plane keeps,
// per destination subnet, only the next hops of its built group whose
// cable the view has up and that still reach the subnet. A switch sees
// its own cables at once (loss of signal withdraws the next hop locally,
// as a BGP session on the link drops with it); what it knows of the rest
// of the fabric is the delayed view.
type routing struct {
	topo    *Topology
	delay   time.Duration
	sched   sim.Scheduler
	orig    []switchFIB    // by switch position in Topology.Switches: the tables as built
	down    map[*Link]bool // link directions the routing view has down
	pending []linkChange   // changes not yet in the view, in the order they happened
}

type switchFIB struct {
	groups      [][]int32
	subnetGroup []int32
}

type linkChange struct {
	l   *Link
	up  bool
	due sim.Time
}

// SetReconvergence turns on routing reconvergence for ECMP forwarding
// (fabric.ecmpReconvergence): when a link goes down, switches keep hashing
// flows onto it until delay has passed, then every ECMP switch of its
// plane removes the next hops that no longer reach a destination subnet
// through cables the routing view has up (a cable counts as down when
// either direction is); a link coming up is put back delay after it came
// up. The changes run as sched's events (a partitioned cluster's global
// events: cluster.Scheduler), so the tables change with every partition
// stopped. Calling it again replaces the scheduler and delay. Without it
// (the default) ECMP groups stay as built: flows hashed onto a dead link
// are lost until it comes back. uSID and static forwarding never change
// their tables.
func (t *Topology) SetReconvergence(delay time.Duration, sched sim.Scheduler) {
	if f := t.Mode.forwarding(); f == nil || !f.reconverges {
		return
	}
	if t.routing == nil {
		r := &routing{topo: t, down: map[*Link]bool{}}
		for _, s := range t.Switches {
			r.orig = append(r.orig, switchFIB{s.groups, s.subnetGroup})
		}
		for _, l := range t.Links {
			l.rt = r
		}
		t.routing = r
	}
	t.routing.delay, t.routing.sched = delay, sched
}

// changed hears that l went up or down now: the switches at its ends
// recompute at once (their own cable), the routing view follows delay
// later.
func (r *routing) changed(l *Link) {
	due := r.sched.Now() + sim.Time(r.delay)
	r.pending = append(r.pending, linkChange{l, l.up, due})
	plane := r.planeOf(l)
	r.sched.AfterFunc(0, func() { r.recompute(plane) })
	r.sched.AfterFunc(r.delay, r.apply)
}

// localDown reports whether the cable of switch port p is down now (either
// direction): what the switch owning p sees at once.
func localDown(p *Port) bool {
	return p.Tx != nil && !p.Tx.up || p.Peer != nil && p.Peer.Tx != nil && !p.Peer.Tx.up
}

// apply moves the changes that are due into the routing view and
// recomputes the tables of the planes they touch.
func (r *routing) apply() {
	now := r.sched.Now()
	var planes uint32
	n := 0
	for n < len(r.pending) && r.pending[n].due <= now {
		c := r.pending[n]
		if c.up {
			delete(r.down, c.l)
		} else {
			r.down[c.l] = true
		}
		planes |= 1 << r.planeOf(c.l)
		n++
	}
	if n == 0 {
		return // applied by an earlier event of this time
	}
	r.pending = slices.Delete(r.pending, 0, n)
	for pl := 0; pl < r.topo.Planes; pl++ {
		if planes&(1<<pl) != 0 {
			r.recompute(pl)
		}
	}
}

func (r *routing) planeOf(l *Link) int {
	for _, p := range []*Port{l.src, l.dst} {
		if p != nil {
			if s, ok := p.Owner.(*Switch); ok {
				return s.Plane
			}
		}
	}
	return 0
}

// cableDown reports whether the routing view has the cable of port p (p's
// link or its peer's) down.
func (r *routing) cableDown(p *Port) bool {
	return r.down[p.Tx] || (p.Peer != nil && r.down[p.Peer.Tx])
}

// recompute rebuilds the ECMP tables of every switch of plane from the
// built ones and the routing view.
func (r *routing) recompute(plane int) {
	t := r.topo
	idx := make(map[*Switch]int, len(t.Switches))
	for i, s := range t.Switches {
		idx[s] = i
	}
	// reach[i][d]: 0 not yet known, 1 switch i reaches subnet d, 2 it
	// does not (or is being worked out: the built tables have no loops,
	// so that only guards against one).
	reach := make([][]uint8, len(t.Switches))
	var reaches func(i, d int) bool
	// via is switch i's next hops toward subnet d: own cables as they
	// are now when local (i's own table), as the view has them otherwise
	// (what another switch knows of i).
	via := func(i, d int, local bool) []int32 {
		s, o := t.Switches[i], r.orig[i]
		if d >= len(o.subnetGroup) || o.subnetGroup[d] < 0 {
			return nil
		}
		var out []int32
		for _, p := range o.groups[o.subnetGroup[d]] {
			pt := s.Ports[p]
			if pt.Peer == nil || local && localDown(pt) || !local && r.cableDown(pt) {
				continue
			}
			next, ok := pt.Peer.Owner.(*Switch)
			if ok && reaches(idx[next], d) {
				out = append(out, p)
			}
		}
		return out
	}
	reaches = func(i, d int) bool {
		s := t.Switches[i]
		if s.localSubnet == d {
			return true
		}
		if reach[i] == nil {
			reach[i] = make([]uint8, len(r.orig[i].subnetGroup))
		}
		if d >= len(reach[i]) {
			return false
		}
		if v := reach[i][d]; v != 0 {
			return v == 1
		}
		reach[i][d] = 2
		if len(via(i, d, false)) > 0 {
			reach[i][d] = 1
		}
		return reach[i][d] == 1
	}
	for i, s := range t.Switches {
		if s.Plane != plane {
			continue
		}
		o := r.orig[i]
		if len(r.down) == 0 && !switchLocalDown(s) {
			s.groups, s.subnetGroup = o.groups, o.subnetGroup
			continue
		}
		groups := slices.Clone(o.groups) // built groups keep their index
		byKey := map[string]int32{}
		for gi, g := range groups {
			byKey[groupKey(g)] = int32(gi)
		}
		sg := make([]int32, len(o.subnetGroup))
		for d := range sg {
			if d == s.localSubnet || o.subnetGroup[d] < 0 {
				sg[d] = o.subnetGroup[d]
				continue
			}
			g := via(i, d, true)
			if len(g) == 0 {
				sg[d] = -1 // no route: dropped (DropNoRoute)
				continue
			}
			k := groupKey(g)
			gi, ok := byKey[k]
			if !ok {
				gi = int32(len(groups))
				groups = append(groups, g)
				byKey[k] = gi
			}
			sg[d] = gi
		}
		s.groups, s.subnetGroup = groups, sg
	}
}

// switchLocalDown reports whether any cable of s is down now.
func switchLocalDown(s *Switch) bool {
	for _, p := range s.Ports {
		if p.Tx != nil && localDown(p) {
			return true
		}
	}
	return false
}

func groupKey(g []int32) string {
	var b strings.Builder
	for _, p := range g {
		fmt.Fprintf(&b, "%d,", p)
	}
	return b.String()
}
