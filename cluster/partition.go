package cluster

import (
	"fmt"
	"strings"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// partitioned is the windowed side of a cluster: the sim.Parallel that
// runs its loops, and the partitioning when the fabric is cut
// (NewPartitioned; nil for the classic loop NewForWorkers(c, 0) runs in
// windows).
type partitioned struct {
	parts   *fabric.Partitioning
	run     *sim.Parallel
	workers int
}

// MaxPartitions is the most partitions the configured fabric can be cut
// into: its pods (fat-tree) or T0s per plane (Clos).
func MaxPartitions(c config.Config) int {
	if c.Fabric.Topology == config.TopologyFatTree {
		return c.Fabric.K
	}
	return c.Fabric.T0PerPlane
}

// CheckParallel reports why the configuration cannot run partitioned, or
// nil. A partitioned run needs every component to live inside one
// partition and to be touched only by that partition's loop: real-time
// pacing (one wall clock), packet captures (one pcap writer for ports in
// several partitions) and TCP hosts (netstack processor goroutines beside
// the loop) do not.
func CheckParallel(c config.Config) error {
	var bad []string
	if c.Run.Pacing == config.PacingRealtime {
		bad = append(bad, "run.pacing=realtime")
	}
	if len(c.Output.Pcap) > 0 {
		bad = append(bad, "output.pcap (a capture's files are written by one goroutine, and the captured ports would run on several)")
	}
	if c.Host.TCP {
		bad = append(bad, "host.tcp")
	}
	if len(bad) > 0 {
		return fmt.Errorf("partitioned (parallel) runs do not support %s", strings.Join(bad, ", "))
	}
	return nil
}

// NewPartitioned builds the cluster a validated config describes, cut into
// parts partitions (fabric.Partition: by pod, or by T0 index across
// planes) that run on workers goroutines (sim.Parallel). Every link is
// ranked by its position in the topology, so the results do not depend on parts or
// workers: NewPartitioned(c, 1, 1) is the single-loop reference, and any
// other (parts, workers) gives byte-identical counters and completion
// times. Run the cluster with its Run/RunWhile/Now/Executed methods, not
// through Loop: Loop is nil when parts > 1 (each host runs on its
// partition's loop, Hosts[h].Loop()). Workloads must keep to what a
// partition can do on its own: transfers between hosts and collectives
// (package collectives runs each rank on its host's loop), started
// between runs (see Sync). Controllers that act on several hosts or
// switches in the middle of a run (fault plans, Clustermapper, queue
// samplers) schedule through Scheduler: their actions run as global
// events, between windows, with every partition stopped.
func NewPartitioned(c config.Config, parts, workers int) (*Cluster, error) {
	if err := CheckParallel(c); err != nil {
		return nil, err
	}
	if n := MaxPartitions(c); parts < 1 || parts > n {
		return nil, fmt.Errorf("partitions: this fabric can be cut into 1..%d, got %d", n, parts)
	}
	loop := sim.NewLoop(sim.Options{Seed: c.Seed})
	topo, err := BuildTopology(loop, c)
	if err != nil {
		return nil, err
	}
	pt, err := fabric.Partition(topo, parts)
	if err != nil {
		return nil, err
	}
	tx, rx := c.Host.NICLatencies()
	hosts, err := endpoint.NewHosts(loop, topo, endpoint.HostOptions{MTU: uint32(c.Fabric.MTU), NoNetstack: !c.Host.Netstack,
		NICTxLatency: tx, NICRxLatency: rx,
		Partition: func(h int) (*sim.Loop, *fabric.Topology) {
			p := pt.HostPart[h]
			return pt.Loops[p], pt.Views[p]
		}})
	if err != nil {
		return nil, err
	}
	run, err := pt.Parallel()
	if err != nil {
		return nil, err
	}
	cl := &Cluster{Config: c, Topo: topo, Hosts: hosts, par: &partitioned{parts: pt, run: run, workers: max(1, workers)}}
	if parts == 1 {
		cl.Loop = loop
	}
	return cl.start()
}

// Partitioning returns the cluster's partitioning, or nil for the classic
// loop (a cluster built by New, or by NewForWorkers with no workers).
func (c *Cluster) Partitioning() *fabric.Partitioning {
	if c.par == nil {
		return nil
	}
	return c.par.parts
}

// Parallel returns the coordinator that runs the cluster in windows: that
// of a partitioned cluster, or the one-loop coordinator of the classic
// loop NewForWorkers(c, 0) builds; nil for a cluster built by New, which
// runs on its Loop directly. Global events and per-window reading
// (Scheduler, OnBarrier) go through it whenever it is set.
func (c *Cluster) Parallel() *sim.Parallel {
	if c.par == nil {
		return nil
	}
	return c.par.run
}

// SetWorkers sets how many goroutines run a partitioned cluster.
func (c *Cluster) SetWorkers(n int) {
	if c.par != nil {
		c.par.workers = max(1, n)
	}
}

// Run runs until no event is left.
func (c *Cluster) Run() {
	if c.par != nil {
		c.par.run.Run(c.par.workers)
		return
	}
	c.Loop.Run()
}

// RunWhile runs while cond holds and reports whether it stopped because
// cond became false. A cluster run in windows (Parallel set: partitioned,
// or the classic loop of NewForWorkers) checks cond between windows
// (lookahead-long slices of virtual time), with every partition stopped,
// so cond may read any host; it stops at the first window boundary where
// cond is false — the same boundary for any number of partitions and
// workers, none included — having run a little past the moment cond
// turned false. A cluster built by New checks cond before every event.
func (c *Cluster) RunWhile(cond func() bool) bool {
	if c.par != nil {
		return c.par.run.RunWhile(c.par.workers, cond)
	}
	return c.Loop.RunWhile(cond)
}

// Scheduler returns what runs actions on the whole cluster at given
// virtual times: the loop of a cluster built by New; for one run in
// windows (partitioned, or the classic loop of NewForWorkers) the
// global events of its sim.Parallel (each runs between windows with every
// partition stopped and every clock at its time, before the partitions'
// events of that time), so an action may touch any host, switch or link.
// Schedule through it between runs or from another such action, never
// from a partition's event.
func (c *Cluster) Scheduler() sim.Scheduler {
	if c.par != nil {
		return c.par.run
	}
	return c.Loop
}

// RunUntil runs every event at or before t and then sets the clock to t
// (every partition's, for a partitioned cluster), like sim.Loop.RunUntil.
func (c *Cluster) RunUntil(t sim.Time) {
	if c.par == nil {
		c.Loop.RunUntil(t)
		return
	}
	c.par.run.RunUntil(c.par.workers, t)
	for _, l := range c.par.run.Loops {
		if l.Now() < t {
			l.RunUntil(t) // nothing live is left at or before t: only sets the clock
		}
	}
}

// HostPool returns the packet pool of host h's partition: frames a
// controller builds for h's ports (probes) must come from it.
func (c *Cluster) HostPool(h int) *fabric.Pool {
	if pt := c.Partitioning(); pt != nil {
		return pt.Pools[pt.HostPart[h]]
	}
	return c.Topo.Pool
}

// Now returns the virtual time of the latest event run.
func (c *Cluster) Now() sim.Time {
	if c.par != nil {
		return c.par.run.Now()
	}
	return c.Loop.Now()
}

// NewForWorkers builds the cluster for workers goroutines: the classic
// single loop for workers ≤ 0 (see newClassic), otherwise NewPartitioned
// with 4×workers partitions (at most one per pod or T0). Results do not
// depend on the count, 0 included; smaller partitions run faster even on
// one worker (smaller event queues) and let a worker take over the
// partitions of one the machine holds back.
func NewForWorkers(c config.Config, workers int) (*Cluster, error) {
	if workers <= 0 {
		return newClassic(c)
	}
	return NewPartitioned(c, min(4*workers, MaxPartitions(c)), workers)
}

// newClassic builds the classic cluster (New: one loop, the fabric not
// cut) and runs it as a partitioned run of one partition does: through a
// one-loop sim.Parallel with the fabric's lookahead, so that RunWhile
// stops at the same window boundary and Scheduler's actions are global
// events (before everything else of their time), as on every partitioned
// run. Links are ranked from the start (fabric.NewLink), so equal-time
// arrivals tie-break the same way too, and the results are byte-identical
// to any partitioned run's; the windows cost nothing per event. A
// configuration that cannot run partitioned (real-time pacing, TCP hosts,
// a fabric without lookahead) runs on the bare loop.
func newClassic(c config.Config) (*Cluster, error) {
	cl, err := build(c, nil)
	if err != nil {
		return nil, err
	}
	if c.Run.Pacing == config.PacingRealtime || c.Host.TCP {
		return cl.start()
	}
	la, err := cl.Topo.Lookahead()
	if err != nil {
		return cl.start() // no lookahead: nothing partitioned to match either
	}
	run, err := sim.NewParallel([]*sim.Loop{cl.Loop}, la, nil)
	if err != nil {
		cl.Close()
		return nil, err
	}
	cl.par = &partitioned{run: run, workers: 1}
	return cl.start() // its Scheduler is now the windows' global events
}

// Sync brings every partition's loop to the cluster's Now and returns
// that time; for a classic cluster it only returns Loop.Now. Call it
// between runs, before starting work from outside the loop (posting,
// connecting, scheduling): after a partitioned run each loop's clock
// stands at its own latest event, which depends on which hosts share the
// partition, so work started from outside would otherwise see a
// different time on each host for each partition count. After Sync every
// host sees the same time, the latest event run anywhere, and nothing is
// pending before it (a run ends at a window boundary, after every event
// before it). A loop that still holds events at or before that time (only
// before the first run) is left alone.
func (c *Cluster) Sync() sim.Time {
	if c.par == nil {
		return c.Loop.Now()
	}
	t := c.par.run.Now()
	for _, l := range c.par.run.Loops {
		if l.Now() >= t {
			continue
		}
		if b, ok := l.NextBound(); ok && b <= t {
			continue
		}
		l.RunUntil(t) // runs nothing: only sets the clock
	}
	return t
}

// SetPrefetch turns the loops' cache prefetching (sim.Prefetcher) on or
// off: speed only, the results are the same either way.
func (c *Cluster) SetPrefetch(on bool) {
	if c.par == nil {
		c.Loop.SetPrefetch(on)
		return
	}
	for _, l := range c.par.run.Loops {
		l.SetPrefetch(on)
	}
}

// Executed returns the number of events run.
func (c *Cluster) Executed() uint64 {
	if c.par != nil {
		return c.par.run.Executed()
	}
	return c.Loop.Executed()
}
