package experiments

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// blastRadius is TARGETS T8: how much of the job's throughput one fault
// costs and which nodes and planes it touches, on 8 × 100G planes against
// 4 × 100G and one 800G plane. Every fault is a faults plan run by
// faults.Drill under a steady shift workload.
func init() {
	Register(&Experiment{
		Name:    "blast-radius",
		Title:   "blast radius of one fault: capacity lost and nodes/planes touched, 8×100G vs 4×100G vs 1×800G",
		Targets: []string{"T8"},
		// T8 measures capacity: the QP's window must fill an 800G NIC. The
		// spec's one MPR unit (128 PSNs) is ~0.55 BDP of 800G at this
		// fabric's RTT (one QP would reach ~59% of the NIC and losing a port
		// would cost it nothing); 4 units cover NSCC's 1.5-BDP window.
		// The NIC-side OSFP takes every port of a NIC down for longer than an
		// RTO: under the spec's one retry counter per connection every packet
		// in flight times out in that round and the QPs fail, which would end
		// the run before the window closes; T8 is about capacity, so it
		// counts retries per packet.
		Cluster: paperCluster(mrcSets(1, "transport.payload=elided", "transport.mrc.mprUnits=4", "transport.mrc.retryScope=packet")...),
		Params: []Param{
			{Key: "topologies", Default: "8x100G,4x100G,1x800G", Doc: "planes×link speed of each fabric (host and fabric links); each has 2 T0s per plane"},
			{Key: "t1s", Default: "32", Doc: "T1 switches per plane, and hosts per T0 (non-blocking: a T0 has as much uplink as host capacity); 32 is the paper's 0.4% = 1/(8 × 32)"},
			{Key: "bytes", Default: "1G", Doc: "bytes per flow: enough that no flow ends inside the window (the run stops at exp.to)"},
			{Key: "from", Default: "300us", Full: "500us", Doc: "start of the measuring window (virtual time; every fault starts at 0 and MRC's transient is over by ~250 µs)"},
			{Key: "to", Default: "1ms", Quick: "600us", Full: "2ms", Doc: "end of the measuring window, and of the run"},
		},
		Setup: blastRadiusSetup,
		Args:  Typed[brParams]{Read: readBr, Run: runBr},
	})
}

const blastRadiusSetup = `Each fabric is a two-tier Clos per plane: 2 T0s, exp.t1s T1s and exp.t1s
hosts under each T0 (uplink = host capacity), MRC with one QP per flow
spraying over every plane and T1 (uSID). A fault starts at 0 (a faults
plan run by faults.Drill) and stays; throughput is the bytes every host
NIC port received in the window [exp.from, exp.to] (the run stops at its
end), against the same window of a fault-free run of the same fabric and
workload. Each fault gets the workload that makes it a bottleneck (as the
faults package's T8 test): a T0–T1 cable (link_down
link:p0.t0.0-p0.t1.0, both directions) under every host sending to the
host n/2 away, across T1 (shift: the T0 uplinks carry the NIC rate); the
host-side faults under one flow from host 0, which each of them touches,
to the last host: one NIC port (nic_down nic:h0/p0), a T0-side OSFP
(optics osfp:p0.t0.0/0: host ports 0–7 of that T0, one plane of 8 nodes)
and a NIC-side OSFP (optics osfp:h0: every plane of one NIC). "Touches"
is what the fault's selector resolved to (nodes × NIC ports, planes).
"Ideal" is the capacity the fault removes: 1/(planes × T1s) for a T0–T1
cable under shift; for a flow, the share of min(ports up at source, at
destination) it loses. The job loses that share only where it is
capacity-bound (the check's detail gives the fault-free job's share of
line rate: below 100% a cable's share can be absorbed). The shift job's
rate on 8 × 100G depends on the seed's EV draws by about ±1%, steady
over milliseconds (docs/experiments.md): a longer window does not
shrink the seeds' spread of a cable's cost; the median is judged.`

