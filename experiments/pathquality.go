package experiments

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/pathquality"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// pathQuality is issue #21's experiment (seed 003): on an asymmetric
// leaf-spine — one T0–T1 link degraded to a quarter of its capacity, or
// one spine's downlink carrying a persistent background elephant — a ring
// all-reduce and a permutation under plain ECMP (RoCE, per-flow hashing),
// path-quality routing (RoCE, forwarding pathquality) and MRC spraying,
// with the control plane's advertisement period swept from the seed's 1 s
// down to 100 µs against jobs of milliseconds. The control plane, the
// forwarding and the transports are other packages'; this file builds the
// cells, degrades the link and runs the elephant at the right virtual
// times, samples the links and judges the expectations.
func init() {
	Register(&Experiment{
		Name:    "path-quality",
		Title:   "path-quality routing (seed 003) vs ECMP and MRC spraying on a degraded link or a spine elephant, advertisement period 1 s → 100 µs",
		Targets: []string{"seed 003"},
		Cluster: paperCluster(pqClusterSets()...),
		Params: []Param{
			{Key: "bytes", Default: "16M", Quick: "4M", Full: "32M", Doc: "the ring all-reduce's size (nccl-tests bytes) and each permutation flow's bytes"},
			{Key: "periods", Default: "1s,100ms,10ms,1ms,100us", Quick: "1s,1ms,100us", Doc: "advertisement periods of the path-quality cells (fabric.pathQuality.advertisePeriod); the sample period is exp.sampleRatio of each"},
			{Key: "basePeriods", Default: "1s,100us", Quick: "100us", Full: "1s,100ms,10ms,1ms,100us", Doc: "advertisement periods the ECMP and MRC cells run their measuring control plane at (their forwarding ignores it; it gives their HDC records and message counts)"},
			{Key: "sampleRatio", Default: "0.5", Doc: "the sampler's period as a fraction of the advertisement period (≤ 1: a switch advertises what it has sampled)"},
			{Key: "scenarios", Default: "healthy,degraded-before,degraded-during,elephant-during", Doc: "fabric cases: healthy; the link T0 1–T1 1 at exp.capacity from the start (known at session up); the same link degraded exp.onset into the job; an elephant of exp.elephant × the link rate on T1 1 → T0 1 from exp.onset into the job"},
			{Key: "workloads", Default: "ring,permutation", Doc: "ring: a ring all-reduce over every host, ranks ordered so each ring hop crosses T1; permutation: a seeded derangement in which every flow crosses T1"},
			{Key: "capacity", Default: "0.25", Doc: "the degraded link's capacity as a fraction of its rate (both directions)"},
			{Key: "elephant", Default: "0.75", Doc: "the elephant's rate as a fraction of the link rate (0.75 leaves the link the same 25% a degraded one has, but the control plane must measure it)"},
			{Key: "onset", Default: "200us", Quick: "100us", Doc: "when, after the job starts, the mid-job degradation or elephant begins (virtual time)"},
			{Key: "sample", Default: "20us", Quick: "10us", Doc: "interval of the link-utilization samples of the plots (virtual time, a loop timer)"},
			{Key: "trials", Default: "8", Quick: "8", Full: "12", Doc: "hash draws per cell (fabric.ecmpSeed and the permutation re-drawn per trial): a cell's time is their mean, so hash luck averages out of the comparisons"},
			{Key: "deadline", Default: "100ms", Quick: "40ms", Full: "400ms", Doc: "virtual time a job may run after its start; one not done by then is a failed point"},
		},
		Setup: pqSetup,
		Args:  Typed[pqParams]{Read: readPQ, Run: runPQ},
	})
}

// pqClusterSets is the fabric: one plane, four leaves (T0) of two hosts
// each, four spines (T1), 100G everywhere, ECN on, PFC off; RoCE with one
// QP per connection, payload elided. The cells override forwarding and
// transport.
func pqClusterSets() []string {
	return []string{
		"fabric.topology=clos", "fabric.planes=1", "fabric.hostsPerT0=2", "fabric.t0PerPlane=4", "fabric.hosts=8",
		"fabric.t1PerPlane=4", "fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=100G",
		"fabric.queue.pfc.enabled=false", "fabric.queue.ecn.enabled=true", "fabric.forwarding=ecmp",
		"transport.kind=roce", "transport.qpsPerConnection=1", "transport.payload=elided",
	}
}

const pqSetup = `A 4-path leaf-spine like orderre's, wider: one plane, four leaves (T0) of
two hosts each, four spines (T1), 100G host and fabric links, the paper's
timing, ECN on, PFC off (every scheme on the same lossy fabric). Each T0
has 200G of hosts and 400G of uplinks, so the fabric can carry the
workloads at line rate around one bad link — whether it does is the
question.

Asymmetry (the link T0 1 – T1 1; the experiment acts on the built
topology at the given virtual time, the same for every scheme):
- degraded-before: both directions' rate (fabric.Link.Rate) at
  exp.capacity (25%) from time 0: the capacity is known at session up,
  so the control plane's first sample and advertisement carry it;
- degraded-during: the same, exp.onset after the job starts;
- elephant-during: from exp.onset after the job starts, a constant-rate
  stream of exp.elephant (75%) of the link rate on T1 1 → T0 1 — full
  4096-byte RoCEv2 frames in the job's own traffic class, not
  ECN-capable (it does not back off), put on T1 1's port by the
  experiment at exact intervals and addressed to a host T0 1 does not
  have, so T0 1 drops them on arrival (counted as its no-route drops,
  reported as the elephant's): the spine's downlink carries an elephant
  whose destination is outside the job. It leaves the link the same 25% a
  degraded one has, but the control plane can only see it by measuring
  utilization and queues;
- healthy: nothing.

Every cell first runs the fabric idle for two advertisement periods plus
three control delays (sessions up, first advertisements applied), then
starts the job. Workloads: a ring all-reduce of exp.bytes over the eight
hosts, ranks ordered T0 by T0 (host 0, 2, 4, 6, 1, 3, 5, 7) so every ring
hop crosses a spine; a permutation of exp.bytes per flow, a seeded
derangement in which every flow crosses a spine. Schemes: ECMP (RoCE,
one QP per connection, per-flow hashing, fabric.forwarding ecmp);
path quality (the same RoCE, fabric.forwarding pathquality: weighted
resilient hashing on the advertised path bandwidth); MRC (per-packet
spraying on uSID paths, its own forwarding). ECMP and MRC run the
control plane too, in measuring mode (fabric.pathQuality.mode on), so
their HDC records and message counts compare. The path-quality cells
sweep the advertisement period (exp.periods), the sampler at
exp.sampleRatio of it; the control plane's other settings are its
defaults (docs/pathquality.md).

Measured per cell: the job's completion time (ring: the collective's
time; permutation: the last flow's completion), the deepest queue of any
switch port (Counters.MaxQueueBytes), the HDC records and the control
plane's update messages (sent, bytes, suppressed by damping), weight
changes and buckets moved during the job (its Stats at the job's end
less at its start).`

// Scheme, scenario and workload names as the report shows them.
const (
	pqECMP = "ECMP"
	pqPQ   = "path quality"
	pqMRC  = "MRC"

	pqHealthy        = "healthy"
	pqDegradedBefore = "degraded-before"
	pqDegradedDuring = "degraded-during"
	pqElephantDuring = "elephant-during"

	pqRing = "ring"
	pqPerm = "permutation"
)

// The link the scenarios act on: between T0 pqT0 and T1 pqT1.
const pqT0, pqT1 = 1, 1

