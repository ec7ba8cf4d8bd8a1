package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// dcqcnTuning is TARGETS T6: a 15:1 RoCE incast on cluster D (one 400G
// plane) with PFC, one new flow joining every interval, under three DCQCN
// settings from default to most aggressive; the last-hop queue over time,
// PAUSE frames and the throughput shortfall at the bottleneck (the share
// of its line rate left unused).
func init() {
	Register(&Experiment{
		Name:    "dcqcn-tuning",
		Title:   "15:1 RoCE incast with PFC, one flow joining per interval: DCQCN default vs more vs most aggressive",
		Targets: []string{"T6"},
		Cluster: paperCluster("fabric.preset=D", "fabric.forwarding=ecmp", "transport.kind=roce", "transport.qpsPerConnection=1",
			"fabric.queue.pfc.enabled=true", "fabric.queue.ecn.enabled=true", "fabric.queue.ecn.lastHop=true", "fabric.queue.bufferBytes=33554432",
			// A shared-buffer switch (HPCC's MMU): the pause threshold is the
			// free part of a 32 MiB shared buffer >> 3, so the last-hop queue
			// can grow to megabytes, past the default's Kmin of 1.6 MB, before
			// PFC fires, as the published queue does (to 20 MB+). Static 96 KB
			// per ingress capped it at 1.1 MB: the default never marked.
			"fabric.queue.pfc.mode=dynamic", "fabric.queue.pfc.sharedBufferBytes=33554432"),
		Params: []Param{
			{Key: "senders", Default: "15", Doc: "N of the N:1 incast (hosts 1..N write to host 0, one QP each)"},
			{Key: "stagger", Default: "10ms", Quick: "7ms", Full: "20ms", Doc: "sender k starts at (k−1) × stagger (0: all at once); longer than exp.settle, so every phase has a settled part"},
			{Key: "hold", Default: "10ms", Quick: "7ms", Full: "40ms", Doc: "how long all N flows run together after the last one joined; longer than exp.settle"},
			{Key: "settle", Default: "5ms", Doc: "the join's transient: the first exp.settle of every phase is left out of the settled throughput (DCQCN's recovery after a join at 400G takes 2–5 ms, measured at full size)"},
			{Key: "interval", Default: "10us", Full: "50us", Doc: "throughput and PAUSE sampling interval (the queue is sampled every µs)"},
		},
		Setup: dcqcnTuningSetup,
		Args:  Typed[dqParams]{Read: readDq, Run: runDq},
	})
}

const dcqcnTuningSetup = `Hosts 1..N of cluster D (one 400G plane, 4 racks, RoCE with go-back-N on
ECMP, PFC on, ECN marking on every switch port including the last hop, a
32 MiB port buffer) each write to host 0 over one QP; sender k starts at
(k−1) × exp.stagger and sends until the run ends exp.hold after the last
one joined (payload elided). PFC is a shared-buffer switch's (HPCC's MMU,
fabric.queue.pfc.mode=dynamic, 32 MiB shared per switch): an ingress is
paused when it holds more than the free shared buffer >> 3, so the
last-hop queue can grow to several MB before PFC fires, as the published
queue does (20 MB+); the 96 KB static XOFF capped it at 1.1 MB, below the
default's Kmin, and the default setting never saw an ECN mark. A DCQCN
setting is the NIC's reaction point (package roce presets) together with
the switches' ECN marking: "default" is the HPCC ns-3 DCQCN preset
(dcqcn_hpcc) with ECN preset hpcc, its thresholds scaled to 400G (Kmin
1.6 MB, Kmax 6.4 MB, Pmax 0.2); "more aggressive" marks with ECN preset
dcqcn-sigcomm15, the DCQCN paper's thresholds (5 KB / 200 KB / 1%), and
reacts with dcqcn_hpcc_g4_slow2 (g ×4, recovery 2× slower); "most
aggressive" keeps those thresholds with dcqcn_hpcc_g16_slow4 (g ×16,
recovery 4× slower). Measured: the last-hop queue (T0 port to host 0)
every µs, its ECN marks, PAUSE frames sent by switches, drops, and the
throughput into host 0's NIC. The window is from the second flow's start
(from then on the offered load exceeds the 400G last hop) to the end;
"throughput" is the bytes host 0 received in it over 400G × its length.
The published flows join 5 s apart, so its losses are those of a settled
system; here a join's transient (every flow cut, then DCQCN's slow
recovery at 400G) lasts 2–5 ms, so "settled throughput" leaves out the
first exp.settle of every phase and averages the phases from 2 flows on,
and "shortfall" is 1 − that: the line rate left unused, not packet loss
(drops are counted apart). The checks read the settled shortfall; the
whole-window throughput (transients included) is in the table. The
per-phase table splits the run by the number of flows active.`

