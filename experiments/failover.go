package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// failover is TARGETS T7: the busiest T0–T1 link of a transfer's active
// path is cut mid-transfer (a faults plan run by faults.Drill), MRC
// against RoCE; receive throughput over time and time to bypass.
func init() {
	Register(&Experiment{
		Name:    "failover",
		Title:   "link on an active path cut mid-transfer: MRC bypass vs RoCE stall",
		Targets: []string{"T7"},
		Cluster: paperCluster("fabric.preset=C", "fabric.hosts=16"),
		Params: []Param{
			{Key: "bytes", Default: "64M", Quick: "16M", Doc: "transfer size, host 0 → last host (across T1), one QP"},
			{Key: "cutAt", Default: "300us", Quick: "100us", Doc: "virtual time the link goes down (and stays down)"},
			{Key: "interval", Default: "10us", Doc: "throughput sampling interval (bytes received at the destination NIC, all planes)"},
			{Key: "deadline", Default: "50ms", Doc: "virtual-time cap: a transfer not done by then is stalled"},
			{Key: "reconvergence", Default: config.PaperECMPReconvergence, Doc: "RoCE cell's fabric.ecmpReconvergence: the BGP-style delay after which the ECMP switches route around the cut link (config.PaperECMPReconvergence); 0..10s"},
		},
		Setup: failoverSetup,
		Args:  Typed[foParams]{Read: readFo, Run: runFo, Payload: payloadFo},
	})
}

const failoverSetup = `Host 0 writes to the last host (across T1) over one QP with the payload
carried and compared byte for byte. At exp.cutAt one cable of the
transfer's active path goes down in both directions and stays down, in two
runs per transport: the source-side cut (faults selector busiest:t0-t1, the
source T0's uplink) and the destination-side cut (busiest:t1-t0, the T1's
downlink into the destination's T0). MRC: uSID, spraying over every plane; its
path-state machine must move off the dead path. RoCE: ECMP, go-back-N, with
BGP-style routing reconvergence (fabric.ecmpReconvergence =
exp.reconvergence): the source T0 does not own that cable, so it keeps
hashing the flow onto the T1 that lost its way down until routing tells it
(the source-side cut it withdraws at once, as a switch sees its own
cables, so T7's RoCE claim is tested on the destination-side cut), and the
flow stalls until then — or
until its retries run out, whichever comes first. The fault is measured by
the faults package's recorder (first loss, detection, bypass = the last data
frame sent into the dead link, frames lost); the drill also runs the same
transfer without the fault for the slowdown. Throughput over time is the
bytes arriving at the destination NIC (all planes, retransmissions
included) per sampling interval.`

type foCell struct {
	name    string
	side    string // which cable of the path is cut
	sets    []string
	mrc     bool
	s       *faults.Summary
	samples []float64 // Gb/s per interval
	// RoCE: go-back-N timeout and retry count, from the cluster.
	timeout time.Duration
	retries int
}

// foParams are failover's parameters.
type foParams struct {
	size                                  uint64
	cutAt, interval, deadline, reconverge time.Duration
}

// params reads failover's parameters.
func readFo(env *Env) (foParams, error) {
	r := newParamReader(env)
	p := foParams{size: r.size("bytes")}
	d := r.durations("cutAt", "interval", "deadline")
	p.cutAt, p.interval, p.deadline = d[0], d[1], d[2]
	if p.reconverge = r.duration("reconvergence", true); p.reconverge > config.MaxECMPReconvergence {
		r.bad("reconvergence", "%q is out of range; must be a duration in [0, %v] (fabric.ecmpReconvergence)", r.p["reconvergence"], config.MaxECMPReconvergence)
	}
	return p, r.err()
}

// payloadFo is Typed.Payload: the transfer is real
// (verified byte for byte); its source and destination each hold it.
func payloadFo(p foParams) uint64 {
	return p.size
}

