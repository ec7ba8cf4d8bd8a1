package experiments

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mprdma"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// orderre is TARGETS T12 (MP-RDMA: 2–4× single-path RDMA's throughput at
// 0.5–10% link loss) and T13 (OrderRE against naive selective
// retransmission on random paths): one long flow across a 4-spine
// leaf-spine whose spines differ in delay, every loss-recovery scheme of
// package mprdma beside IRN and MRC, the receive bitmap swept from 2.25 to
// 1.25 BDP. The schemes and the ToR model are other packages'; this file
// only builds the cells, samples the QPs' counters from the loop and
// judges the published shapes.
func init() {
	Register(&Experiment{
		Name:    "orderre",
		Title:   "multipath RDMA loss recovery: MP-RDMA, Random, OrderRE vs IRN and MRC on a 4-path leaf-spine; MP-RDMA vs single-path RoCE",
		Targets: []string{"T12", "T13"},
		Cluster: paperCluster(orderreClusterSets()...),
		Params: []Param{
			{Key: "bytes", Default: "64M", Quick: "16M", Full: "256M", Doc: "bytes of the one flow of every cell (host 0 → host 1, across the spines)"},
			{Key: "losses", Default: "0.001,0.01", Doc: "T13: Bernoulli loss rates on every spine link (both directions)"},
			{Key: "bitmaps", Default: "2.25,2,1.75,1.5,1.25", Full: "2.5,2.25,2,1.75,1.5,1.25,1", Doc: "T13: receive bitmap sizes in BDPs (transport.mprdma.bitmapEntries = ceil(f × BDP packets))"},
			{Key: "t12Losses", Default: "0.005,0.01,0.02,0.05,0.1", Doc: "T12: Bernoulli loss rates on the links of one spine (the single-path RoCE flow's)"},
			{Key: "skew", Default: "0.35", Doc: "the slowest spine's extra one-way delay in base RTTs; spine s gets s/3 of it (seed 004 §3.2.1: the network's largest out-of-order degree O_MAX ≈ 0.3–0.4 BDP); 0 makes the paths equal"},
			{Key: "sample", Default: "5us", Quick: "10us", Doc: "interval of the bitmap-occupancy samples (virtual time, a loop timer)"},
			{Key: "deadline", Default: "100ms", Quick: "30ms", Full: "400ms", Doc: "virtual time a cell may run; a flow not done by then is measured as far as it got"},
		},
		Setup: orderreSetup,
		Args:  Typed[orParams]{Read: readOrderRE, Run: runOrderRE, Payload: func(p orParams) uint64 { return p.bytes }},
	})
}

// orderreClusterSets is the fabric: one plane, two leaves (T0) of one
// host each, four spines (T1), 100G everywhere, ECN on, PFC off, ECMP.
func orderreClusterSets() []string {
	return []string{
		"fabric.topology=clos", "fabric.planes=1", "fabric.hostsPerT0=1", "fabric.t0PerPlane=2", "fabric.hosts=2",
		"fabric.t1PerPlane=4", "fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G",
		"fabric.queue.pfc.enabled=false", "fabric.queue.ecn.enabled=true", "fabric.forwarding=ecmp",
		"transport.qpsPerConnection=1", "transport.payload=real",
	}
}

const orderreSetup = `A 4-path leaf-spine: one plane, two leaves (T0) with one host each, four
spines (T1), 100G host and fabric links, the paper's timing (15 ns host and
150 ns fabric links, 562 ns per switch, 2236 ns NIC latencies). One flow,
host 0 → host 1, of exp.bytes in 1 MiB writes (real bytes, checked at the
end): the NIC's 100G is the bottleneck and the four spines share it, so
the only difference between paths is their delay and their loss. The scale
is the seed's: "a typical leaf-spine with 4 parallel paths" (seed 004 §4);
more hosts would add congestion the published evaluation does not
describe, and cost run time without testing anything T12/T13 name.

What makes paths differ: seed 004 §4 says OrderRE's gain comes from
retransmitting on fast paths where Random "may pick the worst path", and
§3.2.1 gives the network's largest out-of-order degree as O_MAX ≈ 0.3–0.4
BDP. The setup gives the spines fixed extra propagation delays spread
evenly up to that degree: spine s's four link directions together add
s/3 × exp.skew (0.35) base RTTs one way (0, 0.117, 0.233, 0.35 RTT), so
a packet on the slowest spine arrives ≈ 0.35 BDP behind one sent with it
on the fastest. No background traffic (the seed names none); a skew of 0
is the symmetric fabric.

Schemes: MP-RDMA (go-back-N, fixed bitmap), Random (selective
retransmission on a random path) and OrderRE (degree-based detection,
FNACK, FReTx replicated by the sender's ToR onto the receiver's fast
paths) as transport.kind mprdma | random | orderre under ECMP forwarding
with path addresses, ECN on, PFC off; IRN (transport.kind roce,
reliability irn) and single-path RoCE go-back-N (DCQCN) under ECMP, PFC
off — one flow on an uncongested path has no buffer drops for PFC to
prevent, and random link loss is not something PFC can stop, so RoCE GBN
gets exactly what it would with PFC on; MRC (spraying on uSID, its own
forwarding). All on the same topology and delays.

T13: Bernoulli loss on every spine link (both directions, data and
acknowledgements) at exp.losses; the receive bitmap of the mprdma kinds
swept over exp.bitmaps × BDP (transport.mprdma.bitmapEntries = ceil(f ×
BDP packets), BDP = 100G × the base RTT / 4096 B). IRN and MRC have no
such bitmap: their rows are their own goodput at each loss, drawn flat.
T12: loss on the links of ONE spine only (the MP-RDMA paper's lossy-path
experiment, NSDI'18 §6, as its authors describe it: one of the paths
drops at 0.5–10%; the stored corpus held only the abstract, so this is
from the paper as we know it), the spine the single-path RoCE flow's
ECMP hash takes (found by a loss-free probe of the same seed), MP-RDMA
with its default 64-entry bitmap against RoCE go-back-N.

Measured per cell: goodput (bytes over the flow's time, % of the 100G
line rate); the mprdma kinds' counters (mprdma.Stats: losses detected,
NAKs, FNACKs, selective retransmissions, FReTx, retransmission failures,
bitmap overflows, go-back-N rounds), the bitmap occupancy sampled every
exp.sample of virtual time by a loop timer, the repair records
(PollRepairs: detection → repaired hole; spurious ones, filled by their
late original, left out) and the ToRs' multicast counters; IRN's and MRC's
retransmissions and timeouts (they keep no bitmap or repair records).`