type dqSetting struct {
	name, short, label string // label: plot legend
	sets               []string
}

var dqSettings = []dqSetting{
	{"default (dcqcn_hpcc, ECN preset hpcc: 1.6 MB / 6.4 MB / 0.2 at 400G)", "default", "default", []string{"transport.roce.cc=dcqcn_hpcc", "fabric.queue.ecn.preset=hpcc"}},
	{"more aggressive (dcqcn_hpcc_g4_slow2, ECN preset dcqcn-sigcomm15: 5 KB / 200 KB / 0.01)", "more", "more aggressive", []string{"transport.roce.cc=dcqcn_hpcc_g4_slow2", "fabric.queue.ecn.preset=dcqcn-sigcomm15"}},
	{"most aggressive (dcqcn_hpcc_g16_slow4, ECN preset dcqcn-sigcomm15: 5 KB / 200 KB / 0.01)", "most", "most aggressive", []string{"transport.roce.cc=dcqcn_hpcc_g16_slow4", "fabric.queue.ecn.preset=dcqcn-sigcomm15"}},
}

// dqPhase is a stretch of the run: the window (from, to) or the time k
// flows were active.
type dqPhase struct {
	flows      int // 0: the whole window
	from, to   sim.Time
	throughput float64 // of the last hop
	// settled is the throughput after the phase's first exp.settle, the
	// join's transient (window: the mean of the phases' settled values
	// from 2 flows on).
	settled           float64
	marks             uint64 // ECN marks at the last hop
	meanQ, emptyFrac  float64
	maxQ              int
	pauses            uint64
	firstPauseAt      sim.Time // window only; -1 if none
	firstPauseFlows   int
	drops, totalPause uint64
}

type dqResult struct {
	window dqPhase
	phases []dqPhase
	q      []fabric.QueueSample
	rx     []float64 // Gb/s per interval
}

// dqJoinAt is when sender k (from 1) starts: (k−1)·stagger.
func dqJoinAt(k int, stagger time.Duration) sim.Time {
	return sim.Time(time.Duration(k-1) * stagger)
}