// brTopo is one fabric shape: planes × speed.
type brTopo struct {
	name   string
	planes int
	speed  string
}

func parseTopos(s string) ([]brTopo, error) {
	var out []brTopo
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p, sp, ok := strings.Cut(f, "x")
		n, err := strconv.Atoi(p)
		_, serr := units.ParseSpeed(sp)
		if !ok || err != nil || n < 1 || n > 16 || serr != nil {
			return nil, fmt.Errorf("topology %q: must be PLANESxSPEED with 1 to 16 planes and a link speed, e.g. 8x100G", f)
		}
		out = append(out, brTopo{name: f, planes: n, speed: sp})
	}
	return out, nil
}

// brFault is one fault of the experiment, as a plan event.
// Its workload makes the faulted element the bottleneck: every host
// across T1 (shift) loads every T0 uplink; one flow from host 0 (which
// every host-side fault touches) to the last host measures a node.
type brFault struct {
	name, kind, target, workload string
}

var brFaults = []brFault{
	{"T0–T1 link", "link_down", "link:p0.t0.0-p0.t1.0", "shift"},
	{"NIC port", "nic_down", "nic:h0/p0", "p2p"},
	{"T0-side OSFP", "optics", "osfp:p0.t0.0/0", "p2p"},
	{"NIC-side OSFP", "optics", "osfp:h0", "p2p"},
}

// brRun is one run: the window's receive rate and what the fault touched.
type brRun struct {
	job     float64         // bits/s received by every host port
	touched map[int]int     // host → its NIC ports (planes) the fault takes
	planes  map[int]bool    // planes the fault's cables are in
	fabric  int             // fabric (switch–switch) cables in the fault
	targets []string        // the resolved cables
	s       *faults.Summary // the drill's summary
}

// brWorkload is the drill workload of a fault's measurement.
func brWorkload(name string, hosts int, size uint64) faults.Workload {
	if name == "p2p" {
		return faults.Workload{Pattern: "p2p", Src: 0, Dst: hosts - 1, Bytes: size}
	}
	return faults.Workload{Pattern: name, Bytes: size}
}

// brMeasure runs w on cfg under plan (nil: no fault) until to and returns
// the rate every host port received in [from, to].
func brMeasure(env *Env, cfg config.Config, plan *faults.Plan, w faults.Workload, from, to sim.Time, events *uint64) (*brRun, error) {
	r := &brRun{touched: map[int]int{}, planes: map[int]bool{}}
	var b0, b1 uint64
	var done bool
	var c *cluster.Cluster
	rx := func() (n uint64) {
		for _, hp := range c.Topo.HostPorts {
			for _, p := range hp {
				n += p.Counters.RxBytes
			}
		}
		return n
	}
	s, err := faults.Drill(cfg, faults.DrillOptions{Plan: plan, Deadline: time.Duration(to) + time.Microsecond, Workload: w, Parallel: env.Parallel,
		OnCluster: func(cl *cluster.Cluster) {
			c = cl
			env.Watch(cl)
			cl.Scheduler().At(from, func() { b0 = rx() })
			cl.Scheduler().At(to, func() { b1, done = rx(), true })
		},
		OnInjector: func(in *faults.Injector) {
			if plan != nil && len(plan.Events) > 0 {
				r.touch(c.Topo, in.Target(0))
			}
		}})
	if err != nil {
		return nil, err
	}
	*events += c.Executed()
	if !done {
		return nil, fmt.Errorf("the run ended at %v, before the window [%v, %v] closed", time.Duration(c.Now()), time.Duration(from), time.Duration(to))
	}
	if s.Completed > 0 {
		return nil, fmt.Errorf("%d flows completed by %v: exp.bytes too small for the window", s.Completed, time.Duration(to))
	}
	r.job, r.s = float64(b1-b0)*8/(float64(to-from)/1e9), s
	return r, nil
}