var pqScenarioNames = []string{pqHealthy, pqDegradedBefore, pqDegradedDuring, pqElephantDuring}

type pqParams struct {
	bytes              uint64
	periods, base      []time.Duration
	ratio              float64
	scenarios          []string
	workloads          []string
	capacity, elephant float64
	onset, sample      time.Duration
	deadline           time.Duration
	trials             int
	t0s, t1s           int     // the fabric's leaves and spines
	rateGbps           float64 // its fabric link rate
	controlDelay       time.Duration
}

func readPQ(env *Env) (pqParams, error) {
	r := newParamReader(env)
	p := pqParams{bytes: r.size("bytes")}
	p.periods = pqPeriods(r, "periods")
	p.base = pqPeriods(r, "basePeriods")
	p.ratio = r.number("sampleRatio", 0.001, 1)
	p.scenarios = pqChoices(r, "scenarios", pqScenarioNames...)
	p.workloads = pqChoices(r, "workloads", pqRing, pqPerm)
	p.capacity = r.number("capacity", 0.01, 0.99)
	p.elephant = r.number("elephant", 0.01, 0.99)
	p.onset = r.duration("onset", true)
	p.sample = r.duration("sample", false)
	p.deadline = r.duration("deadline", false)
	p.trials = r.integer("trials", 1, 100, "")
	f := env.Config.Fabric
	p.t0s, p.t1s, p.rateGbps = f.T0PerPlane, f.T1PerPlane, float64(f.FabricLinkBps())/1e9
	p.controlDelay = env.Config.PathQuality().WithDefaults().ControlDelay
	for _, d := range append(slices.Clone(p.periods), p.base...) {
		if s := time.Duration(float64(d) * p.ratio); s < time.Microsecond && p.ratio > 0 {
			r.bad("sampleRatio", "%g × period %s is a sample period below 1µs (the control plane's least); must be ≥ 1µs / the shortest period", p.ratio, durText(d))
			break
		}
	}
	if p.onset >= p.deadline && p.deadline > 0 {
		r.bad("onset", "%s is not before exp.deadline %s; must be < exp.deadline", durText(p.onset), durText(p.deadline))
	}
	if f.Topology != config.TopologyClos || f.Planes != 1 || f.T0PerPlane <= pqT0 || f.T1PerPlane <= pqT1 || f.HostsPerT0 < 1 || f.HostsPerT0 > 250 {
		r.errs = append(r.errs, fmt.Errorf("path-quality needs a one-plane Clos with ≥ %d leaves, ≥ %d spines and 1..250 hosts per leaf (the elephant's sink is a host index past them) (fabric.topology %s, planes %d, t0PerPlane %d, t1PerPlane %d, hostsPerT0 %d)",
			pqT0+1, pqT1+1, f.Topology, f.Planes, f.T0PerPlane, f.T1PerPlane, f.HostsPerT0))
	}
	return p, r.err()
}

// pqPeriods reads a comma-separated list of advertisement periods in
// [1µs, 10s], longest first, repeats dropped.
func pqPeriods(r *paramReader, key string) []time.Duration {
	var out []time.Duration
	for _, s := range r.list(key) {
		d, err := units.ParseDuration(s)
		if err != nil || d < time.Microsecond || d > 10*time.Second {
			r.bad(key, "%q is not an advertisement period; must be a duration in [1us, 10s]", s)
			return nil
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b time.Duration) int { return int(b - a) })
	return out
}

// pqChoices reads a comma-separated subset of allowed, in allowed's order.
func pqChoices(r *paramReader, key string, allowed ...string) []string {
	got := r.list(key)
	for _, g := range got {
		if !slices.Contains(allowed, g) {
			r.bad(key, "%q is not allowed; must be a comma-separated list of %s", g, strings.Join(allowed, ", "))
			return nil
		}
	}
	var out []string
	for _, a := range allowed {
		if slices.Contains(got, a) {
			out = append(out, a)
		}
	}
	return out
}

// pqCell is one measured point: a scheme on a scenario and workload at
// one advertisement period, over exp.trials hash draws. Its pqMeasure is
// the trials' mean (times, counts), or their maximum (queue depth);
// done only when every trial finished.
type pqCell struct {
	scheme, scenario, workload string
	period, samplePeriod       time.Duration
	onsetNs                    int64 // the mid-job event's time after the start; -1: none
	pqMeasure
	trials []pqMeasure
	reps   []*pqTrace // a representative cell's time series, per trial
	rep    *pqTrace   // the one plotted (pqPickTrial)
}

// pqMeasure is what one trial measured.
type pqMeasure struct {
	startNs, timeNs int64 // the job's start (after the warm-up) and duration
	done            bool
	err             string
	maxQueue        int
	ctl             pathquality.Stats // during the job
	ctlTotal        pathquality.Stats // the whole run
	elephantFrames  uint64
	drops           uint64 // fabric drops, the elephant's sink excluded
	// reactNs is, for a path-quality cell with a mid-job event, the time
	// from the onset to the first moment the other T0s hash at most half
	// as much toward T0 pqT0 through T1 pqT1 (pqBadShare), polled every
	// exp.sample; -1 when that did not happen within the job.
	reactNs int64
}

// aggregate sets the cell's pqMeasure from its trials.
func (c *pqCell) aggregate() {
	n := uint64(len(c.trials))
	if n == 0 {
		return
	}
	var m pqMeasure
	m.done = true
	var ctl, tot [7]uint64
	for _, t := range c.trials {
		m.timeNs += t.timeNs
		m.done = m.done && t.done
		if m.err == "" {
			m.err = t.err
		}
		m.maxQueue = max(m.maxQueue, t.maxQueue)
		m.elephantFrames += t.elephantFrames
		m.drops += t.drops
		for i, v := range pqStatsFields(t.ctl) {
			ctl[i] += v
		}
		for i, v := range pqStatsFields(t.ctlTotal) {
			tot[i] += v
		}
	}
	m.startNs = c.trials[0].startNs
	m.reactNs = -1
	if k := c.reactedTrials(); k > 0 {
		var sum int64
		for _, t := range c.trials {
			if t.reactNs >= 0 {
				sum += t.reactNs
			}
		}
		m.reactNs = sum / int64(k)
	}
	m.timeNs /= int64(n)
	m.elephantFrames /= n
	m.drops /= n
	for i := range ctl {
		ctl[i] = (ctl[i] + n/2) / n
		tot[i] = (tot[i] + n/2) / n
	}
	m.ctl, m.ctlTotal = pqStatsOf(ctl), pqStatsOf(tot)
	c.pqMeasure = m
}

// reactedTrials is how many trials saw the bad path's share fall.
func (c *pqCell) reactedTrials() int {
	n := 0
	for _, t := range c.trials {
		if t.reactNs >= 0 {
			n++
		}
	}
	return n
}

// movedTrials is how many trials moved a bucket during the job.
func (c *pqCell) movedTrials() int {
	n := 0
	for _, t := range c.trials {
		if t.ctl.BucketsMoved > 0 {
			n++
		}
	}
	return n
}

func pqStatsFields(s pathquality.Stats) [7]uint64 {
	return [7]uint64{s.Samples, s.UpdatesSent, s.UpdateBytes, s.UpdatesSuppressed, s.WeightChanges, s.BucketsMoved, s.HDCRecords}
}

func pqStatsOf(f [7]uint64) pathquality.Stats {
	return pathquality.Stats{Samples: f[0], UpdatesSent: f[1], UpdateBytes: f[2], UpdatesSuppressed: f[3], WeightChanges: f[4], BucketsMoved: f[5], HDCRecords: f[6]}
}