// dqIncast runs one setting: n long-lived flows into host 0, sender k
// joining at (k−1)·stagger, until hold after the last joined; a phase's
// settled throughput leaves out its first settle.
func dqIncast(c *cluster.Cluster, n int, stagger, hold, settle, interval time.Duration) (dqResult, error) {
	var r dqResult
	end := sim.Time(time.Duration(n-1)*stagger + hold)
	line := float64(c.Config.Fabric.HostLinkBps())
	each := uint64(line/8*float64(end)/1e9) + 1<<20
	var ferr error
	for s := 1; s <= n; s++ {
		c.Scheduler().At(dqJoinAt(s, stagger), func() {
			if _, err := startFlow(c, s, 0, each); err != nil && ferr == nil {
				ferr = fmt.Errorf("sender %d: %w", s, err)
			}
		})
	}
	last := c.Topo.HostPorts[0][0].Peer
	qs := sampleQueues(c, []*fabric.Port{last}, time.Microsecond, end)
	rx := sampleRx(c, 0, interval, end)
	pz := sampleRate(c, interval, end, float64(interval.Nanoseconds()), func() uint64 {
		p, _, _ := fabricTotals(c)
		return p
	})
	mz := sampleRate(c, interval, end, float64(interval.Nanoseconds()), func() uint64 { return last.Counters.ECNMarks })
	c.RunWhile(func() bool { return ferr == nil && c.Now() < end })
	if ferr != nil {
		return r, ferr
	}
	c.RunUntil(end)
	r.q, r.rx = qs.Samples, *rx
	pauses, marks := *pz, *mz // PAUSE frames, last-hop ECN marks per interval
	totalPause, drops, _ := fabricTotals(c)
	phase := func(flows int, from, to sim.Time) dqPhase {
		ph := dqPhase{flows: flows, from: from, to: to, firstPauseAt: -1}
		ph.throughput = meanRate(r.rx, interval, from, to) * 1e9 / line
		ph.settled = meanRate(r.rx, interval, min(from+sim.Time(settle), to), to) * 1e9 / line
		var sum float64
		var k, empty int
		for _, x := range r.q {
			if x.At >= from && x.At < to {
				sum += float64(x.Bytes)
				k++
				ph.maxQ = max(ph.maxQ, x.Bytes)
				if x.Bytes == 0 {
					empty++
				}
			}
		}
		if k > 0 {
			ph.meanQ, ph.emptyFrac = sum/float64(k), float64(empty)/float64(k)
		}
		for i, v := range pauses {
			a, b := sim.Time(int64(i)*interval.Nanoseconds()), sim.Time(int64(i+1)*interval.Nanoseconds())
			if a >= from && b <= to {
				ph.pauses += uint64(math.Round(v))
				ph.marks += uint64(math.Round(marks[i]))
			}
		}
		return ph
	}
	if stagger == 0 {
		r.phases = append(r.phases, phase(n, 0, end))
	}
	for k := 1; k <= n && stagger > 0; k++ {
		from, to := dqJoinAt(k, stagger), dqJoinAt(k+1, stagger)
		if k == n {
			to = end
		}
		r.phases = append(r.phases, phase(k, from, to))
	}
	from := dqJoinAt(2, stagger)
	if stagger == 0 || n == 1 {
		from = 0
	}
	w := phase(0, from, end)
	w.totalPause, w.drops = totalPause, drops
	if len(r.phases) == 1 {
		w.settled = r.phases[0].settled
	} else {
		var sum float64
		for _, ph := range r.phases[1:] {
			sum += ph.settled
		}
		w.settled = sum / float64(len(r.phases)-1)
	}
	for i, v := range pauses {
		if v > 0 {
			w.firstPauseAt = sim.Time(int64(i) * interval.Nanoseconds())
			w.firstPauseFlows = n
			if stagger > 0 {
				w.firstPauseFlows = min(n, int(w.firstPauseAt/sim.Time(stagger))+1)
			}
			break
		}
	}
	r.window = w
	return r, nil
}

// dqParams are dcqcn-tuning's parameters: the incast's N and its timing.
type dqParams struct {
	n                               int
	stagger, hold, settle, interval time.Duration
}

func readDq(env *Env) (dqParams, error) {
	r := newParamReader(env)
	n := r.integer("senders", 1, env.Config.Fabric.Hosts-1, "hosts 1..N write to host 0")
	stagger := r.duration("stagger", true)
	settle := r.duration("settle", true)
	d := r.durations("hold", "interval")
	hold, interval := d[0], d[1]
	if r.err() == nil {
		if stagger > 0 && settle >= stagger {
			r.bad("settle", "must be below exp.stagger (%s) so every phase has a settled part, got %s", stagger, settle)
		}
		if settle >= hold {
			r.bad("settle", "must be below exp.hold (%s), got %s", hold, settle)
		}
	}
	return dqParams{n, stagger, hold, settle, interval}, r.err()
}