// touch records which host ports, planes and fabric cables t covers.
func (r *brRun) touch(topo *fabric.Topology, t *faults.Target) {
	hostOf := map[*fabric.Port][2]int{}
	for h, hp := range topo.HostPorts {
		for pl, p := range hp {
			hostOf[p] = [2]int{h, pl}
		}
	}
	for _, cb := range t.Cables {
		r.targets = append(r.targets, cb.Name())
		host := false
		for _, p := range []*fabric.Port{cb.A, cb.B} {
			if hp, ok := hostOf[p]; ok {
				r.touched[hp[0]]++
				r.planes[hp[1]] = true
				host = true
			} else if sw, ok := p.Owner.(*fabric.Switch); ok {
				r.planes[sw.Plane] = true
			}
		}
		if !host {
			r.fabric++
		}
	}
}

// brIdeal is the share of w's throughput the fault's capacity is: every
// flow keeps min(ports up at its source, at its destination)/planes of
// the NIC, and with every host sending across T1 (shift, uplinks as
// loaded as the NICs) a fabric cable between a T0 and a T1 costs
// 1/(planes × T1s) (that T0's uplinks, and the downlinks into it).
func brIdeal(r *brRun, w faults.Workload, hosts, planes, t1s int) float64 {
	keep := func(src, dst int) float64 {
		return float64(min(planes-r.touched[src], planes-r.touched[dst])) / float64(planes)
	}
	if w.Pattern == "p2p" {
		return 1 - keep(w.Src, w.Dst)
	}
	var all float64
	for s := 0; s < hosts; s++ {
		all += keep(s, (s+hosts/2)%hosts)
	}
	return 1 - all/float64(hosts) + float64(r.fabric)/float64(planes*t1s)
}

type brCell struct {
	topo      brTopo
	fault     brFault
	run, base *brRun
	lost      float64 // the workload's throughput lost
	ideal     float64
	lineBps   float64 // the workload's line rate: every host's NIC (shift) or one NIC (p2p)
}

// brParams are blast-radius's parameters: the fabrics, their T1 count
// (and hosts per T0), the bytes per flow and the measuring window.
type brParams struct {
	topos    []brTopo
	t1s      int
	size     uint64
	from, to sim.Time
}

func readBr(env *Env) (brParams, error) {
	r := newParamReader(env)
	var p brParams
	var err error
	if p.topos, err = parseTopos(env.Params["topologies"]); err != nil {
		r.bad("topologies", "%v", err)
	}
	p.t1s = r.integer("t1s", 8, 512, "a T0-side OSFP needs 8 hosts under a T0")
	p.size = r.size("bytes")
	ds := r.durations("from", "to")
	p.from, p.to = sim.Time(ds[0]), sim.Time(ds[1])
	if ds[0] > 0 && ds[1] > 0 && p.from >= p.to {
		r.bad("from", "%v is not before exp.to (%v); must be < exp.to", ds[0], ds[1])
	}
	return p, r.err()
}

