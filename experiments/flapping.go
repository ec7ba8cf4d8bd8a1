package experiments

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// flapping is TARGETS T9: four T0–T1 links flap (the faults scenario
// flapping-4) while a long job — ring all-reduce iterations back to back
// over every host — runs; job throughput before, during and after, against
// the same job without faults.
func init() {
	Register(&Experiment{
		Name:    "flapping",
		Title:   "four T0–T1 links flapping under a running all-reduce job: throughput during and after, QP failures",
		Targets: []string{"T9"},
		Cluster: paperCluster(append([]string{"fabric.preset=C", "fabric.hosts=16"}, mrcSets(1)...)...),
		Params: []Param{
			{Key: "size", Default: "16M", Doc: "ring all-reduce size of one iteration (nccl-tests bytes); the job repeats it back to back"},
			{Key: "flapAt", Default: "2ms", Doc: "virtual time the four links start flapping"},
			{Key: "flapFor", Default: "10ms", Quick: "4ms", Full: "40ms", Doc: "how long they flap (the published minute, scaled: see the setup)"},
			{Key: "flapPeriod", Default: "500us", Doc: "each link's flap cycle: one down per period (the paper gives none; 500 µs is MRC's probe interval of ASSUMED_BAD EVs, see the setup)"},
			{Key: "flapDown", Default: "100us", Doc: "how long each flap holds its link down (longer than MRC's detection and EV replacement, tens of µs); < exp.flapPeriod"},
			{Key: "flapJitter", Default: "100us", Doc: "each down starts up to this late in its period (uniform); exp.flapDown + exp.flapJitter ≤ exp.flapPeriod"},
			{Key: "settle", Default: "1ms", Doc: "gap after the flapping ends before the 'after' window (two MRC probe intervals of ASSUMED_BAD paths)"},
			{Key: "after", Default: "4ms", Quick: "2ms", Full: "10ms", Doc: "length of the 'after' window; the job runs until flapAt + flapFor + settle + after"},
			{Key: "interval", Default: "50us", Doc: "throughput sampling interval of the time series"},
			{Key: "payload", Default: "elided", Doc: "elided, or real: bytes carried and every iteration's result checked (same timing, ~8× the wall time and ~1.5 GB at default size)"},
		},
		Setup: flappingSetup,
		Args:  Typed[flParams]{Read: readFl, Run: runFl, Payload: payloadFl},
	})
}

const flappingSetup = `Every host of cluster C (16 hosts, 4 planes × 100G, 4 T1s per plane) is a
rank of a ring all-reduce (MRC, one QP per pair of ranks, spraying over every
plane and T1 on uSID paths) that runs iteration after iteration — the job.
Four T0–T1 cables, drawn from the seed, flap (the faults scenario
flapping-4's shape) from exp.flapAt for exp.flapFor: each goes down for
exp.flapDown (100 µs) once in every exp.flapPeriod (500 µs), starting up
to exp.flapJitter (100 µs) into the period, both directions. The paper
(TARGETS T9: "four links flap for a minute", −25% during, full speed
after, no QP fails) and the summaries TARGETS.md cites (seeds 000, 001) give no up or down
times; they give MRC's time scales: a dead EV is replaced in ~10–20 µs
(several tries may be needed), Clustermapper probes every ~1 ms, and a
background probe revives kicked EVs on a scale of seconds. The chosen
cycle keeps their order: a down (100 µs) outlasts detection and
replacement, so every flap is a path failure with frames lost; the period
equals MRC's probe interval of ASSUMED_BAD EVs (500 µs), so, as when a
link flaps every few seconds against second-scale probes, each flap costs
one detect–avoid–revive cycle; the link is down 20% of the time. Scaling:
the published minute becomes exp.flapFor of virtual time (4 ms quick,
10 ms default, 40 ms full): many all-reduce iterations long, 8–80 flaps
per link.
The same job runs without faults for the baseline. Job throughput is its
goodput: the bytes every QP placed into memory (each byte once;
retransmitted duplicates do not count) per exp.interval, averaged over a
window and compared with the fault-free job's over the same window:
"before" is from the end of the first iteration to exp.flapAt, "during"
the flapping, "after" from exp.settle past its end to the end of the run.
The NIC receive rate (every frame, retransmissions included) is shown
alongside.`

