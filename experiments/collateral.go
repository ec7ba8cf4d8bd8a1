package experiments

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// collateral is TARGETS T5: on cluster D (one 400G plane) a cross-T1 7:1
// incast into one host and a victim flow into another host of the same
// T0, whose traffic shares the T1→T0 downlinks with the incast. MRC
// (spraying, trimming, NSCC, no PFC) against RoCE with PFC and DCQCN (1
// and 8 QPs per flow) and RoCE with PFC alone; the victim's throughput over
// time.
func init() {
	Register(&Experiment{
		Name:    "collateral",
		Title:   "cross-T1 7:1 incast next to a victim flow: MRC vs RoCE+DCQCN (1, 8 QPs) vs PFC alone",
		Targets: []string{"T5"},
		Cluster: paperCluster("fabric.preset=D"),
		Params: []Param{
			{Key: "senders", Default: "7", Doc: "N of the N:1 incast; senders are taken round-robin from the other racks"},
			{Key: "each", Default: "256M", Quick: "64M", Full: "1G", Doc: "bytes each incast sender writes (the incast lasts ≥ senders × each at line rate: quick ≈ 9 ms)"},
			{Key: "incastAt", Default: "200us", Doc: "virtual time the incast starts (the victim starts at 0)"},
			{Key: "tail", Default: "1ms", Quick: "500us", Full: "5ms", Doc: "how long the run goes on after the last incast transfer completed"},
			{Key: "interval", Default: "20us", Quick: "10us", Full: "100us", Doc: "victim throughput sampling interval (bytes into the victim's NIC)"},
			{Key: "dipWindow", Default: "1ms", Doc: "the stand-in for the paper's 1-s throughput samples: the victim's lowest mean over consecutive windows this long during the incast (a whole multiple of exp.interval; ≥ 3 of DCQCN's 300 µs rate-increase periods, so a window spans DCQCN's own cycle as a 1-s sample spans thousands of them)"},
			{Key: "deadline", Default: "200ms", Quick: "100ms", Full: "1s", Doc: "virtual-time cap: an incast not done by then is reported as stalled"},
		},
		Setup: collateralSetup,
		Args:  Typed[coParams]{Read: readCo, Run: runCo},
	})
}

const collateralSetup = `Cluster D: one 400G plane, 4 racks (T0) × 4 hosts, 4 T1. Host 0 (X) is
the incast target: exp.senders hosts of the other racks (round-robin over
racks 1–3: 4, 8, 12, 5, 9, 13, 6 for 7) each write exp.each bytes to X,
starting at exp.incastAt. The victim flow runs from 0 to the end, from the
next host in that order (10 for 7 senders) into host 1 (Y), on X's T0.
The victim shares the incast's queue by construction: a probe cluster
(the cell's config and seed) sends one packet on every QP, opened in the
run's order, and traces the T1 it crosses into rack 0; in the RoCE 1-QP
cells the victim uses the first of up to 64 QPs from 10 to 1 whose ECMP
hash crosses the T1 whose T1→T0 downlink carries the most incast QPs
(lowest T1 on a tie; the QPs before it stay idle), so the victim sits in
that downlink's egress queue and behind its PFC pauses. With 8 QPs per
flow the victim's QPs stay where ECMP puts them (the table lists their
T1s and the incast QPs on each); MRC sprays every flow over all four.
Every flow is one RDMA write stream of the cell's transport, payload
elided. Cells: MRC (uSID, per-packet spraying, trimming, NSCC, PFC off,
last-hop ECN off); RoCE + DCQCN (HPCC ns-3 preset, go-back-N, ECMP, PFC
on, ECN on every switch port including the last hop with the config's
fabric.queue.ecn.preset, by default auto: dcqcn-sigcomm15 for RoCE, Kmin
5 KB / Kmax 200 KB / Pmax 1%, and htsim's 0.2–0.8 BDP for MRC) with 1 and
with 8 QPs per flow (a flow's bytes split evenly over its QPs); RoCE with
PFC alone (the same fabric, transport.roce.cc=none: marks are ignored).
Victim throughput = bytes arriving at Y's NIC per exp.interval
(retransmissions included). "during" is the mean over the incast, from
exp.incastAt to the last incast completion; "before" the mean over the
second half of [0, exp.incastAt]; "worst" the lowest sample during the
incast; "worst exp.dipWindow mean" the lowest mean over consecutive
exp.dipWindow windows from exp.incastAt, the stand-in for the paper's
1-s samples (a window spans a few of DCQCN's 300 µs rate-increase
periods, as 1 s spans thousands; the incast spans 10 windows at quick, 40
at default). Checks: MRC and DCQCN 1 QP and PFC-only read "during",
DCQCN 8 QPs its worst window.`