func runBr(ctx context.Context, env *Env, p brParams) (*Results, error) {
	topos, t1s, size, from, to := p.topos, p.t1s, p.size, p.from, p.to
	hosts := 2 * t1s
	var logb bytes.Buffer
	res := &Results{}
	var cells []*brCell
	point, points := 0, len(topos)*(len(brFaults)+2)
	step := func(label string) {
		env.Point(point, points, label)
		point++
	}
	for _, tp := range topos {
		cfg, err := override(env.Config, []string{"fabric.topology=clos", "fabric.preset=", fmt.Sprintf("fabric.planes=%d", tp.planes),
			"fabric.hostLinkSpeed=" + tp.speed, "fabric.fabricLinkSpeed=" + tp.speed, "fabric.t0PerPlane=2",
			fmt.Sprintf("fabric.t1PerPlane=%d", t1s), fmt.Sprintf("fabric.hostsPerT0=%d", t1s), fmt.Sprintf("fabric.hosts=%d", hosts)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tp.name, err)
		}
		base := map[string]*brRun{}
		for _, f := range brFaults {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			w := brWorkload(f.workload, hosts, size)
			if base[f.workload] == nil {
				step(tp.name + ", no fault, " + f.workload)
				if base[f.workload], err = brMeasure(env, cfg, nil, w, from, to, &res.Events); err != nil {
					return nil, fmt.Errorf("%s, %s, no fault: %w", tp.name, f.workload, err)
				}
			}
			plan, err := faults.ParsePlan("blast-radius", []byte(fmt.Sprintf("events:\n  - {name: %q, at: 0, kind: %s, target: %q}\n", f.name, f.kind, f.target)))
			if err != nil {
				return nil, err
			}
			step(tp.name + ", " + f.name)
			run, err := brMeasure(env, cfg, plan, w, from, to, &res.Events)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", tp.name, f.name, err)
			}
			if err := encodeFaultLog(&logb, tp.name, f.name, run.s); err != nil {
				return nil, err
			}
			cell := &brCell{topo: tp, fault: f, run: run, base: base[f.workload], lost: 1 - run.job/base[f.workload].job, ideal: brIdeal(run, w, hosts, tp.planes, t1s),
				lineBps: float64(cfg.Fabric.HostLinkBps()) * float64(tp.planes)}
			if f.workload == "shift" {
				cell.lineBps *= float64(hosts)
			}
			cells = append(cells, cell)
			env.logf("blast-radius: %s: %s (%s): %.0f → %.0f Gb/s, lost %.2f%% (ideal %.2f%%)\n", tp.name, f.name, f.workload, cell.base.job/1e9, run.job/1e9, 100*cell.lost, 100*cell.ideal)
		}
	}
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "fabric\tfault\ttouches\tworkload\tthroughput, no fault → fault (Gb/s)\tlost (%%)\tideal (%%)\tQP errors\n")
	plot := Plot{Name: "capacity_lost", Title: fmt.Sprintf("throughput lost per fault (%d hosts, %d T1s per plane)", hosts, t1s),
		XLabel: "fault (workload: T0–T1 link: every host across T1; others: one flow from the touched host 0)", YLabel: "throughput lost (%)"}
	for _, f := range brFaults {
		plot.XLabels = append(plot.XLabels, f.name)
	}
	series := map[string]*Series{}
	res.Points = len(cells)
	for _, c := range cells {
		r := c.run
		// The run stops at exp.to with every flow still going (by design),
		// so only QP errors are failures here, not "stalled".
		if r.s.QPErrors > 0 {
			res.Failed = append(res.Failed, fmt.Sprintf("%s, %s (%d QP errors)", c.topo.name, c.fault.name, r.s.QPErrors))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.0f → %.0f\t%.2f\t%.2f\t%d\n", c.topo.name, c.fault.name, touches(r), c.fault.workload, c.base.job/1e9, r.job/1e9,
			100*c.lost, 100*c.ideal, r.s.QPErrors)
		res.Row(C("topology", c.topo.name), C("fault", c.fault.name), C("kind", c.fault.kind), C("selector", c.fault.target), C("workload", c.fault.workload), C("cables", strings.Join(r.targets, " ")), C("hosts_touched", strconv.Itoa(len(r.touched))), C("ports_per_host", portsPerHost(r.touched)), C("planes_touched", strconv.Itoa(len(r.planes))), C("gbps_before", f4(c.base.job/1e9)), C("gbps_after", f4(r.job/1e9)), C("lost_fraction", f4(c.lost)), C("lost_ideal_fraction", f4(c.ideal)), C("qp_errors", strconv.Itoa(r.s.QPErrors)), C("transport_outcome", r.s.TransportOutcome))
		s := series[c.topo.name]
		if s == nil {
			s = &Series{Name: c.topo.name}
			series[c.topo.name] = s
		}
		s.X, s.Y = append(s.X, float64(faultIndex(c.fault.name))), append(s.Y, 100*c.lost)
	}
	tw.Flush()
	for _, tp := range topos {
		if s := series[tp.name]; s != nil {
			plot.Series = append(plot.Series, *s)
		}
	}
	// The T0–T1 cable's share is too small to read on the same axis.
	lp := Plot{Name: "t0_t1_link_lost", Title: "one T0–T1 cable down: job throughput lost (every host across T1)",
		XLabel: "fabric (planes × link speed)", YLabel: "throughput lost (%)"}
	meas, ideal := Series{Name: "measured"}, Series{Name: "capacity removed: 1/(planes × T1s)"}
	for _, c := range cells {
		if c.fault.name == brFaults[0].name {
			x := float64(len(lp.XLabels))
			lp.XLabels = append(lp.XLabels, c.topo.name)
			meas.X, meas.Y = append(meas.X, x), append(meas.Y, 100*c.lost)
			ideal.X, ideal.Y = append(ideal.X, x), append(ideal.Y, 100*c.ideal)
		}
	}
	lp.Series = []Series{meas, ideal}
	res.Table, res.Plots = tb.String(), []Plot{plot, lp}
	res.Files = []File{{Name: "events.jsonl", Data: logb.Bytes()}}
	res.Notes = fmt.Sprintf("Window %s–%s of virtual time; %d hosts (2 T0s × %d) and %d T1s per plane. "+
		"shift: every host sends to the host n/2 away (under the other T0); p2p: host 0 → host %d. "+
		"\"touches\" is what the fault's selector resolved to; events.jsonl is the faults recorder's log of every faulted run; QP errors are the faulted run's (the run stops at the window's end, so flows are cut short, not failed). "+
		"The published setup: 8 × 100G planes with 32 T1s (1/256 = 0.39%%) against one 800G plane (1/32 = 3.1%%).",
		durText(time.Duration(from)), durText(time.Duration(to)), hosts, t1s, t1s, hosts-1)
	res.Checks = brChecks(cells, t1s)
	return res, nil
}