// flIter is one all-reduce iteration of the job.
type flIter struct {
	start, end sim.Time
	busbw      float64
	check      string
}

// flOut is one run of the job.
type flOut struct {
	iters    []flIter
	rx       []float64 // Gb/s received by every host port, per interval
	good     []float64 // GB/s placed into memory by every QP (goodput), per interval
	err      error     // the iteration that failed, if one did
	qpErrors int
	retx     uint64
	timeouts uint64
	faults   []*faults.FaultReport
	entries  int
	log      []byte // the faults event log (JSON lines)
	targets  []string
	flaps    []int // flap-downs per fault
}

func flJob(env *Env, cfg config.Config, plan *faults.Plan, size uint64, end sim.Time, interval time.Duration, events *uint64) (*flOut, error) {
	c, err := env.NewCluster(cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	env.Watch(c)
	o := &flOut{}
	qps := func() []verbs.Transport {
		var ts []verbs.Transport
		for _, h := range c.Hosts {
			ts = append(ts, h.RDMA().QPs()...)
		}
		return ts
	}
	sched := c.Scheduler() // partitioned: global events, between windows
	var last, lastPlaced uint64
	var tick func()
	tick = func() {
		var rx, placed uint64
		for _, hp := range c.Topo.HostPorts {
			for _, p := range hp {
				rx += p.Counters.RxBytes
			}
		}
		for _, q := range qps() {
			placed += q.Stats().BytesPlaced
		}
		if sched.Now() > 0 {
			o.rx = append(o.rx, float64(rx-last)*8/float64(interval.Nanoseconds()))
			o.good = append(o.good, float64(placed-lastPlaced)/float64(interval.Nanoseconds()))
		}
		last, lastPlaced = rx, placed
		if next := sched.Now() + sim.Time(interval); next <= end {
			sched.At(next, tick)
		}
	}
	sched.At(0, tick)
	var logb bytes.Buffer
	var rec *faults.Recorder
	if plan != nil {
		rec = faults.NewRecorder(sched, &logb)
		in, err := faults.NewInjector(c.Topo, sched, plan, cfg.Seed, rec)
		if err != nil {
			return nil, err
		}
		for i := range plan.Events {
			o.targets = append(o.targets, in.Target(i).Names()...)
		}
		in.Start()
	}
	m, err := collectives.New(c, collectives.Options{})
	if err != nil {
		return nil, err
	}
	ring, err := collectives.Lookup(collectives.AllReduce, "ring")
	if err != nil {
		return nil, err
	}
	for c.Now() < end {
		t0 := c.Now()
		r, err := m.Run(ring, size, collectives.RunOptions{})
		if err == nil && r.Check == collectives.CheckFailed {
			err = fmt.Errorf("%d wrong elements", r.Wrong)
		}
		if err != nil {
			o.err = fmt.Errorf("iteration %d at %s: %w", len(o.iters)+1, durText(time.Duration(t0)), err)
			break
		}
		if len(o.iters) == 0 && rec != nil {
			rec.Watch(qps()...) // the ring's QPs exist from the first iteration on
		}
		o.iters = append(o.iters, flIter{start: t0, end: c.Now(), busbw: r.BusBW, check: r.Check})
	}
	if rec != nil {
		var last time.Duration
		for _, ev := range plan.Events {
			last = max(last, ev.End())
		}
		if t := sim.Time(last) + 1; t > c.Now() {
			c.RunUntil(t)
		}
		rec.Finish()
		o.faults, o.entries, o.log = rec.Faults, len(rec.Entries), logb.Bytes()
		o.flaps = make([]int, len(plan.Events))
		for _, e := range rec.Entries {
			if e.Event == "flap_down" && e.Fault != nil && *e.Fault < len(o.flaps) {
				o.flaps[*e.Fault]++
			}
		}
		if err := rec.Err(); err != nil {
			return nil, err
		}
	}
	for _, q := range qps() {
		st := q.Stats()
		o.retx += st.Retransmissions
		o.timeouts += st.Timeouts
		if q.State() == verbs.QPError {
			o.qpErrors++
		}
	}
	*events += c.Executed()
	return o, nil
}

// flParams are flapping's parameters, read and checked.
type flParams struct {
	size                                     uint64
	flapAt, flapFor, settle, after, interval time.Duration
	flapPeriod, flapDown, flapJitter         time.Duration
	payload                                  string
	plan                                     *faults.Plan
}

func readFl(env *Env) (flParams, error) {
	r := newParamReader(env)
	var p flParams
	p.size = r.size("size")
	ds := r.durations("flapAt", "flapFor", "settle", "after", "interval")
	p.flapAt, p.flapFor, p.settle, p.after, p.interval = ds[0], ds[1], ds[2], ds[3], ds[4]
	p.flapPeriod, p.flapDown, p.flapJitter = r.duration("flapPeriod", false), r.duration("flapDown", false), r.duration("flapJitter", true)
	p.payload = r.choice("payload", "real", "elided")
	if err := r.err(); err != nil {
		return p, err
	}
	var err error
	switch {
	case p.flapDown >= p.flapPeriod:
		r.bad("flapDown", "%v is not shorter than exp.flapPeriod (%v): must be < exp.flapPeriod", p.flapDown, p.flapPeriod)
	case p.flapDown+p.flapJitter > p.flapPeriod:
		r.bad("flapJitter", "%v + exp.flapDown %v exceeds exp.flapPeriod %v: must be in [0, %v]", p.flapJitter, p.flapDown, p.flapPeriod, p.flapPeriod-p.flapDown)
	case p.flapPeriod > p.flapFor:
		r.bad("flapPeriod", "%v is longer than exp.flapFor (%v): no flap would happen; must be ≤ exp.flapFor", p.flapPeriod, p.flapFor)
	default:
		if p.plan, err = flPlan(p); err != nil {
			r.bad("flapPeriod", "%v", err)
		}
	}
	return p, r.err()
}

// flPlan is the faults plan of the flapping: the scenario flapping-4's
// four random T0–T1 cables with p's cycle.
func flPlan(p flParams) (*faults.Plan, error) {
	var b strings.Builder
	b.WriteString("events:\n")
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&b, "  - {name: flap %d, at: %v, duration: %v, kind: link_flap, target: \"random:t0-t1\", params: {period: %v, down: %v, jitter: %v}}\n",
			i, p.flapAt, p.flapFor, p.flapPeriod, p.flapDown, p.flapJitter)
	}
	return faults.ParsePlan("flapping", []byte(b.String()))
}

