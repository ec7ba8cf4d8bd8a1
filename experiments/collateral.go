package experiments

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/sim"
)

func init() { Register(collateral{}) }

// plotPoints bounds the points of a time-series plot line (samples are
// averaged in bins); results.csv keeps the unbinned summaries.
const plotPoints = 300

// collateral is TARGETS T5: on cluster D (one 400G plane) a cross-T1 7:1
// incast into one host and a victim flow into another host of the same
// T0, whose traffic shares the T1→T0 downlinks with the incast. MRC
// (spraying, trimming, NSCC, no PFC) against RoCE with PFC and DCQCN (1
// and 8 QPs per flow) and RoCE with PFC alone; the victim's throughput over
// time.
type collateral struct{}

func (collateral) Name() string { return "collateral" }
func (collateral) Title() string {
	return "cross-T1 7:1 incast next to a victim flow: MRC vs RoCE+DCQCN (1, 8 QPs) vs PFC alone"
}

// SerialReason implements Partitionable: collateral runs partitioned (the
// event that starts the incast on every sender and the victim's sampler
// are global events between windows, cluster.Scheduler).
func (collateral) SerialReason() string { return "" }

func (collateral) TargetRows() []string { return []string{"T5"} }
func (collateral) ClusterSets() []string {
	return []string{"fabric.preset=D"}
}
func (collateral) Params() []Param {
	return []Param{
		{Key: "senders", Default: "7", Doc: "N of the N:1 incast; senders are taken round-robin from the other racks"},
		{Key: "each", Default: "256M", Quick: "64M", Full: "1G", Doc: "bytes each incast sender writes (the incast lasts ≥ senders × each at line rate: quick ≈ 9 ms)"},
		{Key: "incastAt", Default: "200us", Doc: "virtual time the incast starts (the victim starts at 0)"},
		{Key: "tail", Default: "1ms", Quick: "500us", Full: "5ms", Doc: "how long the run goes on after the last incast transfer completed"},
		{Key: "interval", Default: "20us", Quick: "10us", Full: "100us", Doc: "victim throughput sampling interval (bytes into the victim's NIC)"},
		{Key: "deadline", Default: "200ms", Quick: "100ms", Full: "1s", Doc: "virtual-time cap: an incast not done by then is reported as stalled"},
	}
}
func (collateral) Describe() string {
	return `Cluster D: one 400G plane, 4 racks (T0) × 4 hosts, 4 T1. Host 0 (X) is
the incast target: exp.senders hosts of the other racks (round-robin over
racks 1–3: 4, 8, 12, 5, 9, 13, 6 for 7) each write exp.each bytes to X,
starting at exp.incastAt. The victim flow runs from 0 to the end, from the
next host in that order (10 for 7 senders) into host 1 (Y), on X's T0: it
crosses T1 and shares the T1→T0 downlinks and their queues with the
incast, but not X's last-hop port. Every flow is one RDMA write stream of
the cell's transport, payload elided. Cells: MRC (uSID, per-packet
spraying, trimming, NSCC, PFC off, last-hop ECN off); RoCE + DCQCN (HPCC
ns-3 preset, go-back-N, ECMP, PFC on, ECN on every switch port including
the last hop with the config's fabric.queue.ecn.preset, by default auto:
dcqcn-sigcomm15 for RoCE, Kmin 5 KB / Kmax 200 KB / Pmax 1%, and htsim's
0.2–0.8 BDP for MRC) with 1
and with 8 QPs per flow (a flow's bytes split evenly over its QPs);
RoCE with PFC alone (the same fabric, transport.roce.cc=none: marks are
ignored). Victim throughput = bytes arriving at Y's NIC per exp.interval
(retransmissions included). "during" is the mean over the incast, from
exp.incastAt to the last incast completion; "before" the mean over the
second half of [0, exp.incastAt]; "worst" the lowest sample during the
incast. The published samples are 1 s long; here they are microseconds,
so dips are deeper and shorter.`
}

type coCell struct {
	name  string
	short string
	sets  []string

	victim                []float64 // Gb/s per interval
	before, during, after float64   // fractions of line rate
	worst                 float64
	incastFrac            float64 // incast bytes over its duration, of line rate
	incastEnd             sim.Time
	stalled               bool
	pauses, drops, trims  uint64
}