func runFo(ctx context.Context, env *Env, prm foParams) (*Results, error) {
	size, cutAt, interval, deadline := prm.size, prm.cutAt, prm.interval, prm.deadline
	// Two cuts of the active path: the source T0's uplink (busiest:t0-t1
	// picks it: ties go to the first cable, the source's) and the T1's
	// downlink into the destination T0 (busiest:t1-t0), which the source
	// T0 does not own.
	sides := []struct{ name, sel string }{{"source-side cut", "busiest:t0-t1"}, {"destination-side cut", "busiest:t1-t0"}}
	plans := map[string]*faults.Plan{}
	for _, sd := range sides {
		pl, err := faults.ParsePlan("failover", []byte(fmt.Sprintf("events:\n  - at: %dns\n    kind: link_down\n    target: %s\n", cutAt.Nanoseconds(), sd.sel)))
		if err != nil {
			return nil, err
		}
		plans[sd.name] = pl
	}
	var cells []*foCell
	for _, sd := range sides {
		cells = append(cells,
			&foCell{name: "MRC, 1 QP, " + sd.name, side: sd.name, mrc: true, sets: mrcSets(1, "transport.payload=real")},
			&foCell{name: "RoCE, 1 QP, " + sd.name, side: sd.name, sets: roceSets(1, "transport.payload=real", "fabric.ecmpReconvergence="+prm.reconverge.String())})
	}
	var logb bytes.Buffer // events.jsonl: the faults recorder's entries of every cell
	res := &Results{}
	tp := Plot{Name: "throughput_over_time", Title: fmt.Sprintf("%s host 0 → last host, busiest T0–T1 link cut at %s", units.FormatBytes(size), durText(cutAt)),
		XLabel: "virtual time (µs)", YLabel: "received at the destination NIC (Gb/s)",
		Marks: []Mark{{X: float64(cutAt.Nanoseconds()) / 1e3, Label: "link cut"}}}
	for ci, cell := range cells {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		env.Point(ci, len(cells), cell.name+", link cut and baseline")
		cfg, err := override(env.Config, cell.sets)
		if err != nil {
			return nil, err
		}
		dst := cfg.Fabric.Hosts - 1
		var c, base *cluster.Cluster
		var last uint64
		var sample func()
		cell.s, err = faults.Drill(cfg, faults.DrillOptions{Plan: plans[cell.side], Deadline: deadline, Baseline: true, Parallel: env.Parallel,
			Workload:   faults.Workload{Pattern: "p2p", Src: 0, Dst: dst, Bytes: size},
			OnBaseline: func(cl *cluster.Cluster) { base = cl; env.Watch(cl) },
			OnCluster: func(cl *cluster.Cluster) {
				c = cl
				env.Watch(cl)
				if !cell.mrc {
					if rc, err := cl.RoCEConfig(0); err == nil {
						cell.timeout, cell.retries = time.Duration(rc.TimeoutNs), rc.RetryCount
					}
				}
				sched := c.Scheduler() // partitioned: global events
				sample = func() {
					var rx uint64
					for _, p := range c.Topo.HostPorts[dst] {
						rx += p.Counters.RxBytes
					}
					if sched.Now() > 0 {
						cell.samples = append(cell.samples, float64(rx-last)*8/float64(interval.Nanoseconds()))
					}
					last = rx
					if next := sched.Now() + sim.Time(interval); next <= sim.Time(deadline) {
						sched.At(next, sample)
					}
				}
				sched.At(0, sample)
			}})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cell.name, err)
		}
		s := cell.s
		f := s.Faults[0]
		if err := encodeFaultLog(&logb, "clusterC", cell.name, s); err != nil {
			return nil, err
		}
		// Trim the idle tail after the job ended (or stalled for good).
		end := len(cell.samples)
		for end > 0 && cell.samples[end-1] == 0 {
			end--
		}
		end = min(len(cell.samples), end+5)
		sr := Series{Name: cell.name}
		for i := 0; i < end; i++ {
			sr.X = append(sr.X, float64(int64(i+1)*interval.Nanoseconds())/1e3)
			sr.Y = append(sr.Y, cell.samples[i])
		}
		tp.Series = append(tp.Series, sr)
		res.Events += c.Executed()
		if base != nil {
			res.Events += base.Executed() // the fault-free run is simulated too
		}
		target := ""
		if len(f.Targets) > 0 {
			target = f.Targets[0]
		}
		// The path recovers when this transport's last data frame went into
		// the dead link (the faults recorder's bypass), if it moved off it.
		if f.BypassNs >= 0 {
			tp.Marks = append(tp.Marks, Mark{X: float64(cutAt.Nanoseconds()+f.BypassNs) / 1e3, Label: cell.name + " off the cut link"})
		}
		// Detect and bypass count from the cut; job and baseline from 0.
		ns := func(key, head string, v int64) Cell { return C(key, strconv.FormatInt(v, 10)).Show(head, usCell(v)) }
		res.Row(C("transport", cell.name).Show("transport", cell.name), C("bytes", strconv.FormatUint(size, 10)), C("cut_at_ns", strconv.FormatInt(cutAt.Nanoseconds(), 10)),
			C("fault_target", target).Show("cut link", target), C("transport_outcome", s.TransportOutcome).Show("outcome", s.TransportOutcome),
			C("fault_outcome", f.Outcome).Show("fault", f.Outcome), C("first_loss_ns", strconv.FormatInt(f.FirstLossNs, 10)),
			ns("detect_ns", "detect after cut (µs)", f.DetectNs), ns("bypass_ns", "bypass after cut (µs)", f.BypassNs),
			C("packets_lost", strconv.FormatUint(f.PacketsLost, 10)).Show("frames lost", strconv.FormatUint(f.PacketsLost, 10)),
			C("data_into_dead_link", strconv.FormatUint(f.DataIntoFail, 10)), C("qp_errors", strconv.Itoa(s.QPErrors)).Show("QP errors", strconv.Itoa(s.QPErrors)),
			C("timeouts", strconv.FormatUint(s.Timeouts, 10)).Show("timeouts", strconv.FormatUint(s.Timeouts, 10)),
			C("retransmissions", strconv.FormatUint(s.Retransmissions, 10)), C("verified", strconv.Itoa(s.Verified)),
			ns("job_ns", "job (µs)", s.JobNs), ns("baseline_ns", "baseline (µs)", s.BaselineNs), C("slowdown", f4(s.Slowdown)))
		env.logf("failover: %s: %s, fault %s, bypass %s\n", cell.name, s.TransportOutcome, f.Outcome, usOrNever(f.BypassNs))
	}
	res.Points = len(cells)
	// RoCE stalling (or erroring) is what the experiment shows, and its
	// check asserts it; MRC not completing is a failure.
	for _, c := range cells {
		if s := c.s; c.mrc && s.TransportOutcome != "completed" {
			res.Failed = append(res.Failed, fmt.Sprintf("%s (transfer %s, %d QP errors)", c.name, s.TransportOutcome, s.QPErrors))
		}
	}
	sortMarks(tp.Marks)
	res.Table, res.Plots = res.table.Text(), []Plot{tp}
	res.Files = []File{{Name: "events.jsonl", Data: logb.Bytes()}}
	res.Checks = append(res.Checks, failoverChecks(cells, prm)...)
	if r := cells[1]; r.s.TransportOutcome == "completed" {
		res.Notes += fmt.Sprintf("**The source-side cut under RoCE.** The source T0 owns that cable and withdraws it from its ECMP group at once (a switch sees its own cables; fabric.ecmpReconvergence delays only what it learns of the rest of the fabric), so RoCE rides it out: stalled %s, %d timeouts. TARGETS T7's \"stalls until routing reconverges\" is the destination-side cut, which its check tests.\n\n",
			durText(r.stall(prm).Round(time.Microsecond)), r.s.Timeouts)
	}
	return res, nil
}