// payloadFl is Typed.Payload.
func payloadFl(p flParams) uint64 {
	if p.payload != "real" {
		return 0
	}
	return collectiveBuffers(p.size)
}

func runFl(ctx context.Context, env *Env, p flParams) (*Results, error) {
	size, payload := p.size, p.payload
	flapAt, flapFor, settle, after, interval := p.flapAt, p.flapFor, p.settle, p.after, p.interval
	cfg, err := override(env.Config, []string{"transport.payload=" + payload})
	if err != nil {
		return nil, err
	}
	plan := p.plan
	flapEnd := sim.Time(flapAt + flapFor)
	end := flapEnd + sim.Time(settle+after)
	n := cfg.Fabric.Hosts
	res := &Results{Points: 2}
	var runs [2]*flOut
	for i, p := range []*faults.Plan{nil, plan} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		label := [2]string{"no faults", "flapping-4"}[i]
		env.Point(i, 2, label)
		if runs[i], err = flJob(env, cfg, p, size, end, interval, &res.Events); err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		env.logf("flapping: %s: %d iterations, %d QP errors, %d timeouts %v\n", label, len(runs[i].iters), runs[i].qpErrors, runs[i].timeouts, errText(runs[i].err))
	}
	base, fl := runs[0], runs[1]
	first := sim.Time(0)
	if len(base.iters) > 0 {
		first = base.iters[0].end
	}
	type phase struct {
		name string
		a, b sim.Time
	}
	phases := []phase{{"before", first, sim.Time(flapAt)}, {"during", sim.Time(flapAt), flapEnd}, {"after", flapEnd + sim.Time(settle), end}}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "phase\twindow (ms)\tjob goodput, no faults (GB/s)\twith flapping (GB/s)\tchange (%%)\tNIC rx, no faults (Gb/s)\twith flapping (Gb/s)\n")
	ratio := map[string]float64{}
	for _, ph := range phases {
		b, f := meanRate(base.good, interval, ph.a, ph.b), meanRate(fl.good, interval, ph.a, ph.b)
		rb, rf := meanRate(base.rx, interval, ph.a, ph.b), meanRate(fl.rx, interval, ph.a, ph.b)
		ratio[ph.name] = f / b
		fmt.Fprintf(tw, "%s\t%.3f–%.3f\t%.1f\t%.1f\t%+.1f\t%.0f\t%.0f\n", ph.name, float64(ph.a)/1e6, float64(ph.b)/1e6, b, f, 100*(f/b-1), rb, rf)
		res.Row(C("phase", ph.name), C("from_ns", strconv.FormatInt(int64(ph.a), 10)), C("to_ns", strconv.FormatInt(int64(ph.b), 10)), C("baseline_goodput_GBps", f4(b)), C("flapping_goodput_GBps", f4(f)), C("ratio", f4(f/b)), C("baseline_rx_Gbps", f4(rb)), C("flapping_rx_Gbps", f4(rf)))
	}
	tw.Flush()
	var fb bytes.Buffer
	fw := tabwriter.NewWriter(&fb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(fw, "\nrun\titerations\tQP errors\tretransmissions\ttimeouts\tresult\n")
	for i, o := range runs {
		result := "every iteration completed"
		if payload == "real" {
			result += ", results verified"
		}
		if o.err != nil {
			result = "FAILED: " + o.err.Error()
			res.Failed = append(res.Failed, fmt.Sprintf("%s (%v)", [2]string{"no faults", "flapping"}[i], o.err))
		}
		fmt.Fprintf(fw, "%s\t%d\t%d\t%d\t%d\t%s\n", [2]string{"no faults", "flapping"}[i], len(o.iters), o.qpErrors, o.retx, o.timeouts, result)
	}
	fmt.Fprintf(fw, "\nflapping link\tflaps\tfirst loss after start (µs)\tdetect after start (µs)\tframes lost\toutcome\n")
	for i, f := range fl.faults {
		t := ""
		if i < len(fl.targets) {
			t = fl.targets[i]
		}
		fmt.Fprintf(fw, "%s\t%d\t%s\t%s\t%d\t%s\n", t, fl.flaps[i], usCell(f.FirstLossNs), usCell(f.DetectNs), f.PacketsLost, f.Outcome)
	}
	fw.Flush()
	res.Table = tb.String() + fb.String()
	total := 0
	for _, k := range fl.flaps {
		total += k
	}
	res.Notes = fmt.Sprintf("Flapping: %s, %d flap-downs in all (four links, down %s once in every %s period, starting up to %s into it) between %s and %s. "+
		"The faults event log (events.jsonl) has %d entries. Job: ring all-reduce of %s over %d ranks, repeated until %s; payload %s.",
		strings.Join(fl.targets, ", "), total, durText(p.flapDown), durText(p.flapPeriod), durText(p.flapJitter), durText(flapAt), durText(time.Duration(flapEnd)), fl.entries, units.FormatBytes(size), n, durText(time.Duration(end)), payload)
	res.Files = []File{{Name: "events.jsonl", Data: fl.log}}
	res.Plots = flPlots(base, fl, interval, flapAt, flapEnd, size, n)
	res.Checks = flChecks(base, fl, ratio, payload)
	return res, nil
}