// coSources returns the incast senders and the victim source: hosts of the
// racks other than host 0's, round-robin over the racks.
func coSources(hostsPerT0, hosts, n int) (senders []int, victimSrc int, err error) {
	order := coOrder(hostsPerT0, hosts)
	if n < 1 || n+1 > len(order) {
		return nil, 0, fmt.Errorf("exp.senders: want 1..%d on this fabric, got %d", len(order)-1, n)
	}
	return order[:n], order[n], nil
}

// coParams are collateral's parameters, read and checked.
type coParams struct {
	each                               uint64
	incastAt, tail, interval, deadline time.Duration
	senders                            []int
	vsrc                               int
}

// params reads collateral's parameters and checks the fabric can host the
// incast.
func (collateral) params(env *Env) (coParams, error) {
	r := newParamReader(env)
	fc := env.Config.Fabric
	var p coParams
	p.each = r.size("each")
	durs := r.durations("incastAt", "tail", "interval", "deadline")
	p.incastAt, p.tail, p.interval, p.deadline = durs[0], durs[1], durs[2], durs[3]
	if fc.HostsPerT0 < 2 || fc.Hosts <= fc.HostsPerT0 {
		r.errs = append(r.errs, fmt.Errorf("collateral needs a Clos with ≥ 2 hosts per T0 and ≥ 2 T0s (fabric.hostsPerT0 = %d, fabric.hosts = %d)", fc.HostsPerT0, fc.Hosts))
		return p, r.err()
	}
	maxSenders := len(coOrder(fc.HostsPerT0, fc.Hosts)) - 1
	n := r.integer("senders", 1, maxSenders, "senders from the other racks, one host left for the victim's source")
	if err := r.err(); err != nil {
		return p, err
	}
	var err error
	p.senders, p.vsrc, err = coSources(fc.HostsPerT0, fc.Hosts, n)
	return p, err
}

// CheckParams implements ParamChecker.
func (x collateral) CheckParams(env *Env) error {
	_, err := x.params(env)
	return err
}

func (x collateral) Run(ctx context.Context, env *Env) (*Results, error) {
	p, err := x.params(env)
	if err != nil {
		return nil, err
	}
	n, each, senders, vsrc := len(p.senders), p.each, p.senders, p.vsrc
	incastAt, tail, interval, deadline := p.incastAt, p.tail, p.interval, p.deadline
	const X, Y = 0, 1
	roce := []string{"transport.kind=roce", "fabric.forwarding=ecmp", "fabric.queue.pfc.enabled=true", "fabric.queue.ecn.enabled=true", "fabric.queue.ecn.lastHop=true"}
	cells := []*coCell{
		{name: "MRC, 1 QP", short: "mrc", sets: mrcSets(1, "fabric.queue.pfc.enabled=false", "fabric.queue.ecn.lastHop=false", "transport.mrc.nscc=true", "fabric.queue.trim.enabled=true")},
		{name: "RoCE+DCQCN, 1 QP", short: "dcqcn1", sets: append(append([]string{}, roce...), "transport.roce.cc=dcqcn_hpcc", "transport.qpsPerConnection=1")},
		{name: "RoCE+DCQCN, 8 QPs", short: "dcqcn8", sets: append(append([]string{}, roce...), "transport.roce.cc=dcqcn_hpcc", "transport.qpsPerConnection=8")},
		{name: "RoCE, PFC only", short: "pfc", sets: append(append([]string{}, roce...), "transport.roce.cc=none", "transport.qpsPerConnection=1")},
	}
	line := float64(env.Config.Fabric.HostLinkBps())
	var events uint64
	var ecn []string // the resolved marking of each cell
	for i, cell := range cells {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		env.Point(i, len(cells), cell.name)
		cfg, err := override(env.Config, append(cell.sets, "transport.payload=elided"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cell.name, err)
		}
		c, err := env.NewCluster(cfg)
		if err != nil {
			return nil, err
		}
		env.Watch(c)
		ecn = append(ecn, cell.short+": "+c.ECNSummary())
		// The victim never runs out of bytes before the deadline.
		vbytes := uint64(line/8*deadline.Seconds()) &^ (1<<20 - 1)
		if _, err := startFlow(c, vsrc, Y, vbytes); err != nil {
			c.Close()
			return nil, err
		}
		var incast []*cluster.Transfer
		var ferr error
		c.Scheduler().At(sim.Time(incastAt), func() {
			for _, s := range senders {
				trs, err := startFlow(c, s, X, each)
				if err != nil {
					ferr = err
					return
				}
				incast = append(incast, trs...)
			}
		})
		rx := sampleRx(c, Y, interval, sim.Time(deadline))
		done := func() bool {
			if len(incast) == 0 {
				return false
			}
			for _, t := range incast {
				if !t.Done() {
					return false
				}
			}
			return true
		}
		c.RunWhile(func() bool { return ferr == nil && !done() && c.Now() < sim.Time(deadline) })
		if ferr != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", cell.name, ferr)
		}
		cell.stalled = !done()
		for _, t := range incast {
			if len(t.Errors) > 0 {
				c.Close()
				return nil, fmt.Errorf("%s: incast transfer %d→%d: %d work requests in error", cell.name, t.Pair.A.Host, t.Pair.B.Host, len(t.Errors))
			}
			cell.incastEnd = max(cell.incastEnd, t.End)
		}
		if cell.stalled {
			cell.incastEnd = c.Now()
		} else {
			c.RunUntil(min(c.Now()+sim.Time(tail), sim.Time(deadline)))
		}
		cell.victim = *rx
		cell.pauses, cell.drops, cell.trims = fabricTotals(c)
		now := c.Now()
		events += c.Executed()
		c.Close()
		lineG := line / 1e9
		cell.before = meanRate(cell.victim, interval, sim.Time(incastAt/2), sim.Time(incastAt)) / lineG
		cell.during = meanRate(cell.victim, interval, sim.Time(incastAt), cell.incastEnd) / lineG
		cell.after = meanRate(cell.victim, interval, cell.incastEnd, now) / lineG
		cell.worst = minRate(cell.victim, interval, sim.Time(incastAt), cell.incastEnd) / lineG
		if d := cell.incastEnd - sim.Time(incastAt); d > 0 {
			cell.incastFrac = float64(uint64(n)*each) * 8 / (float64(d) / 1e9) / line
		}
		env.logf("collateral: %s: victim before %.1f%%, during %.1f%% (worst %.1f%%), incast %.1f%% of line rate, %d PAUSE\n",
			cell.name, 100*cell.before, 100*cell.during, 100*cell.worst, 100*cell.incastFrac, cell.pauses)
	}
	res := x.report(cells, n, each, incastAt, interval, senders, vsrc, line)
	res.Notes += "\n\nECN as resolved per port (fabric.queue.ecn.preset): " + strings.Join(ecn, "; ") + "."
	res.Events = events
	return res, nil
}