// orParams are orderre's parameters, read and checked.
type orParams struct {
	bytes     uint64
	losses    []float64
	bitmaps   []float64
	t12Losses []float64
	skew      float64
	sample    time.Duration
	deadline  time.Duration
}

func readOrderRE(env *Env) (orParams, error) {
	r := newParamReader(env)
	p := orParams{bytes: r.size("bytes"), losses: r.losses("losses"), t12Losses: r.losses("t12Losses")}
	p.bitmaps = orFractions(r, "bitmaps", 0.25, 8)
	p.skew = r.number("skew", 0, 2)
	p.sample = r.duration("sample", false)
	p.deadline = r.duration("deadline", false)
	for _, l := range append(slices.Clone(p.losses), p.t12Losses...) {
		if l == 0 {
			r.bad("losses", "0 is not a loss rate here (the checks compare recoveries); must be in (0, 1)")
			break
		}
	}
	f := env.Config.Fabric
	if f.Topology != config.TopologyClos || f.Planes != 1 || f.T0PerPlane < 2 || f.T1PerPlane < 2 {
		r.errs = append(r.errs, fmt.Errorf("orderre needs a one-plane Clos with ≥ 2 leaves and ≥ 2 spines (fabric.topology %s, planes %d, t0PerPlane %d, t1PerPlane %d)",
			f.Topology, f.Planes, f.T0PerPlane, f.T1PerPlane))
	}
	return p, r.err()
}