func flPlots(base, fl *flOut, interval, flapAt time.Duration, flapEnd sim.Time, size uint64, n int) []Plot {
	// The flapping's start and end, in ms like the x axes (each flap of
	// four links, 8–80 per link, would bury the lines).
	marks := func() []Mark {
		return []Mark{{X: float64(flapAt) / 1e6, Label: "flapping starts"}, {X: float64(flapEnd) / 1e6, Label: "flapping ends"}}
	}
	tp := Plot{Name: "throughput_over_time", Title: fmt.Sprintf("ring all-reduce job, %d ranks: goodput per %s, four T0–T1 links flapping", n, durText(interval)),
		XLabel: "virtual time (ms)", YLabel: "job goodput: bytes placed by every QP (GB/s)", Marks: marks()}
	for i, o := range []*flOut{base, fl} {
		s := Series{Name: [2]string{"no faults", "four links flapping"}[i]}
		for k, v := range o.good {
			s.X = append(s.X, float64(int64(k+1)*interval.Nanoseconds())/1e6)
			s.Y = append(s.Y, v)
		}
		tp.Series = append(tp.Series, s)
	}
	ip := Plot{Name: "busbw_per_iteration", Title: fmt.Sprintf("busbw of each %s all-reduce iteration, four T0–T1 links flapping", units.FormatBytes(size)),
		XLabel: "iteration end, virtual time (ms)", YLabel: "busbw (GB/s)", Marks: marks()}
	for i, o := range []*flOut{base, fl} {
		s := Series{Name: [2]string{"no faults", "four links flapping"}[i]}
		for _, it := range o.iters {
			s.X = append(s.X, float64(it.end)/1e6)
			s.Y = append(s.Y, it.busbw)
		}
		ip.Series = append(ip.Series, s)
	}
	return []Plot{tp, ip}
}

