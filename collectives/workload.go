package collectives

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// WorkItem is one collective of a training iteration: op with algorithm
// Algo on Bytes, either over all ranks (Group 0) or, with Group g, over
// consecutive groups of g ranks at once (e.g. expert-parallel all-to-all
// inside groups while data parallelism spans everyone).
type WorkItem struct {
	Op    Op     `json:"op"`
	Algo  string `json:"algo"`
	Bytes uint64 `json:"bytes"`
	Group int    `json:"group,omitempty"`
}

func (w WorkItem) String() string {
	s := fmt.Sprintf("%s:%s:%s", w.Op, w.Algo, units.FormatBytes(w.Bytes))
	if w.Group > 0 {
		s += "@" + strconv.Itoa(w.Group)
	}
	return s
}

// ParseWorkload reads a comma-separated list of op:algo:size[@group], e.g.
// "allreduce:ring:64M,alltoall:pairwise:16M@8".
func ParseWorkload(s string) ([]WorkItem, error) {
	var items []WorkItem
	for _, f := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(f), ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("workload item %q: want op:algo:size[@group]", f)
		}
		op, err := ParseOp(parts[0])
		if err != nil {
			return nil, err
		}
		if _, err := Lookup(op, parts[1]); err != nil {
			return nil, err
		}
		size, group, _ := strings.Cut(parts[2], "@")
		b, err := units.ParseBytes(size)
		if err != nil {
			return nil, err
		}
		w := WorkItem{Op: op, Algo: parts[1], Bytes: b}
		if group != "" {
			if w.Group, err = strconv.Atoi(group); err != nil || w.Group < 2 {
				return nil, fmt.Errorf("workload item %q: group must be an integer ≥ 2", f)
			}
		}
		items = append(items, w)
	}
	return items, nil
}

// WorkloadResult is what RunWorkload measured.
type WorkloadResult struct {
	Items []WorkItem `json:"items"`
	// IterNs is each iteration's virtual time, from the first item's
	// launch to the last rank finishing the last item; PerItem[i][k] the
	// time of item k in iteration i. Items run one after the other (on a
	// partitioned cluster each starts at the window boundary after the
	// previous one finished, see Comm: IterNs then includes those gaps).
	IterNs  []sim.Time `json:"iter_ns"`
	PerItem [][]Result `json:"per_item"`
	MeanNs  sim.Time   `json:"mean_iter_ns"` // the headline number
}

func (m *Comm) groups(g int) [][]int {
	if g <= 0 || g > m.Size() {
		g = m.Size()
	}
	var gs [][]int
	for lo := 0; lo+g <= m.Size(); lo += g {
		grp := make([]int, g)
		for i := range grp {
			grp[i] = lo + i
		}
		gs = append(gs, grp)
	}
	return gs
}

// RunWorkload runs the items in order, iters times, and reports each
// iteration's time (each item checked as Run does).
func (m *Comm) RunWorkload(items []WorkItem, iters int) (WorkloadResult, error) {
	res := WorkloadResult{Items: items}
	for _, w := range items {
		if w.Group > 0 && m.Size()%w.Group != 0 {
			return res, fmt.Errorf("workload item %s: %d ranks do not split into groups of %d", w, m.Size(), w.Group)
		}
	}
	var total sim.Time
	for it := 0; it < max(iters, 1); it++ {
		t0 := m.now()
		var row []Result
		for _, w := range items {
			a, err := Lookup(w.Op, w.Algo)
			if err != nil {
				return res, err
			}
			r, err := m.runOn(a, m.groups(w.Group), w.Bytes, RunOptions{})
			if err != nil {
				return res, err
			}
			row = append(row, r)
		}
		d := m.end - t0
		total += d
		res.IterNs = append(res.IterNs, d)
		res.PerItem = append(res.PerItem, row)
	}
	res.MeanNs = total / sim.Time(len(res.IterNs))
	return res, nil
}