func (c *pqCell) label() string {
	return fmt.Sprintf("%s, %s, %s, period %s", c.scheme, c.scenario, c.workload, durText(c.period))
}

// pqTrace is a representative cell's time series: the links of T0 pqT0
// and the advertised path bandwidth toward its subnet.
type pqTrace struct {
	trial           int
	startNs, timeNs int64
	done            bool
	links           []string     // "T0 1 → T1 0", …
	util            []*[]float64 // Gb/s per exp.sample
	adverts         []Series     // per T1: path bandwidth toward subnet pqT0 over time
	files           []File
}

func runPQ(ctx context.Context, env *Env, p pqParams) (*Results, error) {
	type point struct {
		cell *pqCell
		sets []string
	}
	var pts []point
	for _, w := range p.workloads {
		for _, sc := range p.scenarios {
			add := func(scheme string, d time.Duration, sets []string) {
				cell := &pqCell{scheme: scheme, scenario: sc, workload: w, period: d, samplePeriod: time.Duration(float64(d) * p.ratio), onsetNs: -1}
				if sc == pqDegradedDuring || sc == pqElephantDuring {
					cell.onsetNs = p.onset.Nanoseconds()
				}
				s := append(slices.Clone(sets), "fabric.pathQuality.mode=on",
					"fabric.pathQuality.advertisePeriod="+d.String(), "fabric.pathQuality.samplePeriod="+cell.samplePeriod.String())
				pts = append(pts, point{cell, s})
			}
			for _, d := range p.base {
				add(pqECMP, d, roceSets(1, "fabric.forwarding=ecmp"))
			}
			for _, d := range p.periods {
				add(pqPQ, d, roceSets(1, "fabric.forwarding="+fabric.ForwardPathQualityName))
			}
			for _, d := range p.base {
				add(pqMRC, d, mrcSets(1))
			}
		}
	}
	// The representative runs whose time series are plotted: each mid-job
	// event (degradation, elephant) on the first workload at the
	// shortest period (where the control plane can react within the
	// job), every scheme; the first scenario when neither runs.
	reps := slices.DeleteFunc([]string{pqDegradedDuring, pqElephantDuring}, func(sc string) bool { return !slices.Contains(p.scenarios, sc) })
	if len(reps) == 0 {
		reps = p.scenarios[:1]
	}
	repOf := func(c *pqCell) bool {
		if c.workload != p.workloads[0] || !slices.Contains(reps, c.scenario) {
			return false
		}
		if c.scheme == pqPQ {
			return c.period == p.periods[len(p.periods)-1]
		}
		return c.period == p.base[len(p.base)-1]
	}
	res := &Results{}
	var cells []*pqCell
	for i, pt := range pts {
		if interrupted(ctx) {
			break
		}
		cfg, err := override(env.Config, pt.sets)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pt.cell.label(), err)
		}
		env.Point(i, len(pts), pt.cell.label())
		for k := range p.trials {
			if interrupted(ctx) {
				break
			}
			m, rep, err := pqRun(env, pqTrialConfig(cfg, k), p, pt.cell, repOf(pt.cell), &res.Events)
			if err != nil {
				return nil, fmt.Errorf("%s, trial %d: %w", pt.cell.label(), k, err)
			}
			pt.cell.trials = append(pt.cell.trials, m)
			if rep != nil {
				rep.trial, rep.startNs, rep.timeNs, rep.done = k, m.startNs, m.timeNs, m.done
				pt.cell.reps = append(pt.cell.reps, rep)
			}
		}
		pt.cell.aggregate()
		env.logf("path-quality: %-58s %9.1f µs %s\n", pt.cell.label(), float64(pt.cell.timeNs)/1e3, pqResult(pt.cell))
		cells = append(cells, pt.cell)
		if !pt.cell.done {
			res.Failed = append(res.Failed, pt.cell.label()+": "+pqResult(pt.cell))
		}
	}
	res.Points = len(cells)
	pqPickTrial(cells)
	pqTable(res, p, cells)
	res.Plots = pqPlots(p, cells)
	res.Checks = pqChecks(p, cells)
	for _, c := range cells {
		if c.rep != nil {
			res.Files = append(res.Files, c.rep.files...)
		}
	}
	return res, nil
}

// pqPickTrial chooses, per scenario, the trial its representative
// cells plot: the one in which the asymmetry cost ECMP most (its hash put
// traffic on the bad path), the same trial (hash draw) for every scheme;
// the first when nothing tells.
func pqPickTrial(cells []*pqCell) {
	pick := map[string]int{}
	for _, c := range cells {
		if c.scheme != pqECMP || len(c.reps) == 0 {
			continue
		}
		if _, done := pick[c.scenario]; done {
			continue
		}
		pick[c.scenario] = 0
		h := pqFind(cells, pqECMP, pqHealthy, c.workload, c.period)
		if h == nil {
			continue
		}
		worst := 0.0
		for k, t := range c.trials {
			if k < len(h.trials) && h.trials[k].timeNs > 0 {
				if r := float64(t.timeNs) / float64(h.trials[k].timeNs); r > worst {
					pick[c.scenario], worst = k, r
				}
			}
		}
	}
	for _, c := range cells {
		if k := pick[c.scenario]; k < len(c.reps) {
			c.rep = c.reps[k]
			for i := range c.rep.files {
				c.rep.files[i].Name = "representative_" + c.scenario + "_" + c.rep.files[i].Name
			}
		}
	}
}

func pqResult(c *pqCell) string {
	switch {
	case c.err != "":
		return c.err
	case !c.done:
		return "not done by the deadline"
	}
	return "done"
}

// pqLinks are the two directions of the link T0 t0 – T1 t1 of plane 0:
// up (T0 → T1) and down (T1 → T0), and the T1's port that sends down.
func pqLinks(c *cluster.Cluster, t0, t1 int) (up, down *fabric.Link, downPort *fabric.Port, err error) {
	h := c.Config.Fabric.HostsPerT0
	for _, s := range c.Topo.Switches {
		if s.Tier != 0 || s.Index != t0 || s.Plane != 0 {
			continue
		}
		if h+t1 >= len(s.Ports) {
			break
		}
		p := s.Ports[h+t1]
		if p.Tx == nil || p.Peer == nil || p.Peer.Tx == nil {
			break
		}
		return p.Tx, p.Peer.Tx, p.Peer, nil
	}
	return nil, nil, nil, fmt.Errorf("path-quality: no link T0 %d – T1 %d", t0, t1)
}

// pqDegrade sets both directions of a link to fraction of their rate.
func pqDegrade(up, down *fabric.Link, fraction float64) {
	for _, l := range []*fabric.Link{up, down} {
		l.Rate = uint64(float64(l.Rate) * fraction)
	}
}

// pqElephant is the background elephant: frames of the job's traffic
// class put on port at rate bits/s from now until stop() is true, each a
// full 4096-byte RoCEv2 payload (elided), addressed to a host index the
// receiving T0 does not have (its no-route drop is the sink). One global
// event per frame: exact spacing, on every partitioning.
type pqElephant struct {
	port   *fabric.Port
	sched  sim.Scheduler
	spec   fabric.FrameSpec
	gap    float64 // ns between frames
	next   float64
	frames uint64
}