func (collateral) report(cells []*coCell, n int, each uint64, incastAt, interval time.Duration, senders []int, vsrc int, line float64) *Results {
	res := &Results{Columns: []string{"transport", "senders", "bytes_each", "incast_start_ns", "incast_end_ns", "incast_stalled", "incast_fraction_of_line",
		"victim_before_fraction_of_line", "victim_during_fraction_of_line", "victim_worst_sample_fraction_of_line", "victim_after_fraction_of_line", "pause_frames", "drops", "trims"}}
	var samples int
	for _, c := range cells {
		samples = max(samples, len(c.victim))
	}
	bin := time.Duration(max(1, (samples+plotPoints-1)/plotPoints)) * interval
	tp := Plot{Name: "victim_throughput", Title: fmt.Sprintf("victim %d → 1 next to a %d:1 incast into 0 (%s each, from %s; mean per %s)", vsrc, n, collectives.FormatBytes(each), durText(incastAt), durText(bin)),
		XLabel: "virtual time (µs)", YLabel: "victim throughput into its NIC (Gb/s)",
		Marks: []Mark{{X: float64(incastAt.Nanoseconds()) / 1e3, Label: "incast starts"}}}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "transport\tvictim before (%% of line)\tduring incast (%% of line)\tworst %s sample (%% of line)\tafter (%% of line)\tincast duration (µs)\tincast rate (%% of line)\tPAUSE frames\tdrops\ttrims\n", durText(interval))
	res.Points = len(cells)
	for _, c := range cells {
		stall, end := "", "incast done"
		if c.stalled {
			stall, end = " (stalled)", "incast stalled"
			res.Failed = append(res.Failed, fmt.Sprintf("%s (incast stalled: not done by exp.deadline)", c.name))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.0f%s\t%s\t%d\t%d\t%d\n", c.name, pctCell(c.before), pctCell(c.during), pctCell(c.worst), pctCell(c.after),
			float64(c.incastEnd-sim.Time(incastAt))/1e3, stall, pctCell(c.incastFrac), c.pauses, c.drops, c.trims)
		tp.Marks = append(tp.Marks, Mark{X: float64(c.incastEnd) / 1e3, Label: c.name + ": " + end})
		res.Rows = append(res.Rows, []string{c.short, strconv.Itoa(n), strconv.FormatUint(each, 10), strconv.FormatInt(incastAt.Nanoseconds(), 10),
			strconv.FormatInt(int64(c.incastEnd), 10), strconv.FormatBool(c.stalled), f4(c.incastFrac), f4(c.before), f4(c.during), f4(c.worst), f4(c.after),
			strconv.FormatUint(c.pauses, 10), strconv.FormatUint(c.drops, 10), strconv.FormatUint(c.trims, 10)})
		tp.Series = append(tp.Series, binned(c.name, c.victim, 0, float64(interval.Nanoseconds())/1e3, plotPoints))
	}
	tw.Flush()
	sortMarks(tp.Marks)
	res.Table, res.Plots = tb.String(), []Plot{tp}
	res.Notes = fmt.Sprintf("Incast senders: hosts %v → host 0; victim: host %d → host 1. Line rate %.0f Gb/s.", senders, vsrc, line/1e9)
	m, d1, d8, p := cells[0], cells[1], cells[2], cells[3]
	// Thresholds fixed before the first run: "keeps ~100%" = mean during
	// the incast ≥ 90% of line rate; "−25%" and "dips" = at least 10
	// points below MRC's mean (the dips: a worst sample ≤ 50% of line
	// rate); "30–100 Gb/s" (7.5–25% of 400G) = mean ≤ 50% and below
	// RoCE+DCQCN 1 QP's.
	res.Checks = append(res.Checks, Check{Target: "T5", Claim: "MRC: victim mean during the incast ≥ 90% of line rate",
		Expected: "MRC: victim keeps 100% line rate",
		Measured: fmt.Sprintf("MRC victim %.1f%% during (worst sample %.1f%%), %.1f%% before; %d PAUSE, %d trims", 100*m.during, 100*m.worst, 100*m.before, m.pauses, m.trims),
		Pass:     !m.stalled && m.during >= 0.9})
	res.Checks = append(res.Checks, Check{Target: "T5", Claim: "RoCE+DCQCN 1 QP: victim mean during the incast ≥ 10 points of line rate below MRC's",
		Expected: "RoCE+DCQCN 1 QP: victim −25% (~300 of 400 Gb/s)",
		Measured: fmt.Sprintf("victim %.1f%% vs MRC %.1f%% (%+.1f points), worst sample %.1f%%; %d PAUSE", 100*d1.during, 100*m.during, 100*(d1.during-m.during), 100*d1.worst, d1.pauses),
		Pass:     d1.during <= m.during-0.10})
	res.Checks = append(res.Checks, Check{Target: "T5", Claim: "RoCE+DCQCN 8 QPs: victim mean ≥ 10 points below MRC's and a worst sample ≤ 50% of line rate",
		Expected: "RoCE many QPs: 1-s samples dip to 100 Gb/s",
		Measured: fmt.Sprintf("victim %.1f%% vs MRC %.1f%% (%+.1f points), worst sample %.1f%%; %d PAUSE", 100*d8.during, 100*m.during, 100*(d8.during-m.during), 100*d8.worst, d8.pauses),
		Pass:     d8.during <= m.during-0.10 && d8.worst <= 0.5})
	res.Checks = append(res.Checks, Check{Target: "T5", Claim: "PFC only: victim mean during the incast ≤ 50% of line rate and below RoCE+DCQCN 1 QP's",
		Expected: "PFC alone: victim 30–100 Gb/s (7.5–25% of 400G)",
		Measured: fmt.Sprintf("victim %.1f%% (%.0f Gb/s) vs RoCE+DCQCN 1 QP %.1f%%, worst sample %.1f%%; %d PAUSE", 100*p.during, p.during*line/1e9, 100*d1.during, 100*p.worst, p.pauses),
		Pass:     p.during <= 0.5 && p.during < d1.during})
	return res
}