func runDq(ctx context.Context, env *Env, p dqParams) (*Results, error) {
	n, stagger, hold, settle, interval := p.n, p.stagger, p.hold, p.settle, p.interval
	var rs []dqResult
	var events uint64
	var ecn []string // the resolved marking of each setting
	for i, st := range dqSettings {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		env.Point(i, len(dqSettings), st.name)
		cfg, err := override(env.Config, append(append([]string{}, st.sets...), "transport.payload=elided"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		c, err := env.NewCluster(cfg)
		if err != nil {
			return nil, err
		}
		env.Watch(c)
		ecn = append(ecn, st.short+": "+c.ECNSummary())
		r, err := dqIncast(c, n, stagger, hold, settle, interval)
		ev := c.Executed()
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		rs = append(rs, r)
		events += ev
		env.logf("dcqcn-tuning: %s: throughput %.1f%%, mean queue %.0f KB, %d PAUSE, %d events\n", st.short, 100*r.window.throughput, r.window.meanQ/1e3, r.window.totalPause, ev)
	}
	res := dqReport(rs, n, stagger, hold, settle, interval)
	res.Notes += "\n\nECN as resolved per port (fabric.queue.ecn.preset): " + strings.Join(ecn, "; ") + "."
	res.Events = events
	return res, nil
}

func dqReport(rs []dqResult, n int, stagger, hold, settle, interval time.Duration) *Results {
	res := &Results{}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "setting\tthroughput (% of last hop)\tsettled throughput (%)\tsettled shortfall (%)\tmean queue (KB)\tmax queue (KB)\tqueue empty (% of time)\tlast-hop ECN marks\tPAUSE frames\tfirst PAUSE (µs)\tflows active at first PAUSE\tdrops")
	for i, r := range rs {
		w := r.window
		flows := ""
		if w.firstPauseAt >= 0 {
			flows = strconv.Itoa(w.firstPauseFlows)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f\t%.0f\t%s\t%d\t%d\t%s\t%s\t%d\n", dqSettings[i].short, pctCell(w.throughput), pctCell(w.settled), pctCell(1-w.settled), w.meanQ/1e3, float64(w.maxQ)/1e3,
			pctCell(w.emptyFrac), w.marks, w.totalPause, usCell(int64(w.firstPauseAt)), flows, w.drops)
		row := func(ph dqPhase, name string, fp, fpf, drops string) {
			res.Row(C("setting", dqSettings[i].short), C("phase", name), C("flows_active", strconv.Itoa(ph.flows)), C("from_ns", strconv.FormatInt(int64(ph.from), 10)), C("to_ns", strconv.FormatInt(int64(ph.to), 10)), C("throughput_fraction_of_last_hop", f4(ph.throughput)), C("settled_throughput_fraction_of_last_hop", f4(ph.settled)), C("mean_queue_bytes", strconv.FormatFloat(ph.meanQ, 'f', 0, 64)), C("max_queue_bytes", strconv.Itoa(ph.maxQ)), C("queue_empty_fraction", f4(ph.emptyFrac)), C("last_hop_ecn_marks", strconv.FormatUint(ph.marks, 10)), C("pause_frames", strconv.FormatUint(ph.pauses, 10)), C("first_pause_ns", fp), C("first_pause_flows", fpf), C("drops", drops))
		}
		row(w, "window", strconv.FormatInt(int64(w.firstPauseAt), 10), strconv.Itoa(w.firstPauseFlows), strconv.FormatUint(w.drops, 10))
		for _, ph := range r.phases {
			row(ph, "flows", "", "", "")
		}
	}
	tw.Flush()
	// Per-phase matrix: mean queue and throughput by flows active.
	fmt.Fprintln(&tb)
	tw = tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	hdr := []string{"flows active"}
	for _, st := range dqSettings {
		hdr = append(hdr, st.short+": mean queue (KB)", "max queue (KB)", "throughput (% of last hop)", "settled (%)", "ECN marks", "PAUSE frames")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for k := range rs[0].phases {
		line := []string{strconv.Itoa(rs[0].phases[k].flows)}
		for _, r := range rs {
			ph := r.phases[k]
			line = append(line, fmt.Sprintf("%.0f", ph.meanQ/1e3), fmt.Sprintf("%.0f", float64(ph.maxQ)/1e3), pctCell(ph.throughput), pctCell(ph.settled), strconv.FormatUint(ph.marks, 10), strconv.FormatUint(ph.pauses, 10))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	res.Table = tb.String()

	// Each flow after the first joining, at the times dqIncast started them.
	var joins []Mark
	for k := 2; k <= n && stagger > 0; k++ {
		joins = append(joins, Mark{X: float64(dqJoinAt(k, stagger)) / 1e3, Label: fmt.Sprintf("flow %d joins", k)})
	}
	qp := Plot{Name: "queue_over_time", Title: fmt.Sprintf("%d:1 incast, one flow joining every %s: last-hop queue", n, durText(stagger)),
		XLabel: "virtual time (µs)", YLabel: "last-hop queue (KB)", Marks: joins}
	tp := Plot{Name: "throughput_over_time", Title: fmt.Sprintf("%d:1 incast, one flow joining every %s: into host 0", n, durText(stagger)),
		XLabel: "virtual time (µs)", YLabel: "throughput into host 0's NIC (Gb/s)", Marks: slices.Clone(joins)}
	fp := Plot{Name: "queue_by_flows", Title: "mean last-hop queue by flows active", XLabel: "flows active (count)", YLabel: "mean last-hop queue (KB)"}
	for i, r := range rs {
		qy := make([]float64, len(r.q))
		for k, s := range r.q {
			qy[k] = float64(s.Bytes) / 1e3
		}
		// Queue sample k is taken at k µs: bins end at their last sample.
		qp.Series = append(qp.Series, binned(dqSettings[i].label, qy, -1, 1, plotPoints))
		tp.Series = append(tp.Series, binned(dqSettings[i].label, r.rx, 0, float64(interval.Nanoseconds())/1e3, plotPoints))
		s := Series{Name: dqSettings[i].label}
		for _, ph := range r.phases {
			s.X = append(s.X, float64(ph.flows))
			s.Y = append(s.Y, ph.meanQ/1e3)
		}
		fp.Series = append(fp.Series, s)
	}
	res.Plots = []Plot{qp, tp, fp}
	res.Notes = fmt.Sprintf("Flows join every %s; all %d run together for %s. Window: from the second flow's start to the end. PAUSE frames and ECN marks per phase are counted in %s samples. "+
		"Settled throughput leaves out the first %s of every phase (the join's transient) and averages the phases from 2 flows on; the checks read it. "+
		"Shortfall is the share of the last hop's line rate left unused, not packet loss (drops are their own column).", durText(stagger), n, durText(hold), durText(interval), durText(settle))

	d, m, a := rs[0].window, rs[1].window, rs[2].window
	short := func(w dqPhase) float64 { return 100 * (1 - w.settled) }
	firstPause := math.NaN()
	if d.firstPauseAt >= 0 {
		firstPause = float64(d.firstPauseFlows)
	}
	res.Checks = append(res.Checks, bandCheck("T6", "default: flows active when the last-hop queue runs away to the PFC threshold (first PAUSE)",
		"default: queue runs away once flows exceed ~10",
		Between(6, 14, "flows", "the published onset is '~10' flows, read off a plot where flows join 5 s apart: ±4 flows; seed 000 reads PFC firing only after 90 s (15 flows), so the band's top is below 15 to test the runaway at ~10, not the last join"),
		firstPause, fmt.Sprintf("first PAUSE at %s with %d flows active (never: no PAUSE); max last-hop queue %.0f KB, mean %.0f KB; %d last-hop ECN marks",
			usCell(int64(d.firstPauseAt)), d.firstPauseFlows, float64(d.maxQ)/1e3, d.meanQ/1e3, d.marks)))
	res.Checks = append(res.Checks, holdsCheck("T6", "default: PFC fires and nothing drops",
		"default: PFC fires", "the published claim is yes/no: PAUSE frames appear (and a lossless fabric drops nothing)",
		d.totalPause > 0 && d.drops == 0, fmt.Sprintf("%d PAUSE frames, %d drops", d.totalPause, d.drops)))
	res.Checks = append(res.Checks, bandCheck("T6", "default: settled throughput shortfall at the last hop",
		"default: no throughput loss (line rate)",
		AtMost(5, "%", "published 0% (line rate) read off a throughput plot: 5 points for the reading; 0.5% here is headers"),
		short(d), fmt.Sprintf("settled throughput %.1f%% (shortfall %.1f%%), whole window %.1f%%", 100*d.settled, short(d), 100*d.throughput)))
	res.Checks = append(res.Checks, holdsCheck("T6", "more aggressive: queue controlled (no PAUSE, no drops) and occasionally empty",
		"more aggressive: queue controlled, occasionally empty", "the published claim is a shape: the queue never reaches PFC and at times drains to zero",
		m.totalPause == 0 && m.drops == 0 && m.emptyFrac > 0, fmt.Sprintf("%d PAUSE, %d drops; queue empty %.1f%% of the time, mean %.0f KB, max %.0f KB", m.totalPause, m.drops, 100*m.emptyFrac, m.meanQ/1e3, float64(m.maxQ)/1e3)))
	res.Checks = append(res.Checks, bandCheck("T6", "more aggressive: settled throughput shortfall at the last hop",
		"more aggressive: ~10% throughput loss",
		Between(5, 15, "%", "published '~10%': ±50% for the '~' and the plot's reading"),
		short(m), fmt.Sprintf("settled throughput %.1f%% (shortfall %.1f%%), whole window %.1f%% (shortfall %.1f%%, the joins' transients included)", 100*m.settled, short(m), 100*m.throughput, 100*(1-m.throughput))))
	res.Checks = append(res.Checks, bandCheck("T6", "most aggressive: settled throughput shortfall at the last hop",
		"most aggressive: ~20% throughput loss",
		Between(12, 30, "%", "published '~20%': −40% / +50% for the '~' and the plot's reading, the bottom kept above the more aggressive band's centre so the two claims stay apart"),
		short(a), fmt.Sprintf("settled throughput %.1f%% (shortfall %.1f%%), whole window %.1f%% (shortfall %.1f%%); %d PAUSE, %d drops", 100*a.settled, short(a), 100*a.throughput, 100*(1-a.throughput), a.totalPause, a.drops)))
	return res
}

// sampleQueues records the queued bytes of ports every interval until
// until: fabric.QueueSampler's loop events on a classic cluster, global
// events (every partition stopped) on a partitioned one, with the same
// samples.
func sampleQueues(c *cluster.Cluster, ports []*fabric.Port, interval time.Duration, until sim.Time) *fabric.QueueSampler {
	if c.Parallel() == nil {
		return fabric.NewQueueSampler(c.Loop, ports, interval, until)
	}
	s := &fabric.QueueSampler{Ports: ports, Interval: interval}
	sched := c.Scheduler()
	var tick func()
	tick = func() {
		now := sched.Now()
		for i, p := range ports {
			s.Samples = append(s.Samples, fabric.QueueSample{At: now, Port: i, Bytes: p.QueuedBytes()})
		}
		if next := now + sim.Time(interval); next <= until {
			sched.At(next, tick)
		}
	}
	sched.At(sched.Now(), tick)
	return s
}