// checks test T9 as published, on the median of the seeds (every seed
// draws its own four links).
func flChecks(base, fl *flOut, ratio map[string]float64, payload string) []Check {
	verified := ""
	if payload == "real" {
		verified = ", every result verified"
	}
	drop := 1 - ratio["during"]
	return []Check{
		holdsCheck("T9", "no QP fails: every iteration of the job completes while the links flap"+verified, "no QP fails",
			"the published claim is yes/no: no QP of the job fails (0 QPs in error and every iteration completes)",
			fl.err == nil && fl.qpErrors == 0 && len(fl.iters) > 0,
			fmt.Sprintf("%d iterations, %d QPs in error, %d retransmissions, %d timeouts%s", len(fl.iters), fl.qpErrors, fl.retx, fl.timeouts, errSuffix(fl.err))),
		bandCheck("T9", "full speed after: job throughput after the flapping, against the fault-free job's over the same window", "full speed after the flaps",
			AtLeast(95, "%", "full speed is the fault-free job's rate; 5% allows the two runs' iterations being out of phase in a window a few iterations long (the synchronous ring's start-up and tail in each)"),
			100*ratio["after"],
			fmt.Sprintf("after: %+.1f%% against no faults (before the flapping: %+.1f%%)", 100*(ratio["after"]-1), 100*(ratio["before"]-1))),
		bandCheck("T9", "job throughput drop while four links flap", "−25% during the flaps",
			Between(15, 35, "%", "the paper's one production reading, \"−25%\", given to two digits without a spread; ±10 points keeps it apart from \"barely touched\" (< 10%) and from \"halved\""),
			100*drop,
			fmt.Sprintf("during: %+.1f%% against no faults; %d retransmissions, %d timeouts", -100*drop, fl.retx, fl.timeouts)),
	}
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return "; " + err.Error()
}
