package faults

import (
	"fmt"
	"sort"
	"time"

	"github.com/vcluster/vcluster/cluster"
)

// linkID is a T0–T1 cable.
type linkID struct{ plane, t0, t1 int }

func (l linkID) key(hostsPerT0 int) string {
	return fmt.Sprintf("p%d.t0.%d/%d", l.plane, l.t0, hostsPerT0+l.t1)
}

// Controller is the policy controller: every Period it gathers
// Clustermapper's findings, computes a denylist of T0–T1 links (a failed
// link; every link of a failed T1) and pushes it to every NIC
// (cluster.DenyLink); links whose finding cleared are allowed again. With
// Immediate, a hard finding is pushed at once instead of at the next
// period.
//
// cluster.DenyLink acts on the QPs that exist when it runs: a QP created
// later starts with every EV GOOD. The controller therefore re-applies the
// whole denylist at every push, and Connect applies it to new QPs at once.
type Controller struct {
	C         *cluster.Cluster
	M         *Mapper
	Rec       *Recorder
	Period    time.Duration // default 1 s
	Immediate bool

	denied  map[linkID]bool
	stopped bool
	// Pushes counts denylist pushes; Undeniable the findings a link
	// denylist cannot express (NIC links: the NIC's port status covers
	// hard ones).
	Pushes, Undeniable int
}

// NewController returns a controller over mapper m (Period 1 s,
// Immediate on).
func NewController(c *cluster.Cluster, m *Mapper, rec *Recorder) *Controller {
	ct := &Controller{C: c, M: m, Rec: rec, Period: time.Second, Immediate: true, denied: map[linkID]bool{}}
	return ct
}

// Start hooks the mapper and starts the periodic gather.
func (ct *Controller) Start() {
	prev := ct.M.OnFinding
	ct.M.OnFinding = func(f Finding) {
		if prev != nil {
			prev(f)
		}
		if ct.Immediate && f.Hard {
			ct.Push()
		}
	}
	ct.C.Scheduler().AfterFunc(ct.Period, ct.tick)
}

// Stop ends the periodic gather.
func (ct *Controller) Stop() { ct.stopped = true }

func (ct *Controller) tick() {
	if ct.stopped {
		return
	}
	ct.Push()
	ct.C.Scheduler().AfterFunc(ct.Period, ct.tick)
}

// Denylist returns the links currently denied, as T0 port names.
func (ct *Controller) Denylist() []string {
	var out []string
	for l := range ct.denied {
		out = append(out, l.key(ct.C.Topo.Clos.HostsPerT0))
	}
	sort.Strings(out)
	return out
}

func (ct *Controller) want() map[linkID]bool {
	w := map[linkID]bool{}
	c := ct.C.Topo.Clos
	for _, f := range ct.M.Findings() {
		switch {
		case f.Kind == "t0_t1_link":
			w[linkID{f.Plane, f.T0, f.T1}] = true
		case f.Kind == "switch" && f.T1 >= 0:
			for t0 := 0; t0 < c.T0; t0++ {
				w[linkID{f.Plane, t0, f.T1}] = true
			}
		default:
			ct.Undeniable++
		}
	}
	return w
}

// Push computes the denylist from the current findings and pushes it:
// new entries denied, cleared ones allowed, the rest re-applied (so QPs
// created since the last push get them too).
func (ct *Controller) Push() {
	w := ct.want()
	hpt := ct.C.Topo.Clos.HostsPerT0
	var added, removed []string
	evs := 0
	keys := make([]linkID, 0, len(w))
	for l := range w {
		keys = append(keys, l)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.plane != b.plane {
			return a.plane < b.plane
		}
		if a.t0 != b.t0 {
			return a.t0 < b.t0
		}
		return a.t1 < b.t1
	})
	for _, l := range keys {
		n, err := ct.C.DenyLink(l.plane, l.t0, l.t1)
		if err != nil {
			continue
		}
		evs += n
		if !ct.denied[l] {
			ct.denied[l] = true
			added = append(added, l.key(hpt))
		}
	}
	var gone []linkID
	for l := range ct.denied {
		if !w[l] {
			gone = append(gone, l)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].key(hpt) < gone[j].key(hpt) })
	for _, l := range gone {
		ct.C.AllowLink(l.plane, l.t0, l.t1)
		delete(ct.denied, l)
		removed = append(removed, l.key(hpt))
	}
	ct.Pushes++
	if ct.Rec != nil {
		if len(added) > 0 {
			ct.Rec.denied(added, evs)
		}
		if len(removed) > 0 {
			ct.Rec.Log(Entry{Event: "allow_pushed", Target: removed})
		}
	}
}

// Connect connects hosts a and b and applies the current denylist to the
// new QPs at once.
func (ct *Controller) Connect(a, b int) ([]cluster.Pair, error) {
	ps, err := ct.C.Connect(a, b)
	if err != nil {
		return nil, err
	}
	for l := range ct.denied {
		ct.C.DenyLink(l.plane, l.t0, l.t1)
	}
	return ps, nil
}