func pqStartElephant(c *cluster.Cluster, port *fabric.Port, rate float64, dscp uint8, stop func() bool) *pqElephant {
	sub, _ := c.Topo.HostSubnet(pqT0 * c.Config.Fabric.HostsPerT0)
	spec := fabric.FrameSpec{
		Src:     fabric.HostAddr(0, sub, 255),
		Dst:     fabric.HostAddr(0, sub, 254),
		Sport:   0xe1e,
		DSCP:    dscp,
		Payload: 4096 + 12, // BTH + payload, as a RoCE data frame's UDP payload
		Stored:  4,
	}
	probe := fabric.BuildFrame(port.Pool(), spec)
	wire := probe.WireLen + port.Config().IFGBytes // with preamble and gap, as the port serializes it
	probe.Release()
	e := &pqElephant{port: port, sched: c.Scheduler(), spec: spec, gap: float64(wire*8) / rate * 1e9}
	e.next = float64(e.sched.Now())
	var tick func()
	tick = func() {
		if stop() {
			return
		}
		e.spec.Seq = uint32(e.frames)
		e.port.Enqueue(fabric.BuildFrame(e.port.Pool(), e.spec))
		e.frames++
		e.next += e.gap
		e.sched.At(sim.Time(math.Round(e.next)), tick)
	}
	e.sched.At(e.sched.Now(), tick)
	return e
}

// pqControlPlane is the cluster's control plane (every cell sets
// fabric.pathQuality.mode on).
func pqControlPlane(c *cluster.Cluster) (*pathquality.ControlPlane, error) {
	if c.PathQuality == nil {
		return nil, fmt.Errorf("path-quality: the cluster runs no control plane (fabric.pathQuality.mode %s)", c.Config.Fabric.PathQuality.Mode)
	}
	return c.PathQuality, nil
}

// pqRing is the ring's rank order: T0 by T0, so consecutive ranks (and
// the last and the first) sit under different T0s.
func pqRingOrder(c *cluster.Cluster) []int {
	h, t0s := c.Config.Fabric.HostsPerT0, c.Config.Fabric.T0PerPlane
	var order []int
	for i := range h {
		for t := range t0s {
			order = append(order, t*h+i)
		}
	}
	return order
}

// pqPermutation is a seeded derangement of the hosts in which every flow
// crosses a spine: the first of the seed's derangements (seed, seed+1, …)
// with no flow inside a T0.
func pqPermutation(c *cluster.Cluster, seed uint64) []int {
	n, h := len(c.Hosts), c.Config.Fabric.HostsPerT0
	for k := uint64(0); ; k++ {
		p := cluster.Derangement(seed+k, n)
		ok := true
		for a, b := range p {
			if a/h == b/h {
				ok = false
				break
			}
		}
		if ok {
			return p
		}
	}
}

// pqTrialConfig is cfg for trial k: another draw of the ECMP hash
// (trial 0 keeps the seed's, which moves with the seed like every
// experiment's) and, through it, of the permutation.
func pqTrialConfig(cfg config.Config, k int) config.Config {
	if k > 0 {
		cfg.Fabric.ECMPSeed = sim.Hash64(cfg.Fabric.ECMPSeed, uint64(k))
	}
	return cfg
}

// pqRun runs one trial of a cell; with rep it also returns the time
// series.
func pqRun(env *Env, cfg config.Config, p pqParams, cell *pqCell, rep bool, events *uint64) (pqMeasure, *pqTrace, error) {
	var m pqMeasure
	c, err := env.NewCluster(cfg)
	if err != nil {
		return m, nil, err
	}
	defer c.Close()
	env.Watch(c)
	cp, err := pqControlPlane(c)
	if err != nil {
		return m, nil, err
	}
	up, down, downPort, err := pqLinks(c, pqT0, pqT1)
	if err != nil {
		return m, nil, err
	}
	if cell.scenario == pqDegradedBefore {
		pqDegrade(up, down, p.capacity)
	}
	pc := cp.Config()
	warm := sim.Time(2*pc.AdvertisePeriod + 3*pc.ControlDelay)
	c.RunUntil(warm)
	sched := c.Scheduler()
	start := sched.Now()
	m.startNs = int64(start)
	end := start + sim.Time(p.deadline)
	finished := false
	var el *pqElephant
	if cell.onsetNs >= 0 {
		at := start + sim.Time(cell.onsetNs)
		switch cell.scenario {
		case pqDegradedDuring:
			sched.At(at, func() { pqDegrade(up, down, p.capacity) })
		case pqElephantDuring:
			dscp := uint8(fabric.DSCPRoCE)
			if cfg.Transport.Kind == config.TransportMRC {
				dscp = fabric.DSCPNoTrim
			}
			sched.At(at, func() {
				el = pqStartElephant(c, downPort, p.elephant*float64(cfg.Fabric.FabricLinkBps()), dscp, func() bool { return finished })
			})
		}
	}
	m.reactNs = -1
	if cell.onsetNs >= 0 && cfg.Fabric.Forwarding == fabric.ForwardPathQualityName {
		pqWatchReaction(c, start+sim.Time(cell.onsetNs), p.sample, end, &m.reactNs, func() bool { return finished })
	}
	var tr *pqTrace
	if rep {
		tr = pqSampleLinks(c, p.sample, end)
	}
	s0 := cp.Stats()
	switch cell.workload {
	case pqRing:
		err = pqRunRing(c, p, &m, end)
	case pqPerm:
		err = pqRunPerm(c, p, &m, start, end)
	}
	finished = true
	*events += c.Executed()
	if err != nil {
		m.err = err.Error()
	}
	s1 := cp.Stats()
	m.ctlTotal = s1
	m.ctl = pqStatsDiff(s1, s0)
	if el != nil {
		m.elephantFrames = el.frames
	}
	m.maxQueue, m.drops = pqFabricQueues(c)
	if tr != nil {
		if err := pqTraceControl(c, cp, tr); err != nil {
			return m, nil, err
		}
	}
	return m, tr, nil
}

// pqBadShare is how many of their weighted buckets the other T0s give the
// path through T1 pqT1 toward T0 pqT0's subnet (an unweighted group
// counts its equal share): what falls when path quality reacts to the
// link T0 pqT0 – T1 pqT1 or the elephant on it.
func pqBadShare(c *cluster.Cluster) int {
	h := c.Config.Fabric.HostsPerT0
	sub, _ := c.Topo.HostSubnet(pqT0 * h)
	n := 0
	for _, s := range c.Topo.Switches {
		if s.Tier != 0 || s.Index == pqT0 || s.Plane != 0 {
			continue
		}
		hops := s.NextHops(sub)
		m := slices.Index(hops, int32(h+pqT1))
		if m < 0 {
			continue
		}
		if _, b := s.PathWeights(sub); b != nil {
			n += b[m]
		} else {
			n += fabric.PathBuckets / len(hops)
		}
	}
	return n
}

// pqWatchReaction polls pqBadShare every interval from at until the job
// is done (or end) and sets *react to the time after at when it first
// fell to half its value at at or less: a reaction to the event, not the
// weights' churn under the job's own load (a bucket here or there). A
// quarter-rate link weighted by capacity keeps ≈ 25/325 of the buckets.
func pqWatchReaction(c *cluster.Cluster, at sim.Time, interval time.Duration, end sim.Time, react *int64, done func() bool) {
	sched := c.Scheduler()
	var base int
	var tick func()
	tick = func() {
		if done() {
			return
		}
		if sched.Now() > at && 2*pqBadShare(c) <= base {
			*react = int64(sched.Now() - at)
			return
		}
		if next := sched.Now() + sim.Time(interval); next <= end {
			sched.At(next, tick)
		}
	}
	sched.At(at, func() { base = pqBadShare(c); tick() })
}

func pqStatsDiff(a, b pathquality.Stats) pathquality.Stats {
	fa, fb := pqStatsFields(a), pqStatsFields(b)
	for i := range fa {
		fa[i] -= fb[i]
	}
	return pqStatsOf(fa)
}