// plotPoints bounds the points of a time-series plot line (samples are
// averaged in bins); results.csv keeps the unbinned summaries.
const plotPoints = 300

type coCell struct {
	name  string
	short string
	sets  []string
	// probe: RoCE, whose ECMP paths are probed (coProbe); pin: the
	// victim's one QP is pinned onto the incast's most loaded downlink.
	probe, pin bool
	place      coPlacement
	dip        float64 // lowest exp.dipWindow mean during the incast, of line rate

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
	dipWindow                          time.Duration
	senders                            []int
	vsrc                               int
}

// params reads collateral's parameters and checks the fabric can host the
// incast.
func readCo(env *Env) (coParams, error) {
	r := newParamReader(env)
	fc := env.Config.Fabric
	var p coParams
	p.each = r.size("each")
	durs := r.durations("incastAt", "tail", "interval", "deadline")
	p.incastAt, p.tail, p.interval, p.deadline = durs[0], durs[1], durs[2], durs[3]
	p.dipWindow = r.duration("dipWindow", false)
	if p.interval > 0 && p.dipWindow > 0 && (p.dipWindow < p.interval || p.dipWindow%p.interval != 0) {
		r.bad("dipWindow", "must be a whole multiple of exp.interval (%s), got %s", p.interval, p.dipWindow)
	}
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

func runCo(ctx context.Context, env *Env, p coParams) (*Results, error) {
	n, each, senders, vsrc := len(p.senders), p.each, p.senders, p.vsrc
	incastAt, tail, interval, deadline := p.incastAt, p.tail, p.interval, p.deadline
	const X, Y = 0, 1
	roce := []string{"transport.kind=roce", "fabric.forwarding=ecmp", "fabric.queue.pfc.enabled=true", "fabric.queue.ecn.enabled=true", "fabric.queue.ecn.lastHop=true"}
	cells := []*coCell{
		{name: "MRC, 1 QP", short: "mrc", sets: mrcSets(1, "fabric.queue.pfc.enabled=false", "fabric.queue.ecn.lastHop=false", "transport.mrc.nscc=true", "fabric.queue.trim.enabled=true")},
		{name: "RoCE+DCQCN, 1 QP", short: "dcqcn1", probe: true, pin: true, sets: append(append([]string{}, roce...), "transport.roce.cc=dcqcn_hpcc", "transport.qpsPerConnection=1")},
		{name: "RoCE+DCQCN, 8 QPs", short: "dcqcn8", probe: true, sets: append(append([]string{}, roce...), "transport.roce.cc=dcqcn_hpcc", "transport.qpsPerConnection=8")},
		{name: "RoCE, PFC only", short: "pfc", probe: true, pin: true, sets: append(append([]string{}, roce...), "transport.roce.cc=none", "transport.qpsPerConnection=1")},
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
		if cell.probe {
			if cell.place, err = coProbe(cfg, senders, vsrc, X, Y, cell.pin); err != nil {
				return nil, fmt.Errorf("%s: %w", cell.name, err)
			}
		}
		c, err := env.NewCluster(cfg)
		if err != nil {
			return nil, err
		}
		env.Watch(c)
		ecn = append(ecn, cell.short+": "+c.ECNSummary())
		// The victim never runs out of bytes before the deadline. Its
		// first cell.place.skip connections stay idle: they are the QPs
		// whose hash missed the pinned downlink (coProbe).
		vbytes := uint64(line/8*deadline.Seconds()) &^ (1<<20 - 1)
		var vps []cluster.Pair
		for k := 0; k <= cell.place.skip && err == nil; k++ {
			vps, err = c.Connect(vsrc, Y)
		}
		if err == nil {
			_, err = startOn(c, vps, vsrc, Y, vbytes)
		}
		if err != nil {
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
		cell.dip = minWindow(cell.victim, interval, p.dipWindow, sim.Time(incastAt), cell.incastEnd) / lineG
		if d := cell.incastEnd - sim.Time(incastAt); d > 0 {
			cell.incastFrac = float64(uint64(n)*each) * 8 / (float64(d) / 1e9) / line
		}
		env.logf("collateral: %s: victim before %.1f%%, during %.1f%% (worst %.1f%%), incast %.1f%% of line rate, %d PAUSE\n",
			cell.name, 100*cell.before, 100*cell.during, 100*cell.worst, 100*cell.incastFrac, cell.pauses)
	}
	res := coReport(cells, n, each, incastAt, interval, p.dipWindow, senders, vsrc, line)
	res.Notes += "\n\nECN as resolved per port (fabric.queue.ecn.preset): " + strings.Join(ecn, "; ") + "."
	res.Events = events
	return res, nil
}

func coReport(cells []*coCell, n int, each uint64, incastAt, interval, dipWindow time.Duration, senders []int, vsrc int, line float64) *Results {
	res := &Results{}
	var samples int
	for _, c := range cells {
		samples = max(samples, len(c.victim))
	}
	bin := time.Duration(max(1, (samples+plotPoints-1)/plotPoints)) * interval
	tp := Plot{Name: "victim_throughput", Title: fmt.Sprintf("victim %d → 1 next to a %d:1 incast into 0 (%s each, from %s; mean per %s)", vsrc, n, units.FormatBytes(each), durText(incastAt), durText(bin)),
		XLabel: "virtual time (µs)", YLabel: "victim throughput into its NIC (Gb/s)",
		Marks: []Mark{{X: float64(incastAt.Nanoseconds()) / 1e3, Label: "incast starts"}}}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "transport\tvictim before (%% of line)\tduring incast (%% of line)\tworst %s sample (%% of line)\tworst %s mean (%% of line)\tafter (%% of line)\tincast duration (µs)\tincast rate (%% of line)\tPAUSE frames\tdrops\ttrims\tvictim's T1s\tincast QPs on them\n", durText(interval), durText(dipWindow))
	res.Points = len(cells)
	for _, c := range cells {
		stall, end := "", "incast done"
		if c.stalled {
			stall, end = " (stalled)", "incast stalled"
			res.Failed = append(res.Failed, fmt.Sprintf("%s (incast stalled: not done by exp.deadline)", c.name))
		}
		t1s, shared := "sprayed", "all"
		if c.probe {
			t1s, shared = c.place.victimText()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.0f%s\t%s\t%d\t%d\t%d\t%s\t%s\n", c.name, pctCell(c.before), pctCell(c.during), pctCell(c.worst), pctCell(c.dip), pctCell(c.after),
			float64(c.incastEnd-sim.Time(incastAt))/1e3, stall, pctCell(c.incastFrac), c.pauses, c.drops, c.trims, t1s, shared)
		tp.Marks = append(tp.Marks, Mark{X: float64(c.incastEnd) / 1e3, Label: c.name + ": " + end})
		res.Row(C("transport", c.short), C("senders", strconv.Itoa(n)), C("bytes_each", strconv.FormatUint(each, 10)), C("incast_start_ns", strconv.FormatInt(incastAt.Nanoseconds(), 10)), C("incast_end_ns", strconv.FormatInt(int64(c.incastEnd), 10)), C("incast_stalled", strconv.FormatBool(c.stalled)), C("incast_fraction_of_line", f4(c.incastFrac)), C("victim_before_fraction_of_line", f4(c.before)), C("victim_during_fraction_of_line", f4(c.during)), C("victim_worst_sample_fraction_of_line", f4(c.worst)), C("victim_worst_window_fraction_of_line", f4(c.dip)), C("victim_after_fraction_of_line", f4(c.after)), C("pause_frames", strconv.FormatUint(c.pauses, 10)), C("drops", strconv.FormatUint(c.drops, 10)), C("trims", strconv.FormatUint(c.trims, 10)), C("victim_t1s", t1s), C("incast_qps_on_victim_downlinks", shared))
		tp.Series = append(tp.Series, binned(c.name, c.victim, 0, float64(interval.Nanoseconds())/1e3, plotPoints))
	}
	tw.Flush()
	sortMarks(tp.Marks)
	res.Table, res.Plots = tb.String(), []Plot{tp}
	res.Notes = fmt.Sprintf("Incast senders: hosts %v → host 0; victim: host %d → host 1. Line rate %.0f Gb/s.", senders, vsrc, line/1e9)
	m, d1, d8, p := cells[0], cells[1], cells[2], cells[3]
	pct := func(c *coCell) float64 { return 100 * c.during }
	gbps := func(f float64) float64 { return f * line / 1e9 }
	res.Checks = append(res.Checks, bandCheck("T5", "MRC: victim's mean throughput during the incast",
		"MRC: victim keeps 100% line rate",
		Between(90, 100, "%", "the published 100% is read off a plot of 1-s samples (to a few %); the victim's ceiling here is 99.5% (headers), and the band leaves 10 points for the reading and the incast's first and last microseconds"),
		pct(m), fmt.Sprintf("MRC victim %.1f%% during (worst %s sample %.1f%%, worst %s mean %.1f%%), %.1f%% before; %d PAUSE, %d trims%s",
			100*m.during, durText(interval), 100*m.worst, durText(dipWindow), 100*m.dip, 100*m.before, m.pauses, m.trims, stalledText(m))))
	res.Checks = append(res.Checks, bandCheck("T5", "RoCE+DCQCN 1 QP: victim's mean throughput during the incast",
		"RoCE+DCQCN 1 QP: victim −25% (~300 of 400 Gb/s)",
		Between(60, 90, "%", "published −25% (~300 of 400 Gb/s) read off 1-s samples; ±15 points for the reading and for how many of the 7 incast flows share the victim's downlink (ECMP over 4 T1s puts 1–3 on the busiest; max-min with 2 leaves the victim 71%)"),
		pct(d1), fmt.Sprintf("victim %.1f%% (%.0f Gb/s) vs MRC %.1f%%; its QP pinned onto T1 %d, whose downlink carries %d of the %d incast QPs (%d idle QPs skipped); worst %s mean %.1f%%; %d PAUSE%s",
			100*d1.during, gbps(d1.during), 100*m.during, d1.place.target, d1.place.load[d1.place.target], n, d1.place.skip, durText(dipWindow), 100*d1.dip, d1.pauses, stalledText(d1))))
	res.Checks = append(res.Checks, bandCheck("T5", "RoCE+DCQCN 8 QPs: victim's lowest exp.dipWindow mean during the incast (the 1-s samples' stand-in)",
		"RoCE many QPs: 1-s samples dip to 100 Gb/s",
		Between(50, 200, "Gb/s", "published dips to ~100 Gb/s, the minimum of a plot of 1-s samples: a factor of 2 either way, since exp.dipWindow (ms) stands in for 1 s and a minimum moves with the window"),
		gbps(d8.dip), fmt.Sprintf("lowest %s mean %.0f Gb/s (%.1f%%), mean %.1f%% during; victim QPs on T1s %v, incast QPs per T1 %v; worst %s sample %.1f%%; %d PAUSE%s",
			durText(dipWindow), gbps(d8.dip), 100*d8.dip, 100*d8.during, d8.place.victimT1, d8.place.load, durText(interval), 100*d8.worst, d8.pauses, stalledText(d8))))
	res.Checks = append(res.Checks, bandCheck("T5", "PFC only: victim's mean throughput during the incast",
		"PFC alone: victim 30–100 Gb/s (7.5–25% of 400G)",
		Between(30, 100, "Gb/s", "the published range itself"),
		gbps(p.during), fmt.Sprintf("victim %.0f Gb/s (%.1f%%) vs RoCE+DCQCN 1 QP %.1f%%; its QP pinned onto T1 %d, whose downlink carries %d of the %d incast QPs; worst %s mean %.1f%%; %d PAUSE%s",
			gbps(p.during), 100*p.during, 100*d1.during, p.place.target, p.place.load[p.place.target], n, durText(dipWindow), 100*p.dip, p.pauses, stalledText(p))))
	return res
}

// stalledText flags a cell whose incast did not finish by exp.deadline.
func stalledText(c *coCell) string {
	if c.stalled {
		return " (incast stalled)"
	}
	return ""
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

// coPlacement is where the RoCE flows of a cell cross T1 on their way
// into X's and Y's T0 (a single plane: one T1→T0 link per T1, so the T1
// names the downlink and its egress queue).
type coPlacement struct {
	incastT1 [][]int // per incast sender, per QP: the T1 it crosses
	load     []int   // incast QPs per T1
	target   int     // the T1 whose downlink carries the most incast QPs (lowest index on a tie)
	skip     int     // victim QPs opened and left idle before the one used (1 QP per flow)
	victimT1 []int   // per victim QP used: the T1 it crosses
}

// victimText is the T1s the victim's QPs cross ("2" or "0 1 1 3") and,
// for each, the incast QPs whose downlink it shares ("2" or "1 2 2 0").
func (pl coPlacement) victimText() (t1s, shared string) {
	var a, b []string
	for _, k := range pl.victimT1 {
		a = append(a, strconv.Itoa(k))
		b = append(b, strconv.Itoa(pl.load[k]))
	}
	return strings.Join(a, " "), strings.Join(b, " ")
}

// coMaxSkip bounds the idle victim QPs opened to find one whose ECMP hash
// crosses the target T1: with 4 T1s the chance that none of 64 does is
// (3/4)^64 ≈ 1e-8 (an error, never a silent miss).
const coMaxSkip = 64

// coProbe finds, on a probe cluster of cfg (the cell's config, seed and
// ECMP seed), the T1 each flow's QPs cross toward rack 0: it opens the
// QPs in the order the cell's run opens them (QP numbers, so source ports
// and flow labels, are per host and come out the same), sends one packet
// on each and traces the T1 that forwards it down to rack 0. With pin
// (one QP per flow), the victim's QP is the first of up to coMaxSkip
// QPs from vsrc to Y whose hash crosses the T1 carrying the most incast
// QPs: the victim shares that T1→T0 downlink and its queue with the
// incast by construction, not by the luck of the hash. Without pin the
// victim's QPs stay where ECMP puts them.
func coProbe(cfg config.Config, senders []int, vsrc, X, Y int, pin bool) (coPlacement, error) {
	var pl coPlacement
	c, err := cluster.NewForWorkers(cfg, 0)
	if err != nil {
		return pl, err
	}
	defer c.Close()
	seen := -1
	for _, s := range c.Topo.Switches {
		if s.Tier != 1 {
			continue
		}
		s.Trace = func(sw *fabric.Switch, p *fabric.Packet, _ *fabric.Port) {
			if _, subnet, _, ok := fabric.ParseHostAddr(p.Dst()); ok && subnet == 0 && p.IsIPv6() {
				seen = sw.Index
			}
		}
	}
	// t1 sends one packet on pair p and returns the T1 it crossed.
	t1 := func(p cluster.Pair) (int, error) {
		seen = -1
		const n = 64
		tr, err := c.StartTransfer(p, c.Region(p.A.Host, n, nil), c.Region(p.B.Host, n, nil), n, n)
		if err != nil {
			return -1, err
		}
		c.RunWhile(func() bool { return !tr.Done() })
		if seen < 0 {
			return -1, fmt.Errorf("collateral: probe %d→%d crossed no T1 toward rack 0", p.A.Host, p.B.Host)
		}
		return seen, nil
	}
	pl.load = make([]int, cfg.Fabric.T1PerPlane)
	var victim [][]cluster.Pair // the victim's connections, in the order opened
	ps, err := c.Connect(vsrc, Y)
	if err != nil {
		return pl, err
	}
	victim = append(victim, ps)
	for _, s := range senders {
		ps, err := c.Connect(s, X)
		if err != nil {
			return pl, err
		}
		var row []int
		for _, p := range ps {
			k, err := t1(p)
			if err != nil {
				return pl, err
			}
			row = append(row, k)
			pl.load[k]++
		}
		pl.incastT1 = append(pl.incastT1, row)
	}
	for k, l := range pl.load {
		if l > pl.load[pl.target] {
			pl.target = k
		}
	}
	for try := 0; ; try++ {
		var ts []int
		for _, p := range victim[try] {
			k, err := t1(p)
			if err != nil {
				return pl, err
			}
			ts = append(ts, k)
		}
		if !pin || ts[0] == pl.target {
			pl.skip, pl.victimT1 = try, ts
			return pl, nil
		}
		if try+1 == coMaxSkip {
			return pl, fmt.Errorf("collateral: none of %d QPs %d→%d hashes onto T1 %d (the incast's most loaded downlink)", coMaxSkip, vsrc, Y, pl.target)
		}
		ps, err := c.Connect(vsrc, Y)
		if err != nil {
			return pl, err
		}
		victim = append(victim, ps)
	}
}