// touches says what a fault took: nodes × ports and planes, or fabric cables.
func touches(r *brRun) string {
	if len(r.touched) == 0 {
		return fmt.Sprintf("%d fabric cable%s in %d plane%s, no node", r.fabric, plural(r.fabric), len(r.planes), plural(len(r.planes)))
	}
	return fmt.Sprintf("%d node%s × %s, %d plane%s", len(r.touched), plural(len(r.touched)), portsPerHost(r.touched), len(r.planes), plural(len(r.planes)))
}

func faultIndex(name string) int {
	for i, f := range brFaults {
		if f.name == name {
			return i
		}
	}
	return -1
}

// portsPerHost is "1 port" or "8 ports" when every touched host lost the
// same number, else the sorted list.
func portsPerHost(t map[int]int) string {
	var ns []int
	for _, n := range t {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	if len(ns) == 0 {
		return "0 ports"
	}
	if ns[0] == ns[len(ns)-1] {
		return fmt.Sprintf("%d port%s", ns[0], plural(ns[0]))
	}
	return fmt.Sprint(ns)
}

// checks test T8 as published, each on the median of the seeds. The
// bands: a T0–T1 link's share is given to one digit (0.4%, 3%) and the
// two fabrics' shares are a factor 8 apart, so ±50% of the capacity
// removed; a port's share 1/planes is held half-way to the share of one
// plane more or fewer (so 1/8 is told from 1/7 and 1/9).
func brChecks(cells []*brCell, t1s int) []Check {
	get := func(topo, fault string) *brCell {
		for _, c := range cells {
			if c.topo.name == topo && c.fault.name == fault {
				return c
			}
		}
		return nil
	}
	// planeShare is the band of losing 1 of n ports: half-way to 1/(n+1)
	// and to 1/(n−1).
	planeShare := func(n int) *Band {
		x := 1 / float64(n)
		lo, hi := 100*(x+1/float64(n+1))/2, 100*(x+1/float64(n-1))/2
		return Between(lo, hi, "%", fmt.Sprintf("1/%d of the node's ports, told from one plane more or fewer: half-way to 1/%d and to 1/%d", n, n+1, n-1))
	}
	var cs []Check
	link := func(topo string, planes int, paper string) {
		c := get(topo, "T0–T1 link")
		if c == nil {
			return
		}
		ideal := 100 * c.ideal
		cs = append(cs, bandCheck("T8", fmt.Sprintf("one T0–T1 link, %s: the job loses 1/(planes × T1s) of its throughput", topo),
			fmt.Sprintf("%s (paper: 1/(%d × 32); here %d T1s: %.2f%%)", paper, planes, t1s, ideal),
			Around(ideal, 0.5, "%", "the paper gives one digit (0.4% vs 3%) and the two fabrics are a factor 8 apart: ±50% of the capacity removed tells them apart and from no loss"),
			100*c.lost,
			fmt.Sprintf("%.0f → %.0f Gb/s, lost %.2f%% (capacity removed %.2f%%); the fault-free job runs at %.1f%% of line rate; QP errors %d",
				c.base.job/1e9, c.run.job/1e9, 100*c.lost, ideal, 100*c.base.job/c.lineBps, c.run.s.QPErrors)))
	}
	link("8x100G", 8, "≈ 0.4% with 8 × 100G planes")
	link("1x800G", 1, "≈ 3% with one 800G plane")
	for _, tp := range []struct {
		name   string
		planes int
	}{{"8x100G", 8}, {"4x100G", 4}} {
		if a := get(tp.name, "NIC port"); a != nil {
			cs = append(cs, bandCheck("T8", fmt.Sprintf("one NIC port lost, %d planes: its node loses 1/planes of its throughput", tp.planes),
				fmt.Sprintf("%.1f%%", 100/float64(tp.planes)), planeShare(tp.planes), 100*a.lost,
				fmt.Sprintf("%s; %.0f → %.0f Gb/s, −%.2f%%", touches(a.run), a.base.job/1e9, a.run.job/1e9, 100*a.lost)))
		}
	}
	if a := get("8x100G", "T0-side OSFP"); a != nil {
		one := len(a.run.planes) == 1
		for _, n := range a.run.touched {
			one = one && n == 1
		}
		cs = append(cs,
			holdsCheck("T8", "a T0-side OSFP fault touches 8 nodes, one plane each", "8 nodes × 1 plane each",
				"a count the selector resolves to: exactly 8 nodes, each losing one port, all in one plane",
				len(a.run.touched) == 8 && one, touches(a.run)),
			bandCheck("T8", "a T0-side OSFP fault: a touched node keeps its other 7 planes (loses 1/8)", "each node keeps 7 of 8 planes running",
				planeShare(8), 100*a.lost, fmt.Sprintf("host 0: %.0f → %.0f Gb/s, −%.2f%%", a.base.job/1e9, a.run.job/1e9, 100*a.lost)))
	}
	if a := get("8x100G", "NIC-side OSFP"); a != nil {
		all := len(a.run.touched) == 1 && len(a.run.planes) == 8
		for _, n := range a.run.touched {
			all = all && n == 8
		}
		cs = append(cs,
			holdsCheck("T8", "a NIC-side OSFP fault touches every plane of one NIC", "all planes of one NIC",
				"a count the selector resolves to: one node, all 8 of its ports", all, touches(a.run)),
			bandCheck("T8", "a NIC-side OSFP fault: that node loses all its throughput", "all planes of one NIC down",
				AtLeast(99, "%", "no port of the NIC is up, so nothing reaches it: 1 point for frames counted at the window's edge"),
				100*a.lost, fmt.Sprintf("host 0: %.0f → %.0f Gb/s, −%.2f%%; QP errors %d (retries count per packet here)", a.base.job/1e9, a.run.job/1e9, 100*a.lost, a.run.s.QPErrors)))
	}
	return cs
}