// pqFabricQueues is the deepest queue of any switch port and the fabric's
// drops less the elephant's sink (no-route drops at T0 pqT0).
func pqFabricQueues(c *cluster.Cluster) (maxQ int, drops uint64) {
	_, all, _ := fabricTotals(c)
	for _, s := range c.Topo.Switches {
		for _, pt := range s.Ports {
			maxQ = max(maxQ, pt.Counters.MaxQueueBytes)
			if s.Tier == 0 && s.Index == pqT0 {
				all -= pt.Counters.Drops[fabric.DropNoRoute]
			}
		}
	}
	return maxQ, all
}

func pqRunRing(c *cluster.Cluster, p pqParams, cell *pqMeasure, end sim.Time) error {
	m, err := collectives.New(c, collectives.Options{Hosts: pqRingOrder(c)})
	if err != nil {
		return err
	}
	ring, err := collectives.Lookup(collectives.AllReduce, "ring")
	if err != nil {
		return err
	}
	r, err := m.Run(ring, p.bytes, collectives.RunOptions{Deadline: end})
	if err != nil {
		return err
	}
	if r.Check == collectives.CheckFailed {
		return fmt.Errorf("%d wrong elements", r.Wrong)
	}
	cell.timeNs, cell.done = int64(r.TimeNs), true
	return nil
}

func pqRunPerm(c *cluster.Cluster, p pqParams, cell *pqMeasure, start, end sim.Time) error {
	perm := pqPermutation(c, c.Config.Seed^c.Config.Fabric.ECMPSeed)
	var trs []*cluster.Transfer
	for a, b := range perm {
		t, err := startFlow(c, a, b, p.bytes)
		if err != nil {
			return err
		}
		trs = append(trs, t...)
	}
	c.RunWhile(func() bool { return !cluster.AllDone(trs) && c.Now() < end })
	last := start
	for _, t := range trs {
		if len(t.Errors) > 0 {
			return fmt.Errorf("%d work requests in error (%v)", len(t.Errors), t.Errors[0].Status)
		}
		last = max(last, t.End)
	}
	if !cluster.AllDone(trs) {
		cell.timeNs = int64(c.Now() - start)
		return nil
	}
	cell.timeNs, cell.done = int64(last-start), true
	return nil
}

// pqSampleLinks samples the transmit rate of T0 pqT0's uplinks and of
// the spines' downlinks into it every interval from now until until.
func pqSampleLinks(c *cluster.Cluster, interval time.Duration, until sim.Time) *pqTrace {
	tr := &pqTrace{}
	h := c.Config.Fabric.HostsPerT0
	for _, s := range c.Topo.Switches {
		if s.Tier != 0 || s.Index != pqT0 || s.Plane != 0 {
			continue
		}
		for j := range c.Config.Fabric.T1PerPlane {
			pt := s.Ports[h+j]
			tr.links = append(tr.links, fmt.Sprintf("T0 %d → T1 %d", pqT0, j))
			tr.util = append(tr.util, sampleRate(c, interval, until, 8, func() uint64 { return pt.Counters.TxBytes }))
		}
		for j := range c.Config.Fabric.T1PerPlane {
			pt := s.Ports[h+j].Peer
			tr.links = append(tr.links, fmt.Sprintf("T1 %d → T0 %d", j, pqT0))
			tr.util = append(tr.util, sampleRate(c, interval, until, 8, func() uint64 { return pt.Counters.TxBytes }))
		}
	}
	return tr
}

// pqTraceControl reads the control plane's advertisements toward T0
// pqT0's subnet by each spine (its WriteAdvertsCSV) and keeps the run's
// time series and HDC records as files.
func pqTraceControl(c *cluster.Cluster, cp *pathquality.ControlPlane, tr *pqTrace) error {
	var adv, samples, hdc bytes.Buffer
	if err := cp.WriteAdvertsCSV(&adv); err != nil {
		return err
	}
	if err := cp.WriteSamplesCSV(&samples); err != nil {
		return err
	}
	if err := cp.WriteHDCJSONL(&hdc); err != nil {
		return err
	}
	sub, _ := c.Topo.HostSubnet(pqT0 * c.Config.Fabric.HostsPerT0)
	names := map[string]int{}
	for _, s := range c.Topo.Switches {
		if s.Tier == 1 && s.Plane == 0 {
			names[s.Name] = s.Index
		}
	}
	series := make([]Series, c.Config.Fabric.T1PerPlane)
	for j := range series {
		series[j].Name = fmt.Sprintf("T1 %d", j)
	}
	rows, err := pqReadCSV(adv.Bytes())
	if err != nil {
		return fmt.Errorf("adverts: %w", err)
	}
	for _, r := range rows {
		j, ok := names[r["switch"]]
		if !ok || r["subnet"] != strconv.Itoa(sub) {
			continue
		}
		t, e1 := strconv.ParseFloat(r["time_ns"], 64)
		g, e2 := strconv.ParseFloat(r["path_gbps"], 64)
		if e1 != nil || e2 != nil {
			continue
		}
		series[j].X = append(series[j].X, t)
		series[j].Y = append(series[j].Y, g)
	}
	tr.adverts = series
	tr.files = []File{{pathquality.AdvertsFile, adv.Bytes()}, {pathquality.SamplesFile, samples.Bytes()}, {pathquality.HDCJSONFile, hdc.Bytes()}}
	return nil
}

// pqReadCSV reads a CSV with a header into one map per row.
func pqReadCSV(b []byte) ([]map[string]string, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for i, h := range head {
			if i < len(rec) {
				m[h] = rec[i]
			}
		}
		out = append(out, m)
	}
}

// pqFind is the cell of scheme on scenario and workload at period d (any
// period when d is 0: the first).
func pqFind(cells []*pqCell, scheme, scenario, workload string, d time.Duration) *pqCell {
	for _, c := range cells {
		if c.scheme == scheme && c.scenario == scenario && c.workload == workload && (d == 0 || c.period == d) {
			return c
		}
	}
	return nil
}

// pqBaseline is the ECMP (or MRC) cell a path-quality cell compares
// with: the same scenario and workload at the same period when it ran
// there, else at the nearest base period.
func pqBaseline(cells []*pqCell, scheme string, c *pqCell) *pqCell {
	var best *pqCell
	for _, b := range cells {
		if b.scheme != scheme || b.scenario != c.scenario || b.workload != c.workload {
			continue
		}
		if best == nil || math.Abs(math.Log(float64(b.period)/float64(c.period))) < math.Abs(math.Log(float64(best.period)/float64(c.period))) {
			best = b
		}
	}
	return best
}

// pqSlowdown is what the asymmetry costs c: the mean over trials of its
// completion time over the healthy fabric's in the same trial (the same
// scheme, workload, period and hash draw), so the luck of a draw that
// collides on the healthy fabric cancels; NaN without a healthy cell or
// an unfinished trial.
func pqSlowdown(cells []*pqCell, c *pqCell) float64 {
	if c == nil {
		return math.NaN()
	}
	h := pqFind(cells, c.scheme, pqHealthy, c.workload, c.period)
	if h == nil || len(h.trials) != len(c.trials) || len(c.trials) == 0 {
		return math.NaN()
	}
	var sum float64
	for k, t := range c.trials {
		if !t.done || !h.trials[k].done || h.trials[k].timeNs == 0 {
			return math.NaN()
		}
		sum += float64(t.timeNs) / float64(h.trials[k].timeNs)
	}
	return sum / float64(len(c.trials))
}

func pqRatio(a, b *pqCell) float64 {
	if a == nil || b == nil || !a.done || !b.done || b.timeNs == 0 {
		return math.NaN()
	}
	return float64(a.timeNs) / float64(b.timeNs)
}