// startFlow writes bytes from host src to host dst, split evenly over the
// connection's transport.qpsPerConnection QPs, in work requests of 1 MiB
// or, for long flows, of 1/1024 of a QP's share (fewer to post).
func startFlow(c *cluster.Cluster, src, dst int, bytes uint64) ([]*cluster.Transfer, error) {
	ps, err := c.Connect(src, dst)
	if err != nil {
		return nil, err
	}
	var trs []*cluster.Transfer
	per := bytes / uint64(len(ps))
	for i, p := range ps {
		b := per
		if i == len(ps)-1 {
			b = bytes - per*uint64(len(ps)-1)
		}
		if b == 0 {
			continue
		}
		chunk := max(min(b, 1<<20), (b/1024)&^(1<<20-1))
		tr, err := c.StartTransfer(p, c.Region(src, b, nil), c.Region(dst, b, nil), b, chunk)
		if err != nil {
			return nil, err
		}
		trs = append(trs, tr)
	}
	return trs, nil
}

// sampleRate samples a cumulative counter every interval of virtual time
// from now until until; the result's i-th value is the counter's increase
// over the i-th interval, times scale per nanosecond (scale 8 on a byte
// counter gives Gb/s). The slice fills as the loop runs. It samples on
// c.Scheduler(): on a partitioned cluster every sample is a global event,
// read with every partition stopped.
func sampleRate(c *cluster.Cluster, interval time.Duration, until sim.Time, scale float64, read func() uint64) *[]float64 {
	out := new([]float64)
	sched := c.Scheduler()
	start, last := sched.Now(), read()
	var tick func()
	tick = func() {
		v := read()
		if sched.Now() > start {
			*out = append(*out, float64(v-last)*scale/float64(interval.Nanoseconds()))
		}
		last = v
		if next := sched.Now() + sim.Time(interval); next <= until {
			sched.At(next, tick)
		}
	}
	sched.At(start, tick)
	return out
}