// stall is how long the cell's flow received nothing after the cut: from
// the first empty sampling interval after the cut to the next that is not
// empty; a flow that never resumes stalls until its job ended (its QP's
// error) or the deadline. 0 when no interval after the cut was empty.
func (cell *foCell) stall(p foParams) time.Duration {
	iv := p.interval
	k0 := -1
	for k := int(p.cutAt / iv); k < len(cell.samples); k++ {
		if k0 < 0 && cell.samples[k] == 0 {
			k0 = k
		}
		if k0 >= 0 && cell.samples[k] > 0 {
			return time.Duration(k-k0) * iv
		}
	}
	if k0 < 0 {
		return 0
	}
	end := p.deadline
	if cell.s.JobNs > 0 {
		end = time.Duration(cell.s.JobNs)
	}
	return end - time.Duration(k0)*iv
}

// failoverChecks are T7's checks: MRC's bypass time for each cut and its
// QP's survival, RoCE's stall on the destination-side cut against the
// routing reconvergence and its retry budget. cells are MRC and RoCE for
// the source-side cut, then for the destination-side one.
func failoverChecks(cells []*foCell, p foParams) []Check {
	var cs []Check
	survived, survDetail := true, ""
	for _, mc := range cells {
		if !mc.mrc {
			continue
		}
		m, mf := mc.s, mc.s.Faults[0]
		bypass := math.NaN() // µs; not bypassed (or the cut missed the path): unmeasured
		if mf.Outcome == "bypassed" && mf.BypassNs >= 0 && mf.DataIntoFail > 0 {
			bypass = float64(mf.BypassNs) / 1e3
		}
		mDetail := fmt.Sprintf("MRC, %s: fault %s, detect %s, bypass %s, %d frames into the dead link, %d lost; transfer %s (%d/%d verified), %d QP errors, %d timeouts; slowdown %+.1f%%",
			mc.side, mf.Outcome, usOrNever(mf.DetectNs), usOrNever(mf.BypassNs), mf.DataIntoFail, mf.PacketsLost, m.TransportOutcome, m.Verified, m.Transfers, m.QPErrors, m.Timeouts, 100*m.Slowdown)
		cs = append(cs, bandCheck("T7", "MRC, "+mc.side+": traffic leaves the cut link within a few tens of µs (cut → last data frame into it)", "MRC bypasses the path in a few tens of microseconds",
			Between(0, 50, "µs", "\"a few tens of microseconds\": at most 50 µs"), bypass, mDetail))
		survived = survived && m.TransportOutcome == "completed" && m.QPErrors == 0 && m.Verified == m.Transfers
		if survDetail != "" {
			survDetail += "; "
		}
		survDetail += fmt.Sprintf("%s: transfer %s (%d/%d verified), %d QP errors", mc.side, m.TransportOutcome, m.Verified, m.Transfers, m.QPErrors)
	}
	cs = append(cs, holdsCheck("T7", "MRC: no QP failure; the transfer completes byte for byte (both cuts)", "… without QP failure",
		"\"without QP failure\" is yes or no", survived, survDetail))
	rc := cells[len(cells)-1] // RoCE, destination-side cut
	r, rf := rc.s, rc.s.Faults[0]
	// RoCE: the flow stalls until routing reconverges or its retries run
	// out, whichever comes first; the budget is the go-back-N timeouts
	// from the last acknowledgement before the cut to the QP's error.
	claim := fmt.Sprintf("RoCE (ECMP, reconvergence %s), destination-side cut: stalls until routing reconverges or its retries run out, whichever comes first", durText(p.reconverge))
	const expected = "RoCE stalls until routing reconverges or times out"
	if rc.timeout <= 0 {
		return append(cs, notTestable("T7", claim, expected, "the RoCE cell's timeout is unknown"))
	}
	budget := time.Duration(rc.retries+1) * rc.timeout
	want := min(p.reconverge, budget)
	st := rc.stall(p)
	how := "continued after routing reconverged"
	switch {
	case r.TransportOutcome == "qp_error":
		how = fmt.Sprintf("timed out: the QP failed after its %d retries (%s) before routing reconverged (%s)", rc.retries, durText(budget), durText(p.reconverge))
	case r.TransportOutcome == "stalled":
		how = fmt.Sprintf("still stalled at the deadline (%s)", durText(p.deadline))
	}
	rDetail := fmt.Sprintf("RoCE: stalled %s, %s; fault %s, %d frames lost; transfer %s, %d QP errors, %d timeouts, %d retransmissions",
		durText(st.Round(time.Microsecond)), how, rf.Outcome, rf.PacketsLost, r.TransportOutcome, r.QPErrors, r.Timeouts, r.Retransmissions)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return append(cs, bandCheck("T7", claim, expected,
		Between(ms(want-2*p.interval), ms(want+rc.timeout+2*p.interval), "ms", fmt.Sprintf(
			"min(reconvergence %s, retry budget (%d + 1) × %s timeout = %s); the stall can end up to one timeout after reconvergence (the next go-back-N retransmission), "+
				"and is sampled every %s", durText(p.reconverge), rc.retries, durText(rc.timeout), durText(budget), durText(p.interval))),
		ms(st), rDetail))
}