func pqTable(res *Results, p pqParams, cells []*pqCell) {
	for _, c := range cells {
		ecmp := pqBaseline(cells, pqECMP, c)
		vsECMP, slow := pqRatio(ecmp, c), pqSlowdown(cells, c)
		u := func(v uint64) string { return strconv.FormatUint(v, 10) }
		res.Row(C("scheme", c.scheme).Show("scheme", c.scheme),
			C("scenario", c.scenario).Show("scenario", c.scenario),
			C("workload", c.workload).Show("workload", c.workload),
			C("advertise_period_ns", strconv.FormatInt(c.period.Nanoseconds(), 10)).Show("advertise (µs)", usCell(c.period.Nanoseconds())),
			C("sample_period_ns", strconv.FormatInt(c.samplePeriod.Nanoseconds(), 10)),
			C("job_start_ns", strconv.FormatInt(c.startNs, 10)),
			C("onset_ns", strconv.FormatInt(c.onsetNs, 10)),
			C("time_ns", strconv.FormatInt(c.timeNs, 10)).Show("time (µs)", usCell(c.timeNs)),
			C("trial_times_ns", pqTrialTimes(c)),
			C("reaction_ns", strconv.FormatInt(c.reactNs, 10)).Show("reaction (µs)", pqReactCell(c)),
			C("reacted_trials", strconv.Itoa(c.reactedTrials())),
			C("ecmp_over_this", f4(vsECMP)).Show("ECMP time / this (×)", pqX(vsECMP)),
			C("slowdown", f4(slow)).Show("slowdown (×)", pqX(slow)),
			C("max_queue_bytes", strconv.Itoa(c.maxQueue)).Show("max queue (KB)", strconv.FormatFloat(float64(c.maxQueue)/1e3, 'f', 1, 64)),
			C("hdc_records", u(c.ctl.HDCRecords)).Show("HDC records", u(c.ctl.HDCRecords)),
			C("updates_sent", u(c.ctl.UpdatesSent)).Show("updates", u(c.ctl.UpdatesSent)),
			C("update_bytes", u(c.ctl.UpdateBytes)),
			C("updates_suppressed", u(c.ctl.UpdatesSuppressed)).Show("damped", u(c.ctl.UpdatesSuppressed)),
			C("weight_changes", u(c.ctl.WeightChanges)),
			C("buckets_moved", u(c.ctl.BucketsMoved)).Show("buckets moved", u(c.ctl.BucketsMoved)),
			C("samples", u(c.ctl.Samples)),
			C("updates_sent_total", u(c.ctlTotal.UpdatesSent)),
			C("elephant_frames", u(c.elephantFrames)),
			C("fabric_drops", u(c.drops)).Show("drops", u(c.drops)),
			C("result", pqResult(c)).Show("result", pqResult(c)))
	}
	res.Table = res.table.Text()
	var b strings.Builder
	fmt.Fprintf(&b, "The scenarios act on the link T0 %d – T1 %d (capacity %s when degraded; elephant %s of its rate on T1 %d → T0 %d; mid-job events %s after the job starts). ",
		pqT0, pqT1, pct(p.capacity), pct(p.elephant), pqT1, pqT0, durText(p.onset))
	b.WriteString("Control-plane counts (updates, damped, buckets moved, HDC records) are the job's: the control plane's totals at the job's end less at its start, the mean over the trials (rounded); max queue is the deepest over the trials. ")
	b.WriteString("\"slowdown\" is what the asymmetry costs the cell: the mean over its trials of its time over the healthy fabric's in the same trial (same scheme, period and hash draw), so a draw that collides on the healthy fabric too cancels out; the checks compare slowdowns. ")
	b.WriteString("\"ECMP time / this\" compares with the ECMP cell of the same scenario and workload (at the same advertisement period, or the nearest one ECMP ran at: its forwarding ignores the period); above 1 is faster than ECMP.\n\n")
	b.WriteString(pqSummary(p, cells))
	res.Notes = b.String()
}

// pqReactCell is the mean reaction time of the trials that reacted, and
// how many did when not all.
func pqReactCell(c *pqCell) string {
	switch {
	case c.scheme != pqPQ || c.onsetNs < 0:
		return ""
	case c.reactNs < 0:
		return "none"
	case c.reactedTrials() < len(c.trials):
		return fmt.Sprintf("%s (%d of %d)", strconv.FormatFloat(float64(c.reactNs)/1e3, 'f', 1, 64), c.reactedTrials(), len(c.trials))
	}
	return strconv.FormatFloat(float64(c.reactNs)/1e3, 'f', 1, 64)
}

// pqTrialTimes is every trial's completion time, ';'-separated.
func pqTrialTimes(c *pqCell) string {
	var b strings.Builder
	for i, t := range c.trials {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(strconv.FormatInt(t.timeNs, 10))
	}
	return b.String()
}