// orFractions reads a comma-separated list of numbers in [lo, hi], kept
// in the order given, repeats dropped.
func orFractions(r *paramReader, key string, lo, hi float64) []float64 {
	var out []float64
	for _, s := range r.list(key) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || v < lo || v > hi {
			r.bad(key, "%q is not a bitmap size; must be a number of BDPs in [%g, %g]", s, lo, hi)
			continue
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Scheme names as the report shows them.
const (
	orMPRDMA  = "MP-RDMA"
	orRandom  = "Random"
	orOrderRE = "OrderRE"
	orIRN     = "IRN"
	orMRC     = "MRC"
	orRoCE    = "RoCE GBN"
)

// orScheme is one transport of the grid and its config overrides.
type orScheme struct {
	name, kind string
	mp         bool // a package-mprdma kind: bitmap, Stats, repairs
	sets       []string
}

func orSchemes() []orScheme {
	mp := func(name, kind string) orScheme {
		return orScheme{name: name, kind: kind, mp: true, sets: []string{"transport.kind=" + kind, "fabric.forwarding=ecmp"}}
	}
	return []orScheme{
		mp(orMPRDMA, mprdma.KindMPRDMA), mp(orRandom, mprdma.KindRandom), mp(orOrderRE, mprdma.KindOrderRE),
		{name: orIRN, kind: "roce", sets: roceSets(1, "transport.roce.reliability=irn")},
		{name: orMRC, kind: "mrc", sets: mrcSets(1)},
	}
}

func orRoCEScheme() orScheme {
	return orScheme{name: orRoCE, kind: "roce", sets: roceSets(1, "transport.roce.reliability=gbn")}
}

// available reports whether this build registers the scheme's transport
// kind (the mprdma kinds come with cluster/transport_mprdma.go).
func (s orScheme) available() bool {
	_, ok := cluster.LookupTransport(s.kind)
	return ok
}

// mpQP is what the experiment reads of a package-mprdma QP.
type mpQP interface {
	MPStats() mprdma.Stats
	PollRepairs(dst []mprdma.Repair) []mprdma.Repair
}

// orCell is one measured point: a scheme at a loss rate (and bitmap size).
type orCell struct {
	part       string // "T13" or "T12"
	scheme     string
	loss       float64
	bitmapBDP  float64 // 0: the scheme's own (no sweep)
	bitmap     int     // entries (mprdma kinds)
	lossySpine int     // T12: the spine with loss; -1 every spine
	timeNs     int64
	completed  uint64
	goodput    float64 // fraction of line rate
	done       bool
	verified   bool
	qpErr      string
	req, resp  mprdma.Stats // requester's and responder's halves
	mp         bool
	qp         verbs.QPStats
	repairs    []float64 // ns, detection → repaired, spurious ones left out
	spurious   int
	rto        time.Duration // the sender's retransmission timeout
	failAfter  time.Duration // a repair slower than this failed (retxFailures)
	occ        []float64     // bitmap occupancy samples
	tor        fabric.TorMulticastCounters
	torOK      bool
}

func (c *orCell) label() string {
	s := fmt.Sprintf("%s %s, loss %s", c.part, c.scheme, pct(c.loss))
	if c.bitmapBDP > 0 {
		s += fmt.Sprintf(", bitmap %g BDP", c.bitmapBDP)
	}
	return s
}

// retxFailures is the cell's failed retransmissions: repairs slower than
// failAfter, twice the slowest path's zero-load round trip. A first
// retransmission that arrives fills its hole within one such round trip
// (the FNACK and the retransmission both on the slowest spine) plus
// queueing; twice that leaves a whole slow round trip for the queueing. A
// slower repair was not its first retransmission's (all of OrderRE's
// copies lost): the hole waited for a bitmap-overflow go-back-N, the
// sender's timeout or OrderRE's repair-clock fallback — seed 004 §4.1's
// retransmission failure. The responder's own RetxFailures counts only
// repairs past its repair clock (2 × RTO by default), which a repair
// recovered by go-back-N or the first timeout never reaches; the table
// has it, and the repairs slower than the RTO, beside this. IRN and MRC
// keep no repair records: their timeouts.
func (c *orCell) retxFailures() uint64 {
	if !c.mp {
		return c.qp.Timeouts
	}
	return orSlower(c.repairs, c.failAfter)
}

func orSlower(xs []float64, d time.Duration) uint64 {
	var n uint64
	for _, x := range xs {
		if x > float64(d) {
			n++
		}
	}
	return n
}

// orBDP is the BDP in full packets the bitmap sizes are multiples of:
// the line rate × the cluster's base RTT over a 4096-byte payload
// (mprdma.DefaultConfig's PMTU), rounded up.
func orBDP(cfg config.Config) (int, time.Duration, error) {
	c, err := cluster.NewForWorkers(cfg, 0)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	rtt := c.BaseRTT()
	bits := float64(cfg.Fabric.HostLinkBps()) * rtt.Seconds()
	return int(math.Ceil(bits / 8 / float64(mprdma.DefaultConfig().PMTU))), rtt, nil
}

// orSpineLinks are spine j's links, both directions (T0→T1 and T1→T0).
func orSpineLinks(c *cluster.Cluster, j int) []*fabric.Link {
	var ls []*fabric.Link
	for _, s := range c.Topo.Switches {
		if s.Tier != 1 || s.Index != j {
			continue
		}
		for _, p := range s.Ports {
			if p.Tx != nil {
				ls = append(ls, p.Tx)
			}
			if p.Peer != nil && p.Peer.Tx != nil {
				ls = append(ls, p.Peer.Tx)
			}
		}
	}
	return ls
}

// orSkew adds spine j's extra delay, j/(T1−1) × skew × rtt one way,
// split over the two links a packet crosses (T0→T1, T1→T0). Only ever
// added, so a partitioned run's lookahead (the smallest cut-link delay
// when built) stays a lower bound.
func orSkew(c *cluster.Cluster, skew float64, rtt time.Duration) []time.Duration {
	t1 := c.Config.Fabric.T1PerPlane
	extra := make([]time.Duration, t1)
	for j := range t1 {
		extra[j] = time.Duration(float64(j) / float64(t1-1) * skew * float64(rtt))
		for _, l := range orSpineLinks(c, j) {
			l.Delay += extra[j] / 2
		}
	}
	return extra
}

// orRun is one cell's cluster: the flow host 0 → host 1 of p.bytes with
// loss on the given spines' links, sampled until done or the deadline.
func orRun(env *Env, cfg config.Config, p orParams, rtt time.Duration, cell *orCell, lossy []int, events *uint64) error {
	c, err := env.NewCluster(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	env.Watch(c)
	extra := orSkew(c, p.skew, rtt)
	cell.failAfter = 2 * (rtt + 2*extra[len(extra)-1])
	cell.rto = c.DefaultRTO()
	if s := cfg.Transport.MPRDMA.RTO; s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			cell.rto = d
		}
	}
	for _, j := range lossy {
		for _, l := range orSpineLinks(c, j) {
			l.Loss = fabric.NewBernoulli(cell.loss, cfg.Seed, l.Name)
		}
	}
	ps, err := c.Connect(0, 1)
	if err != nil {
		return err
	}
	fill := func(b []byte) {
		r := sim.NewFastRand(cfg.Seed, "orderre/payload")
		for i := 0; i < len(b); i += 8 {
			v := r.Uint64()
			for j := i; j < min(i+8, len(b)); j++ {
				b[j], v = byte(v), v>>8
			}
		}
	}
	src, dst := c.Region(0, p.bytes, fill), c.Region(1, p.bytes, nil)
	tr, err := c.StartTransfer(ps[0], src, dst, p.bytes, min(p.bytes, 1<<20))
	if err != nil {
		return err
	}
	reqQP, _ := ps[0].A.T.(mpQP)
	respQP, _ := ps[0].B.T.(mpQP)
	cell.mp = reqQP != nil && respQP != nil
	var rep []mprdma.Repair
	poll := func() {
		if !cell.mp {
			return
		}
		rep = respQP.PollRepairs(rep[:0])
		for _, r := range rep {
			if r.Spurious {
				cell.spurious++
				continue
			}
			cell.repairs = append(cell.repairs, float64(r.RepairedAt-r.DetectedAt))
		}
	}
	sched := c.Scheduler()
	start := sched.Now()
	end := start + sim.Time(p.deadline)
	var tick func()
	tick = func() {
		if cell.mp {
			cell.occ = append(cell.occ, float64(respQP.MPStats().BitmapOccupancy))
		}
		poll()
		if next := sched.Now() + sim.Time(p.sample); !tr.Done() && next <= end {
			sched.At(next, tick)
		}
	}
	sched.At(start+sim.Time(p.sample), tick)
	c.RunWhile(func() bool { return !tr.Done() && c.Now() < end })
	*events += c.Executed()
	poll()
	cell.done = tr.Done() && len(tr.Errors) == 0
	stop := tr.End
	if !tr.Done() {
		stop = c.Now()
	}
	cell.timeNs = int64(stop - tr.Start)
	cell.completed = tr.Completed
	if cell.timeNs > 0 {
		cell.goodput = float64(tr.Completed) * 8 / (float64(cell.timeNs) / 1e9) / float64(cfg.Fabric.HostLinkBps())
	}
	if len(tr.Errors) > 0 {
		cell.qpErr = fmt.Sprintf("%d work requests in error (%v)", len(tr.Errors), tr.Errors[0].Status)
	}
	if cell.done && src.Buf != nil && dst.Buf != nil {
		cell.verified = string(src.Buf) == string(dst.Buf)
	}
	cell.qp = ps[0].A.T.Stats()
	if cell.mp {
		cell.req, cell.resp = reqQP.MPStats(), respQP.MPStats()
	}
	cell.tor, cell.torOK = c.Topo.TorMulticastCounters()
	return nil
}

// orProbeSpine is the spine a loss-free flow of cfg (one QP, the same
// seed, so the same source port and ECMP hash) takes from leaf 0: the
// uplink of T0 0 that carried the most bytes.
func orProbeSpine(env *Env, cfg config.Config, events *uint64) (int, error) {
	c, err := env.NewCluster(cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	env.Watch(c)
	trs, err := startFlow(c, 0, 1, 256<<10)
	if err != nil {
		return 0, err
	}
	c.RunWhile(func() bool { return !trs[0].Done() })
	*events += c.Executed()
	best, spine := uint64(0), -1
	for _, s := range c.Topo.Switches {
		if s.Tier != 0 || s.Index != 0 {
			continue
		}
		h := cfg.Fabric.HostsPerT0
		for j, p := range s.Ports[h:] {
			if p.Counters.TxBytes > best {
				best, spine = p.Counters.TxBytes, j
			}
		}
	}
	if spine < 0 {
		return 0, fmt.Errorf("orderre: the probe flow crossed no spine")
	}
	return spine, nil
}

// orGrid is one seed's measured grid: the cells that ran, in run order.
type orGrid struct {
	cells      []*orCell
	bdp        int
	rtt        time.Duration
	lossySpine int      // T12's spine, -1 without T12
	missing    []string // transport kinds this build does not register
	events     uint64
}

func runOrderRE(ctx context.Context, env *Env, p orParams) (*Results, error) {
	g, err := runOrGrid(ctx, env, p)
	if err != nil {
		return nil, err
	}
	res := &Results{Events: g.events, Points: len(g.cells)}
	for _, c := range g.cells {
		// A go-back-N RoCE flow that fails or does not finish under heavy
		// loss is T12's finding; anything else not done, or a wrong byte,
		// is a failed point.
		switch {
		case c.done && !c.verified:
			res.Failed = append(res.Failed, c.label()+": bytes differ at the receiver")
		case !c.done && c.scheme != orRoCE:
			res.Failed = append(res.Failed, c.label()+": "+orResult(c))
		}
	}
	orTables(res, p, g.cells, g.bdp, g.rtt, g.lossySpine, g.missing)
	res.Plots = orPlots(p, g.cells)
	res.Checks = orChecks(p, g.cells, g.missing)
	return res, nil
}

func runOrGrid(ctx context.Context, env *Env, p orParams) (*orGrid, error) {
	bdp, rtt, err := orBDP(env.Config)
	if err != nil {
		return nil, err
	}
	res := &orGrid{bdp: bdp, rtt: rtt}
	schemes := orSchemes()
	roce := orRoCEScheme()
	var missing []string
	for _, s := range schemes {
		if !s.available() {
			missing = append(missing, s.kind)
		}
	}
	every := make([]int, env.Config.Fabric.T1PerPlane)
	for j := range every {
		every[j] = j
	}
	// The grid, in run order: T13 (scheme × loss × bitmap; IRN and MRC
	// once per loss), then T12 (probe, then RoCE and MP-RDMA per loss).
	type point struct {
		cell   *orCell
		sc     orScheme
		lossy  []int
		t12    bool
		runnbl bool
	}
	var pts []point
	for _, s := range schemes {
		for _, l := range p.losses {
			if s.mp {
				for _, f := range p.bitmaps {
					pts = append(pts, point{cell: &orCell{part: "T13", scheme: s.name, loss: l, bitmapBDP: f, bitmap: int(math.Ceil(f * float64(bdp))), lossySpine: -1}, sc: s, lossy: every, runnbl: s.available()})
				}
			} else {
				pts = append(pts, point{cell: &orCell{part: "T13", scheme: s.name, loss: l, lossySpine: -1}, sc: s, lossy: every, runnbl: s.available()})
			}
		}
	}
	mpScheme := schemes[0]
	for _, l := range p.t12Losses {
		pts = append(pts, point{cell: &orCell{part: "T12", scheme: orRoCE, loss: l}, sc: roce, t12: true, runnbl: true})
		pts = append(pts, point{cell: &orCell{part: "T12", scheme: orMPRDMA, loss: l, bitmap: mprdma.DefaultConfig().BitmapEntries}, sc: mpScheme, t12: true, runnbl: mpScheme.available()})
	}
	roceCfg, err := override(env.Config, roce.sets)
	if err != nil {
		return nil, err
	}
	lossySpine := -1
	if len(p.t12Losses) > 0 {
		if lossySpine, err = orProbeSpine(env, roceCfg, &res.events); err != nil {
			return nil, err
		}
	}
	pts = slices.DeleteFunc(pts, func(pt point) bool { return !pt.runnbl })
	n := len(pts)
	for i, pt := range pts {
		if interrupted(ctx) {
			break
		}
		sets := slices.Clone(pt.sc.sets)
		if pt.sc.mp && pt.cell.bitmap > 0 {
			sets = append(sets, "transport.mprdma.bitmapEntries="+strconv.Itoa(pt.cell.bitmap))
		}
		cfg, err := override(env.Config, sets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pt.cell.label(), err)
		}
		lossy := pt.lossy
		if pt.t12 {
			lossy, pt.cell.lossySpine = []int{lossySpine}, lossySpine
		}
		env.Point(i, n, pt.cell.label())
		if err := orRun(env, cfg, p, rtt, pt.cell, lossy, &res.events); err != nil {
			return nil, fmt.Errorf("%s: %w", pt.cell.label(), err)
		}
		env.logf("orderre: %-40s goodput %5.1f%% %s\n", pt.cell.label(), 100*pt.cell.goodput, orResult(pt.cell))
		res.cells = append(res.cells, pt.cell)
	}
	res.lossySpine, res.missing = lossySpine, missing
	return res, nil
}

func orResult(c *orCell) string {
	switch {
	case c.qpErr != "":
		return "QP error: " + c.qpErr
	case !c.done:
		return fmt.Sprintf("not done by the deadline (%d of its bytes)", c.completed)
	case c.verified:
		return "bytes verified"
	}
	return "BYTES DIFFER"
}

// orMean and orMedian of xs; NaN for none.
func orMean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func orOcc(c *orCell) (mean, peak float64) {
	if len(c.occ) == 0 {
		return math.NaN(), math.NaN()
	}
	return orMean(c.occ), slicesMax(c.occ)
}

func orTables(res *Results, p orParams, cells []*orCell, bdp int, rtt time.Duration, spine int, missing []string) {
	for _, c := range cells {
		mean, peak := orOcc(c)
		bm := ""
		if c.bitmap > 0 {
			bm = strconv.Itoa(c.bitmap)
		}
		bdpCell := ""
		if c.bitmapBDP > 0 {
			bdpCell = strconv.FormatFloat(c.bitmapBDP, 'g', -1, 64)
		}
		spineCell := "every"
		if c.lossySpine >= 0 {
			spineCell = strconv.Itoa(c.lossySpine)
		}
		u := func(v uint64, ok bool) string {
			if !ok {
				return ""
			}
			return strconv.FormatUint(v, 10)
		}
		res.Row(C("part", c.part).Show("part", c.part),
			C("scheme", c.scheme).Show("scheme", c.scheme),
			C("loss", f4(c.loss)).Show("loss (%)", pctNum(c.loss)),
			C("lossy_spines", spineCell).Show("lossy spine", spineCell),
			C("bitmap_bdp", bdpCell).Show("bitmap (BDP)", bdpCell),
			C("bitmap_entries", bm).Show("bitmap (entries)", bm),
			C("time_ns", strconv.FormatInt(c.timeNs, 10)).Show("time (µs)", usCell(c.timeNs)),
			C("goodput_fraction", f4(c.goodput)).Show("goodput (% of line rate)", pctCell(c.goodput)),
			C("retransmissions", strconv.FormatUint(c.qp.Retransmissions, 10)).Show("retx", strconv.FormatUint(c.qp.Retransmissions, 10)),
			C("timeouts", strconv.FormatUint(c.qp.Timeouts, 10)).Show("timeouts", strconv.FormatUint(c.qp.Timeouts, 10)),
			C("losses_detected", u(c.resp.LossesDetected, c.mp)).Show("losses detected", u(c.resp.LossesDetected, c.mp)),
			C("naks", u(c.resp.NAKsSent, c.mp)),
			C("fnacks", u(c.resp.FNACKsSent, c.mp)),
			C("go_back_ns", u(c.req.GoBackNs, c.mp)).Show("go-back-N", u(c.req.GoBackNs, c.mp)),
			C("selective_retx", u(c.req.SelectiveRetx, c.mp)),
			C("freTx_sent", u(c.req.FReTxSent, c.mp)),
			C("retx_failures_repair_clock", u(c.resp.RetxFailures, c.mp)),
			C("repairs_past_rto", u(orSlower(c.repairs, c.rto), c.mp)),
			C("retx_failures", u(c.retxFailures(), c.mp)).Show("retx failures", u(c.retxFailures(), c.mp)),
			C("spurious_losses", u(c.resp.SpuriousLosses, c.mp)),
			C("bitmap_overflows", u(c.resp.BitmapOverflows, c.mp)).Show("overflows", u(c.resp.BitmapOverflows, c.mp)),
			C("bitmap_peak", u(uint64(c.resp.BitmapPeak), c.mp)),
			C("occupancy_mean", f4(mean)).Show("occupancy mean (entries)", orFloatCell(mean)),
			C("occupancy_peak_sampled", f4(peak)),
			C("repairs", strconv.Itoa(len(c.repairs))),
			C("repair_mean_ns", f4(orMean(c.repairs))).Show("repair mean (µs)", orUsCell(orMean(c.repairs))),
			C("repair_median_ns", f4(median(c.repairs))),
			C("tor_copies", u(c.tor.Copies, c.torOK)),
			C("tor_duplicates", u(c.tor.Duplicates, c.torOK)),
			C("result", orResult(c)).Show("result", orResult(c)))
	}
	res.Table = res.table.Text()
	var b strings.Builder
	fmt.Fprintf(&b, "BDP: %d packets of 4096 B (100G × base RTT %s). Spine extra one-way delays: ", bdp, durText(rtt))
	for j := range 4 {
		if j > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "spine %d %s", j, durText(time.Duration(float64(j)/3*p.skew*float64(rtt))))
	}
	b.WriteString(". ")
	for _, c := range cells {
		if c.mp {
			fmt.Fprintf(&b, "A repair slower than %s (twice the slowest path's zero-load round trip) counts as a retransmission failure; the sender's RTO is %s. ", durText(c.failAfter), durText(c.rto))
			break
		}
	}
	if spine >= 0 {
		fmt.Fprintf(&b, "T12's lossy spine (the RoCE flow's ECMP path): %d. ", spine)
	}
	b.WriteString("IRN and MRC keep no receive bitmap of this kind: their rows are their own goodput at each loss (flat in goodput_vs_bitmap), their \"retx failures\" in the checks are their timeouts. ")
	b.WriteString(orSummary(p, cells))
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\n\n**Not run: transport kinds %s are not registered in this build** (cluster/transport_mprdma.go); every row and check that needs them is missing or not testable.", strings.Join(missing, ", "))
	}
	res.Notes = b.String()
}

