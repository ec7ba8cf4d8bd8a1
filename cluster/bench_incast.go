package cluster

import (
	"fmt"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// HtsimIncastK is the fat-tree arity of htsim's incast reference check: a
// 16-host matrix makes htsim_uec build a k=4 3-tier fat-tree (2 hosts per
// ToR, 4 per pod), and vcluster builds the same (HtsimFatTreeSets(4)).
const HtsimIncastK = 4

// QueueSample is one reading of a port's queue: at T, Bytes queued.
type QueueSample struct {
	T     sim.Time
	Bytes int
}

// IncastResult is the outcome of an incast run: the flows and totals (as
// a permutation run's) and the last hop's queue depth over time.
type IncastResult struct {
	PermResult
	Receiver int
	// Queue samples the switch port that sends to the receiver (its ToR's
	// downlink, plane 0) every sample period from the start to the
	// last completion.
	Queue []QueueSample
}

// QueueStats returns the largest and the mean of the queue samples.
func (r IncastResult) QueueStats() (peak int, mean float64) {
	if len(r.Queue) == 0 {
		return 0, 0
	}
	var sum float64
	for _, s := range r.Queue {
		peak = max(peak, s.Bytes)
		sum += float64(s.Bytes)
	}
	return peak, sum / float64(len(r.Queue))
}

// LastHopPort returns the switch port that sends to host h in plane 0:
// the far end of h's NIC cable.
func (c *Cluster) LastHopPort(h int) *fabric.Port {
	return c.Topo.HostPorts[h][0].Tx.Dst()
}

// RunIncast starts one flow of size bytes from every sender to recv at the
// current time (as RunPermutation does, one QP and one work request each),
// samples the queue of recv's last-hop port every period on the loop's
// clock, and runs until every flow completed.
func (c *Cluster) RunIncast(senders []int, recv int, size uint64, period time.Duration) (IncastResult, error) {
	if recv < 0 || recv >= len(c.Hosts) {
		return IncastResult{}, fmt.Errorf("cluster: incast receiver %d of %d hosts", recv, len(c.Hosts))
	}
	if period <= 0 {
		return IncastResult{}, fmt.Errorf("cluster: incast sample period %v, want > 0", period)
	}
	to := make([]int, len(c.Hosts))
	for h := range to {
		to[h] = h
	}
	for _, s := range senders {
		if s < 0 || s >= len(c.Hosts) || s == recv || to[s] != s {
			return IncastResult{}, fmt.Errorf("cluster: incast sender %d (receiver %d, %d hosts, each sender once)", s, recv, len(c.Hosts))
		}
		to[s] = recv
	}
	port := c.LastHopPort(recv)
	r := IncastResult{Receiver: recv}
	sched := c.Scheduler()
	var next sim.Timer
	var sample func()
	sample = func() {
		r.Queue = append(r.Queue, QueueSample{T: sched.Now(), Bytes: port.QueuedBytes()})
		next = sched.AfterFunc(period, sample)
	}
	next = sched.AfterFunc(0, sample)
	pr, err := c.RunPermutation(to, size)
	next.Stop()
	r.PermResult = pr
	for len(r.Queue) > 0 && r.Queue[len(r.Queue)-1].T > pr.SimTime {
		r.Queue = r.Queue[:len(r.Queue)-1] // the samples after the last completion
	}
	return r, err
}