func pqX(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// pqSummary is the central tables: per workload and scenario, ECMP, MRC
// and path quality at each period, as mean completion times and as
// slowdowns from the healthy fabric; then who wins where.
func pqSummary(p pqParams, cells []*pqCell) string {
	var b strings.Builder
	head := func(what string) {
		fmt.Fprintf(&b, "%s — ECMP and MRC, then path quality (PQ) at each advertisement period:\n\n| workload | scenario | ECMP | MRC |", what)
		for _, d := range p.periods {
			fmt.Fprintf(&b, " PQ %s |", durText(d))
		}
		b.WriteString("\n|---|---|---|---|" + strings.Repeat("---|", len(p.periods)) + "\n")
	}
	table := func(cell func(c *pqCell) string) {
		for _, w := range p.workloads {
			for _, sc := range p.scenarios {
				fmt.Fprintf(&b, "| %s | %s | %s | %s |", w, sc, cell(pqFind(cells, pqECMP, sc, w, 0)), cell(pqFind(cells, pqMRC, sc, w, 0)))
				for _, d := range p.periods {
					fmt.Fprintf(&b, " %s |", cell(pqFind(cells, pqPQ, sc, w, d)))
				}
				b.WriteString("\n")
			}
		}
		b.WriteString("\n")
	}
	head("Mean completion time (µs) over the trials")
	table(func(c *pqCell) string {
		if c == nil || !c.done {
			return "n/a"
		}
		return usCell(c.timeNs)
	})
	if slices.Contains(p.scenarios, pqHealthy) {
		head("Slowdown from the asymmetry (×: mean over trials of the time over the healthy fabric's in the same trial)")
		table(func(c *pqCell) string { return pqX(pqSlowdown(cells, c)) })
	}
	b.WriteString("Path quality's reaction to a mid-job event (µs from the onset until the other T0s hash at most half as much onto the bad path as at the onset, mean over the trials that did so within the job; \"none\": no trial did):\n\n| workload | scenario |")
	for _, d := range p.periods {
		fmt.Fprintf(&b, " PQ %s |", durText(d))
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---|", len(p.periods)) + "\n")
	for _, w := range p.workloads {
		for _, sc := range p.scenarios {
			if sc != pqDegradedDuring && sc != pqElephantDuring {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s |", w, sc)
			for _, d := range p.periods {
				r := "n/a"
				if c := pqFind(cells, pqPQ, sc, w, d); c != nil {
					r = pqReactCell(c)
				}
				fmt.Fprintf(&b, " %s |", r)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nWhere each wins (mean completion time; path quality at its best period):\n\n")
	for _, w := range p.workloads {
		for _, sc := range p.scenarios {
			e, m := pqFind(cells, pqECMP, sc, w, 0), pqFind(cells, pqMRC, sc, w, 0)
			var best *pqCell
			for _, d := range p.periods {
				if c := pqFind(cells, pqPQ, sc, w, d); c != nil && c.done && (best == nil || c.timeNs < best.timeNs) {
					best = c
				}
			}
			win := "none finished"
			if c := pqFindWinner(e, best, m); c != nil {
				win = c.scheme
			}
			fmt.Fprintf(&b, "- %s, %s: fastest %s.", w, sc, win)
			if e != nil && best != nil && e.done && best.done {
				fmt.Fprintf(&b, " Path quality is fastest at period %s (%s µs, %s× ECMP's speed); ECMP %s µs", durText(best.period), usCell(best.timeNs), pqX(float64(e.timeNs)/float64(best.timeNs)), usCell(e.timeNs))
				if m != nil && m.done {
					fmt.Fprintf(&b, ", MRC %s µs", usCell(m.timeNs))
				}
				b.WriteString(".")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// pqFindWinner is the fastest finished cell of cs.
func pqFindWinner(cs ...*pqCell) *pqCell {
	var w *pqCell
	for _, c := range cs {
		if c != nil && c.done && (w == nil || c.timeNs < w.timeNs) {
			w = c
		}
	}
	return w
}

func pqPlots(p pqParams, cells []*pqCell) []Plot {
	var plots []Plot
	dx := float64(p.sample) / 1e3
	for _, c := range cells {
		if c.rep == nil {
			continue
		}
		var marks []Mark
		if c.onsetNs >= 0 {
			what := "link degraded"
			if c.scenario == pqElephantDuring {
				what = "elephant starts"
			}
			marks = append(marks, Mark{X: float64(c.onsetNs) / 1e3, Label: what})
		}
		if c.rep.done {
			marks = append(marks, Mark{X: float64(c.rep.timeNs) / 1e3, Label: "job done"})
		}
		sortMarks(marks)
		stem := map[string]string{pqECMP: "ecmp", pqPQ: "pathquality", pqMRC: "mrc"}[c.scheme]
		pl := Plot{Name: "link_utilization_" + stem + "_" + c.scenario,
			Title:  fmt.Sprintf("%s, %s, %s, trial %d: utilization of T0 %d's uplinks and of the spines' downlinks into it (advertisement period %s)", c.scheme, c.workload, c.scenario, c.rep.trial, pqT0, durText(c.period)),
			XLabel: "virtual time since the job started (µs)", YLabel: "link utilization (% of the link's nominal rate)", Marks: marks}
		for i, g := range c.rep.util {
			ys := make([]float64, len(*g))
			for k, v := range *g {
				ys[k] = 100 * v / p.rateGbps
			}
			pl.Series = append(pl.Series, binned(c.rep.links[i], ys, 0, dx, 400))
		}
		plots = append(plots, pl)
		if c.scheme == pqPQ {
			ad := Plot{Name: "advertised_bandwidth_" + c.scenario,
				Title:  fmt.Sprintf("path quality, %s, %s, trial %d: path bandwidth each spine advertises toward T0 %d's subnet (period %s; every decision, sent or damped)", c.workload, c.scenario, c.rep.trial, pqT0, durText(c.period)),
				XLabel: "virtual time since the job started (µs)", YLabel: "advertised path bandwidth (Gb/s)", Marks: marks}
			lo, hi := -2*float64(c.period.Nanoseconds()), float64(c.rep.timeNs)
			for _, s := range c.rep.adverts {
				out := Series{Name: s.Name}
				for k := range s.X {
					x := s.X[k] - float64(c.rep.startNs)
					if x >= lo && x <= hi+float64(c.period.Nanoseconds()) {
						out.X, out.Y = append(out.X, x/1e3), append(out.Y, s.Y[k])
					}
				}
				ad.Series = append(ad.Series, out)
			}
			plots = append(plots, ad)
		}
	}
	for _, w := range p.workloads {
		for _, sc := range p.scenarios {
			pl := Plot{Name: "completion_vs_period_" + w + "_" + sc,
				Title:  fmt.Sprintf("%s, %s: completion time vs advertisement period (ECMP and MRC: their forwarding ignores it, drawn flat at their mean)", w, sc),
				XLabel: "advertisement period (µs)", YLabel: "job completion time (µs)", LogX: true}
			lo, hi := float64(p.periods[len(p.periods)-1].Nanoseconds())/1e3, float64(p.periods[0].Nanoseconds())/1e3
			for _, s := range []string{pqECMP, pqMRC} {
				var ts []float64
				for _, c := range cells {
					if c.scheme == s && c.scenario == sc && c.workload == w && c.done {
						ts = append(ts, float64(c.timeNs)/1e3)
					}
				}
				if len(ts) > 0 {
					m := orMean(ts)
					pl.Series = append(pl.Series, Series{Name: s, X: []float64{lo, hi}, Y: []float64{m, m}})
					if s == pqECMP {
						pl.Marks = append(pl.Marks, Mark{X: m, Label: "ECMP job duration"})
					}
				}
			}
			ser := Series{Name: pqPQ}
			for i := len(p.periods) - 1; i >= 0; i-- {
				if c := pqFind(cells, pqPQ, sc, w, p.periods[i]); c != nil && c.done {
					ser.X, ser.Y = append(ser.X, float64(p.periods[i].Nanoseconds())/1e3), append(ser.Y, float64(c.timeNs)/1e3)
				}
			}
			pl.Series = append(pl.Series, ser)
			plots = append(plots, pl)
		}
	}
	return plots
}

// pqMinGain is "beats ECMP": ECMP's slowdown from the asymmetry at
// least this many times path quality's. A flow hashed onto the
// quarter-rate path runs ≈ 4× slower and holds the job back; ECMP hashes
// each flow crossing the link's T0 there with probability 1/4, weights in
// proportion to capacity with 25/325 ≈ 8%: for the ring's four flows
// through T0 1 the expected slowdowns are ≈ 1 + 3 × (1 − 0.75⁴) ≈ 3.1 and
// ≈ 1 + 3 × (1 − 0.92⁴) ≈ 1.8 (once reacted: about 1). 10% is a margin
// above the trials' noise, far below the expected gap.
const pqMinGain = 1.1

func pqGainBand() *Band {
	return AtLeast(pqMinGain, "×", "a flow on the quarter-rate path runs ≈ 4× slower; ECMP puts each crossing flow there with probability 1/4, capacity-proportional weights with ≈ 8% (expected slowdowns ≈ 3.1 vs ≈ 1.8 for the ring): 10% above the trials' noise")
}

// pqNoiseBand is "equals ECMP" when neither reacts during the job. The
// comparison is paired: at equal weights path quality's bucket table
// gives every flow ECMP's next hop (fabric.SetPathWeights interleaves a
// new table: bucket b is member b mod n, and h mod 256 mod n = h mod n
// for n a power of two), so the same draw forwards identically until a
// weight changes; 5% leaves room for a change that moves a few buckets
// without effect, not for a different draw.
func pqNoiseBand() *Band {
	return Between(0.95, 1.05, "×", "paired: at equal weights path quality's table gives every flow ECMP's next hop, so the same draw forwards identically until a weight changes; ±5%")
}

func pqChecks(p pqParams, cells []*pqCell) []Check {
	const row = "seed 003"
	var checks []Check
	long, short := p.periods[0], p.periods[len(p.periods)-1]
	has := func(sc string) bool { return slices.Contains(p.scenarios, sc) }
	pair := func(sc, w string, d time.Duration) (pq, e *pqCell) {
		pq = pqFind(cells, pqPQ, sc, w, d)
		if pq != nil {
			e = pqBaseline(cells, pqECMP, pq)
		}
		return pq, e
	}
	gain := func(sc, w string, d time.Duration, claim string) {
		c, e := pair(sc, w, d)
		if c == nil || !has(pqHealthy) {
			return
		}
		checks = append(checks, bandCheck(row, claim, "path quality slowed less than ECMP", pqGainBand(), pqSlowdown(cells, e)/pqSlowdown(cells, c), pqDetail(cells, c, e)))
	}
	still := func(sc, w string, d time.Duration, claim string) {
		c, e := pair(sc, w, d)
		if c == nil {
			return
		}
		checks = append(checks, holdsCheck(row, claim, "no bucket moves within the job",
			"the first advertisement after the onset comes a period later, after the job: nothing within the job can react",
			c.done && c.movedTrials() == 0, fmt.Sprintf("buckets moved within the job in %d of %d trials (mean %d, %d updates); %s", c.movedTrials(), len(c.trials), c.ctl.BucketsMoved, c.ctl.UpdatesSent, pqDetail(cells, c, e))))
	}
	react := func(sc, w string) {
		c := pqFind(cells, pqPQ, sc, w, short)
		if c == nil {
			return
		}
		bound := c.samplePeriod + c.period + 2*p.controlDelay + p.sample
		v := math.Inf(1)
		if c.reactedTrials() == len(c.trials) && c.reactNs >= 0 {
			v = float64(c.reactNs) / 1e3
		}
		b := AtMost(float64(bound.Nanoseconds())/1e3, "µs", fmt.Sprintf("the next sample sees it (≤ %s), the next advertisement carries it (≤ %s), an update reaches the other T0s in one control delay (%s; two allowed), polled every %s",
			durText(c.samplePeriod), durText(c.period), durText(p.controlDelay), durText(p.sample)))
		checks = append(checks, bandCheck(row, fmt.Sprintf("%s, %s, period %s: the other T0s halve their share of the bad path within one sample, one advertisement and two control delays of the onset (mean reaction, every trial)", w, sc, durText(short)),
			"reacts within sample + advertise + control delay", b, v, fmt.Sprintf("reacted in %d of %d trials, mean %s µs after the onset", c.reactedTrials(), len(c.trials), usCell(c.reactNs))))
	}
	longJob := func(sc, w string) bool {
		c := pqFind(cells, pqPQ, sc, w, long)
		return c != nil && c.done && long > 10*time.Duration(c.timeNs)
	}
	for _, w := range p.workloads {
		if has(pqDegradedBefore) {
			gain(pqDegradedBefore, w, long, fmt.Sprintf("%s, link degraded before the job, period %s (the seed's): path quality beats ECMP (ECMP's slowdown / path quality's) — the capacity is in the first advertisement", w, durText(long)))
			if short != long {
				gain(pqDegradedBefore, w, short, fmt.Sprintf("%s, link degraded before the job, period %s: path quality beats ECMP (ECMP's slowdown / path quality's) while it also measures the job's own load", w, durText(short)))
			}
		}
		if has(pqDegradedDuring) {
			gain(pqDegradedDuring, w, short, fmt.Sprintf("%s, link degraded %s into the job, period %s ≪ job: path quality beats ECMP (ECMP's slowdown / path quality's) — it measures and reacts within the job", w, durText(p.onset), durText(short)))
			react(pqDegradedDuring, w)
			if longJob(pqDegradedDuring, w) {
				still(pqDegradedDuring, w, long, fmt.Sprintf("%s, link degraded %s into the job, period %s ≫ job: path quality does not react within the job", w, durText(p.onset), durText(long)))
				if c, e := pair(pqDegradedDuring, w, long); has(pqHealthy) {
					checks = append(checks, bandCheck(row, fmt.Sprintf("%s, link degraded %s into the job, period %s ≫ job: path quality equals ECMP (path quality's slowdown / ECMP's, paired draws)", w, durText(p.onset), durText(long)),
						"equal to ECMP", pqNoiseBand(), pqSlowdown(cells, c)/pqSlowdown(cells, e), pqDetail(cells, c, e)))
				}
			}
		}
		if has(pqElephantDuring) {
			gain(pqElephantDuring, w, short, fmt.Sprintf("%s, elephant on T1 %d → T0 %d from %s into the job, period %s ≪ job: path quality beats ECMP (ECMP's slowdown / path quality's) — only measured utilization shows it", w, pqT1, pqT0, durText(p.onset), durText(short)))
			react(pqElephantDuring, w)
			if longJob(pqElephantDuring, w) {
				still(pqElephantDuring, w, long, fmt.Sprintf("%s, elephant from %s into the job, period %s ≫ job: path quality does not react within the job", w, durText(p.onset), durText(long)))
			}
		}
		if has(pqDegradedBefore) && has(pqHealthy) {
			if m := pqFind(cells, pqMRC, pqDegradedBefore, w, 0); m != nil {
				b := AtMost(1.5, "×", "without adapting, the two flows leaving T0 1 would each put a quarter of their packets on the 25G link (50G offered): 2× slower; adapting perfectly, 200G fits T0 1's 325G of uplinks: 1×; 1.5× is halfway")
				checks = append(checks, bandCheck(row, fmt.Sprintf("%s, link degraded before the job: MRC's spraying adapts by itself (MRC's slowdown)", w), "MRC steers off the slow path", b, pqSlowdown(cells, m),
					fmt.Sprintf("MRC %s µs degraded (%s)", usCell(m.timeNs), pqResult(m))))
			}
		}
	}
	// Control messages: a switch sends at most one update per neighbour
	// and subnet per period, so a job of T sees at most (T/period + 1)
	// rounds of them.
	var worst *pqCell
	worstR := 0.0
	sessions := pqSessions(p)
	rounds := func(c *pqCell) float64 { return math.Floor(float64(c.timeNs)/float64(c.period.Nanoseconds())) + 1 }
	for _, c := range cells {
		if c.scheme != pqPQ || !c.done {
			continue
		}
		if r := float64(c.ctl.UpdatesSent) / (float64(sessions) * rounds(c)); worst == nil || r > worstR {
			worst, worstR = c, r
		}
	}
	if worst != nil {
		checks = append(checks, holdsCheck(row, "control messages: every path-quality cell sends at most one update per neighbour, subnet and period during its job", "≤ sessions × (job / period + 1) updates",
			"each switch advertises once per period, to each neighbour, per subnet whose value changed beyond damping",
			worstR <= 1, fmt.Sprintf("highest: %s, %d updates (mean per trial) for %d sessions × %.0f rounds (%.2f of the bound)", worst.label(), worst.ctl.UpdatesSent, sessions, rounds(worst), worstR)))
	}
	return checks
}

// pqSessions is the (switch, neighbour, subnet) advertisement sessions of
// the fabric: every T0–T1 link, both ends, for every subnet.
func pqSessions(p pqParams) int {
	return 2 * p.t0s * p.t1s * p.t0s
}

func pqDetail(cells []*pqCell, c, e *pqCell) string {
	if e == nil {
		return fmt.Sprintf("path quality %s µs (%s); no ECMP cell", usCell(c.timeNs), pqResult(c))
	}
	return fmt.Sprintf("slowdown path quality %s× (mean %s µs, %s, %d buckets moved, %d updates) vs ECMP %s× (mean %s µs, %s), %d trials",
		pqX(pqSlowdown(cells, c)), usCell(c.timeNs), pqResult(c), c.ctl.BucketsMoved, c.ctl.UpdatesSent, pqX(pqSlowdown(cells, e)), usCell(e.timeNs), pqResult(e), len(c.trials))
}