// sampleRx is host h's NIC receive rate in Gb/s per interval (all planes,
// every frame including retransmissions).
func sampleRx(c *cluster.Cluster, h int, interval time.Duration, until sim.Time) *[]float64 {
	return sampleRate(c, interval, until, 8, func() uint64 {
		var rx uint64
		for _, p := range c.Topo.HostPorts[h] {
			rx += p.Counters.RxBytes
		}
		return rx
	})
}

// binned is a plot series of at most maxPoints points: consecutive samples
// (sample i at x0 + (i+1)·dx) averaged in equal bins.
func binned(name string, y []float64, x0, dx float64, maxPoints int) Series {
	s := Series{Name: name}
	k := max(1, (len(y)+maxPoints-1)/maxPoints)
	for i := 0; i < len(y); i += k {
		var sum float64
		n := min(k, len(y)-i)
		for _, v := range y[i : i+n] {
			sum += v
		}
		s.X = append(s.X, x0+float64(i+n)*dx)
		s.Y = append(s.Y, sum/float64(n))
	}
	return s
}

// sortMarks orders a plot's marks by x (stable: equal times keep the
// order they were added in).
func sortMarks(m []Mark) {
	slices.SortStableFunc(m, func(a, b Mark) int { return cmp.Compare(a.X, b.X) })
}

// meanRate is the mean of the samples whose interval lies in [from, to]
// (samples of interval d; sample i covers (i·d, (i+1)·d]); NaN if none.
func meanRate(g []float64, d time.Duration, from, to sim.Time) float64 {
	var sum float64
	var k int
	for i, v := range g {
		a, b := sim.Time(int64(i)*d.Nanoseconds()), sim.Time(int64(i+1)*d.Nanoseconds())
		if a >= from && b <= to {
			sum += v
			k++
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return sum / float64(k)
}

// minRate is the lowest sample whose interval lies in [from, to]; NaN if none.
func minRate(g []float64, d time.Duration, from, to sim.Time) float64 {
	m := math.NaN()
	for i, v := range g {
		a, b := sim.Time(int64(i)*d.Nanoseconds()), sim.Time(int64(i+1)*d.Nanoseconds())
		if a >= from && b <= to && (math.IsNaN(m) || v < m) {
			m = v
		}
	}
	return m
}

// fabricTotals sums PAUSE frames sent by switches, drops (switch ports and
// links) and trims over the whole fabric.
func fabricTotals(c *cluster.Cluster) (pauses, drops, trims uint64) {
	for _, s := range c.Topo.Switches {
		for _, p := range s.Ports {
			pauses += p.Counters.PauseTx
			trims += p.Counters.Trims
			for _, d := range p.Counters.Drops {
				drops += d
			}
		}
	}
	for _, l := range c.Topo.Links {
		drops += l.Counters.Lost + l.Counters.DroppedDown
	}
	return pauses, drops, trims
}

// coOrder is the order senders are taken in: round-robin over the racks
// other than the victim's.
func coOrder(hostsPerT0, hosts int) []int {
	var order []int
	for i := 0; i < hostsPerT0; i++ {
		for r := 1; r*hostsPerT0 < hosts; r++ {
			order = append(order, r*hostsPerT0+i)
		}
	}
	return order
}