func orFloatCell(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func orUsCell(ns float64) string {
	if math.IsNaN(ns) {
		return "n/a"
	}
	return strconv.FormatFloat(ns/1e3, 'f', 2, 64)
}

// orFind is the first cell matching.
func orFind(cells []*orCell, part, scheme string, loss, bitmap float64) *orCell {
	for _, c := range cells {
		if c.part == part && c.scheme == scheme && c.loss == loss && c.bitmapBDP == bitmap {
			return c
		}
	}
	return nil
}

func orPlots(p orParams, cells []*orCell) []Plot {
	var plots []Plot
	ticks := make([]string, len(p.bitmaps))
	for i, f := range p.bitmaps {
		ticks[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	for _, l := range p.losses {
		pl := Plot{Name: "goodput_vs_bitmap_loss" + strconv.FormatFloat(100*l, 'g', -1, 64),
			Title:  fmt.Sprintf("goodput vs receive bitmap size, %s loss on every spine link (IRN, MRC: no such bitmap, drawn flat)", pct(l)),
			XLabel: "receive bitmap size (multiples of one BDP)", YLabel: "goodput (% of line rate)", XLabels: ticks}
		for _, s := range []string{orMPRDMA, orRandom, orOrderRE, orIRN, orMRC} {
			ser := Series{Name: s}
			for i, f := range p.bitmaps {
				b := f
				if s == orIRN || s == orMRC {
					b = 0
				}
				if c := orFind(cells, "T13", s, l, b); c != nil {
					ser.X, ser.Y = append(ser.X, float64(i)), append(ser.Y, 100*c.goodput)
				}
			}
			if len(ser.X) > 0 {
				pl.Series = append(pl.Series, ser)
			}
		}
		plots = append(plots, pl)
	}
	cdf := Plot{Name: "repair_time_cdf", Title: "time from loss detection to repaired hole (every bitmap size pooled)",
		XLabel: "detection → repair (µs)", YLabel: "repairs at or below (fraction)"}
	for _, s := range []string{orMPRDMA, orRandom, orOrderRE} {
		for _, l := range p.losses {
			var xs []float64
			for _, c := range cells {
				if c.part == "T13" && c.scheme == s && c.loss == l {
					xs = append(xs, c.repairs...)
				}
			}
			if len(xs) == 0 {
				continue
			}
			slices.Sort(xs)
			ser := Series{Name: fmt.Sprintf("%s, %s", s, pct(l))}
			for i, x := range xs {
				ser.X, ser.Y = append(ser.X, x/1e3), append(ser.Y, float64(i+1)/float64(len(xs)))
			}
			cdf.Series = append(cdf.Series, ser)
		}
	}
	plots = append(plots, cdf)
	if len(p.losses) > 0 && len(p.bitmaps) > 0 {
		l, f := slices.Max(p.losses), p.bitmaps[0]
		occ := Plot{Name: "bitmap_occupancy", Title: fmt.Sprintf("receive bitmap occupancy, %s loss, bitmap %g BDP", pct(l), f),
			XLabel: "time since the flow started (µs)", YLabel: "bitmap entries in use (count)"}
		dx := float64(p.sample) / 1e3
		for _, s := range []string{orMPRDMA, orRandom, orOrderRE} {
			if c := orFind(cells, "T13", s, l, f); c != nil && len(c.occ) > 0 {
				occ.Series = append(occ.Series, binned(s, c.occ, 0, dx, 2000))
			}
		}
		plots = append(plots, occ)
	}
	if len(p.t12Losses) > 0 {
		ticks := lossTicks(p.t12Losses)
		t12 := Plot{Name: "t12_goodput_vs_loss", Title: "T12: MP-RDMA vs single-path RoCE go-back-N, loss on one spine",
			XLabel: "Bernoulli loss rate on one spine's links (%)", YLabel: "goodput (% of line rate)", XLabels: ticks}
		for _, s := range []string{orMPRDMA, orRoCE} {
			ser := Series{Name: s}
			for i, l := range p.t12Losses {
				if c := orFind(cells, "T12", s, l, 0); c != nil {
					ser.X, ser.Y = append(ser.X, float64(i)), append(ser.Y, 100*c.goodput)
				}
			}
			if len(ser.X) > 0 {
				t12.Series = append(t12.Series, ser)
			}
		}
		plots = append(plots, t12)
	}
	return plots
}

// orSustainFraction is what "sustains goodput" means here: a bitmap
// sustains OrderRE's goodput when OrderRE keeps at least this share of
// what it reaches with the largest bitmap of the sweep.
const orSustainFraction = 0.9

// orMinFailures is the fewest retransmission failures of Random that can
// resolve a 90% reduction (one failure of OrderRE is 1/orMinFailures).
const orMinFailures = 10

func orChecks(p orParams, cells []*orCell, missing []string) []Check {
	const rowT13, rowT12 = "T13", "T12"
	var checks []Check
	why := ""
	if len(missing) > 0 {
		why = "transport kinds " + strings.Join(missing, ", ") + " are not registered in this build"
	}
	pool := func(scheme string, loss float64) (reps []float64, fails uint64, ok bool) {
		for _, c := range cells {
			if c.part == rowT13 && c.scheme == scheme && (loss < 0 || c.loss == loss) {
				reps = append(reps, c.repairs...)
				fails += c.retxFailures()
				ok = true
			}
		}
		return reps, fails, ok
	}
	// ≈30% faster retransmission: OrderRE's mean repair time against
	// Random's, every loss rate and bitmap size pooled.
	const claimSpeed = "retransmission ~30% faster than Random (1 − mean repair time OrderRE / Random, every loss and bitmap pooled)"
	or, _, okO := pool(orOrderRE, -1)
	rd, _, okR := pool(orRandom, -1)
	switch {
	case why != "":
		checks = append(checks, notTestable(rowT13, claimSpeed, "~30% faster retransmission", why))
	case !okO || !okR || len(or) == 0 || len(rd) == 0:
		checks = append(checks, bandCheck(rowT13, claimSpeed, "~30% faster retransmission", orSpeedBand(), math.NaN(),
			fmt.Sprintf("no repairs to compare (OrderRE %d, Random %d)", len(or), len(rd))))
	default:
		mo, mr := orMean(or), orMean(rd)
		v := 100 * (1 - mo/mr)
		checks = append(checks, bandCheck(rowT13, claimSpeed, "~30% faster retransmission", orSpeedBand(), v,
			fmt.Sprintf("mean detection → repair OrderRE %.2f µs (%d repairs) vs Random %.2f µs (%d); medians %.2f vs %.2f µs (%.0f%% faster)",
				mo/1e3, len(or), mr/1e3, len(rd), median(or)/1e3, median(rd)/1e3, 100*(1-median(or)/median(rd)))))
	}
	// >90% fewer retransmission failures at 1% loss (the largest loss of
	// the sweep), every bitmap pooled.
	hi := 0.0
	if len(p.losses) > 0 {
		hi = slices.Max(p.losses)
	}
	claimFail := fmt.Sprintf("%s loss: > 90%% fewer retransmission failures than Random (1 − failures OrderRE / Random; a failure is a repair slower than twice the slowest path's round trip; every bitmap pooled)", pct(hi))
	_, fo, _ := pool(orOrderRE, hi)
	_, fr, _ := pool(orRandom, hi)
	band := Above(90, "%", "\"more than 90%\" is a strict lower bound, published without a spread")
	switch {
	case why != "":
		checks = append(checks, notTestable(rowT13, claimFail, "> 90% fewer retransmission failures", why))
	case fr < orMinFailures:
		// 1 − 0/9 is 100%, 1 − 1/9 89%: below ten failures of Random one
		// failure of OrderRE decides the verdict, so the run cannot
		// resolve "more than 90%".
		checks = append(checks, bandCheck(rowT13, claimFail, "> 90% fewer retransmission failures", band, math.NaN(),
			fmt.Sprintf("too few to resolve 90%%: Random %d failed repairs (need ≥ %d), OrderRE %d (repair clock expired: OrderRE %d, Random %d)",
				fr, orMinFailures, fo, orClock(cells, orOrderRE, hi), orClock(cells, orRandom, hi))))
	default:
		checks = append(checks, bandCheck(rowT13, claimFail, "> 90% fewer retransmission failures", band, 100*(1-float64(fo)/float64(fr)),
			fmt.Sprintf("failed repairs OrderRE %d vs Random %d (repair clock expired: OrderRE %d, Random %d)", fo, fr, orClock(cells, orOrderRE, hi), orClock(cells, orRandom, hi))))
	}
	// ≈2× goodput at 1% loss with the smallest bitmap that sustains
	// goodput.
	claimGP := fmt.Sprintf("%s loss: ~2× Random's goodput at the smallest bitmap that sustains OrderRE's goodput (≥ %.0f%% of its goodput at the largest bitmap, and so at every larger one)", pct(hi), 100*orSustainFraction)
	gpBand := Between(1.5, 2.5, "×", "\"approximately 2×\": 2 ± a quarter, the paper's one-digit precision")
	if why != "" {
		checks = append(checks, notTestable(rowT13, claimGP, "~2× goodput", why))
	} else {
		v, detail := orSustainRatio(p, cells, hi)
		checks = append(checks, bandCheck(rowT13, claimGP, "~2× goodput", gpBand, v, detail))
	}
	// T12: MP-RDMA vs single-path RoCE at each loss of one spine.
	for _, l := range p.t12Losses {
		claim := fmt.Sprintf("%s loss on one spine: MP-RDMA's goodput 2–4× single-path RoCE's (MP-RDMA / RoCE GBN)", pct(l))
		b := Between(2, 4, "×", "the published range itself (2×–4× over 0.5–10% link loss)")
		m, r := orFind(cells, rowT12, orMPRDMA, l, 0), orFind(cells, rowT12, orRoCE, l, 0)
		switch {
		case m == nil && !orSchemes()[0].available():
			checks = append(checks, notTestable(rowT12, claim, "2–4× single-path RDMA", "transport kind mprdma is not registered in this build"))
		case m == nil || r == nil || r.goodput == 0:
			checks = append(checks, bandCheck(rowT12, claim, "2–4× single-path RDMA", b, math.NaN(), "a cell is missing or RoCE moved nothing"))
		default:
			checks = append(checks, bandCheck(rowT12, claim, "2–4× single-path RDMA", b, m.goodput/r.goodput,
				fmt.Sprintf("MP-RDMA %.1f%% vs RoCE GBN %.1f%% of line rate (%s; %s)", 100*m.goodput, 100*r.goodput, orResult(m), orResult(r))))
		}
	}
	return checks
}

func orSpeedBand() *Band {
	return Between(15, 45, "%", "\"an average of 30%\": 30 ± 15 points, half the published gain, for one number over the paper's whole evaluation")
}

// orSustainRatio finds, at loss l, the smallest bitmap of the sweep at
// which OrderRE sustains its goodput (≥ orSustainFraction of its goodput at
// the largest bitmap, and so at every larger bitmap of the sweep) and
// returns OrderRE / Random there.
func orSustainRatio(p orParams, cells []*orCell, l float64) (float64, string) {
	bs := slices.Clone(p.bitmaps)
	slices.Sort(bs)
	if len(bs) == 0 {
		return math.NaN(), "no bitmap sizes"
	}
	top := orFind(cells, "T13", orOrderRE, l, bs[len(bs)-1])
	if top == nil || top.goodput == 0 {
		return math.NaN(), "OrderRE's largest-bitmap cell is missing or moved nothing"
	}
	pick := -1
	for i := len(bs) - 1; i >= 0; i-- {
		c := orFind(cells, "T13", orOrderRE, l, bs[i])
		if c == nil || c.goodput < orSustainFraction*top.goodput {
			break
		}
		pick = i
	}
	if pick < 0 {
		return math.NaN(), "no bitmap sustains OrderRE's goodput"
	}
	o, r := orFind(cells, "T13", orOrderRE, l, bs[pick]), orFind(cells, "T13", orRandom, l, bs[pick])
	if r == nil || r.goodput == 0 {
		return math.NaN(), fmt.Sprintf("smallest sustaining bitmap %g BDP; Random's cell is missing or moved nothing", bs[pick])
	}
	return o.goodput / r.goodput, fmt.Sprintf("smallest sustaining bitmap %g BDP (%d entries): OrderRE %.1f%% vs Random %.1f%% of line rate (OrderRE at %g BDP: %.1f%%)",
		bs[pick], o.bitmap, 100*o.goodput, 100*r.goodput, bs[len(bs)-1], 100*top.goodput)
}

// orClock sums the responder's repair-clock expiries (Stats.RetxFailures)
// of scheme's T13 cells at loss l.
func orClock(cells []*orCell, scheme string, l float64) uint64 {
	var n uint64
	for _, c := range cells {
		if c.part == "T13" && c.scheme == scheme && c.loss == l {
			n += c.resp.RetxFailures
		}
	}
	return n
}

// orSummary is the T13 summary per scheme and loss, every bitmap size
// pooled: what T13's claims compare, as a markdown table.
func orSummary(p orParams, cells []*orCell) string {
	var b strings.Builder
	b.WriteString("\n\nT13 per scheme and loss, every bitmap size pooled (IRN, MRC: one cell each, no bitmap or repair records; their failures are timeouts):\n\n")
	b.WriteString("| scheme | loss (%) | cells | goodput mean (% of line rate) | occupancy mean (entries) | repairs | repair mean (µs) | repair median (µs) | failures (slower than 2 slow RTTs) | slower than the RTO | repair clock expired | FReTx sent | ToR copies |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range []string{orMPRDMA, orRandom, orOrderRE, orIRN, orMRC} {
		for _, l := range p.losses {
			var n int
			var gp, occ []float64
			var reps []float64
			var fail, slow, clock, fre, cp uint64
			for _, c := range cells {
				if c.part != "T13" || c.scheme != s || c.loss != l {
					continue
				}
				n++
				gp = append(gp, c.goodput)
				if m, _ := orOcc(c); !math.IsNaN(m) {
					occ = append(occ, m)
				}
				reps = append(reps, c.repairs...)
				fail += c.retxFailures()
				slow += orSlower(c.repairs, c.rto)
				clock += c.resp.RetxFailures
				fre += c.req.FReTxSent
				cp += c.tor.Copies
			}
			if n == 0 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %s | %s | %d | %d | %d | %d | %d |\n", s, pctNum(l), n, pctCell(orMean(gp)),
				orFloatCell(orMean(occ)), len(reps), orUsCell(orMean(reps)), orUsCell(median(reps)), fail, slow, clock, fre, cp)
		}
	}
	return b.String()
}
