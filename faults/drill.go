package faults

import (
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// Workload is the traffic a drill runs under its plan.
type Workload struct {
	// Pattern: p2p (Src → Dst), shift (every host i → i + hosts/2: every
	// flow crosses the fabric) or alltoall (every host to every other).
	Pattern  string
	Src, Dst int
	Bytes    uint64 // per transfer
	Chunk    uint64 // work request size (default 1 MiB, at most Bytes)
}

// DrillOptions configure a drill.
type DrillOptions struct {
	Plan     *Plan
	Workload Workload
	// Mapper runs Clustermapper and the policy controller (uSID Clos
	// only; ignored otherwise).
	Mapper     bool
	MapperCfg  MapperConfig
	Period     time.Duration // controller period (default 1 s)
	Log        io.Writer     // event log, JSON lines (may be nil)
	Deadline   time.Duration // virtual-time cap (default 1 s)
	Baseline   bool          // also run the workload without faults, for the slowdown
	OnCluster  func(c *cluster.Cluster)
	OnInjector func(in *Injector)
	// Parallel is --parallel: 0 runs the classic single loop; N ≥ 1 the
	// partitioned cluster (cluster.NewForWorkers) on N goroutines, with
	// the plan, Clustermapper, the controller and the recorder acting as
	// global events between windows. The summary and the event log are
	// the same for every N ≥ 1 (and differ slightly from the classic
	// loop's: frames arriving together are ordered by link).
	Parallel int
	// Partitions, with Parallel ≥ 1, is the number of partitions (0:
	// cluster.NewForWorkers's choice, 4 per worker); results do not
	// depend on it either.
	Partitions int
}

// Summary is a drill's outcome.
type Summary struct {
	Transport        string         `json:"transport"`
	Forwarding       string         `json:"forwarding"`
	Faults           []*FaultReport `json:"faults"`
	Transfers        int            `json:"transfers"`
	Completed        int            `json:"completed"`
	Failed           int            `json:"failed"`  // a work request completed in error
	Stalled          int            `json:"stalled"` // not done by the deadline
	Verified         int            `json:"verified"`
	VerifyFailures   int            `json:"verify_failures"`
	Bytes            uint64         `json:"bytes"`
	JobNs            int64          `json:"job_ns"`
	BaselineNs       int64          `json:"baseline_ns"`
	Slowdown         float64        `json:"slowdown"` // job / baseline time - 1
	Retransmissions  uint64         `json:"retransmissions"`
	RetransmitBytes  uint64         `json:"retransmit_bytes"` // retransmissions × PMTU payload
	Timeouts         uint64         `json:"timeouts"`
	QPErrors         int            `json:"qp_errors"`
	ProbesSent       uint64         `json:"probes_sent"`
	ProbesLost       uint64         `json:"probes_lost"`
	Findings         []string       `json:"findings"`
	Denylist         []string       `json:"denylist"`
	TransportOutcome string         `json:"transport_outcome"` // completed | qp_error | stalled
	Entries          []Entry        `json:"-"`
}

type job struct {
	trs   []*cluster.Transfer
	pairs []cluster.Pair
}

func (j *job) done() bool {
	for _, t := range j.trs {
		if !t.Done() {
			return false
		}
	}
	return true
}

func fill(seed uint64) func([]byte) {
	return func(b []byte) {
		r := sim.NewFastRand(seed, "drill/payload")
		for i := 0; i+8 <= len(b); i += 8 {
			v := r.Uint64()
			for k := 0; k < 8; k++ {
				b[i+k] = byte(v >> (8 * k))
			}
		}
	}
}

func startJob(c *cluster.Cluster, w Workload, connect func(a, b int) ([]cluster.Pair, error)) (*job, error) {
	n := len(c.Hosts)
	var pairs [][2]int
	switch w.Pattern {
	case "", "p2p":
		pairs = [][2]int{{w.Src, w.Dst}}
	case "shift":
		for i := 0; i < n; i++ {
			pairs = append(pairs, [2]int{i, (i + n/2) % n})
		}
	case "alltoall":
		for i := 0; i < n; i++ {
			for k := 1; k < n; k++ {
				pairs = append(pairs, [2]int{i, (i + k) % n})
			}
		}
	default:
		return nil, fmt.Errorf("workload: unknown pattern %q (want p2p, shift, alltoall)", w.Pattern)
	}
	chunk := w.Chunk
	if chunk == 0 {
		chunk = 1 << 20
	}
	chunk = min(chunk, w.Bytes)
	j := &job{}
	for i, p := range pairs {
		ps, err := connect(p[0], p[1])
		if err != nil {
			return nil, err
		}
		per := w.Bytes / uint64(len(ps))
		for k, pr := range ps {
			src := c.Region(p[0], per, fill(uint64(i*64+k+1)))
			dst := c.Region(p[1], per, nil)
			tr, err := c.StartTransfer(pr, src, dst, per, min(chunk, per))
			if err != nil {
				return nil, err
			}
			j.trs = append(j.trs, tr)
			j.pairs = append(j.pairs, pr)
		}
	}
	return j, nil
}

// runJob runs the cluster until the job is done or the deadline passes
// (partitioned: checked between windows).
func runJob(c *cluster.Cluster, j *job, deadline sim.Time) {
	c.RunWhile(func() bool { return !j.done() && c.Now() < deadline })
}

// Drill builds the cluster cfg describes, starts the workload and the
// plan (and Clustermapper with the controller), runs until the workload is
// done (or the deadline) and every fault of the plan has ended, and
// returns the summary. Every completed transfer is compared byte for byte
// (with transport.payload=real).
func Drill(cfg config.Config, o DrillOptions) (*Summary, error) {
	if o.Deadline == 0 {
		o.Deadline = time.Second
	}
	if o.Workload.Bytes == 0 {
		o.Workload.Bytes = 4 << 20
	}
	build := func() (*cluster.Cluster, error) {
		if o.Parallel > 0 && o.Partitions > 0 {
			return cluster.NewPartitioned(cfg, o.Partitions, o.Parallel)
		}
		return cluster.NewForWorkers(cfg, o.Parallel)
	}
	var base time.Duration
	if o.Baseline {
		c, err := build()
		if err != nil {
			return nil, err
		}
		j, err := startJob(c, o.Workload, c.Connect)
		if err != nil {
			c.Close()
			return nil, err
		}
		runJob(c, j, sim.Time(o.Deadline))
		if j.done() {
			base = time.Duration(jobEnd(j))
		}
		c.Close()
	}
	c, err := build()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if o.OnCluster != nil {
		o.OnCluster(c)
	}
	sched := c.Scheduler()
	rec := NewRecorder(sched, o.Log)
	plan := o.Plan
	if plan == nil {
		plan = &Plan{}
	}
	in, err := NewInjector(c.Topo, sched, plan, cfg.Seed, rec)
	if err != nil {
		return nil, err
	}
	if o.OnInjector != nil {
		o.OnInjector(in)
	}
	var m *Mapper
	var ct *Controller
	connect := c.Connect
	if o.Mapper && c.Topo.Kind == "clos" && c.Topo.Mode == fabric.ForwardUSID {
		m, err = NewMapper(c.Topo, sched, o.MapperCfg, rec)
		if err != nil {
			return nil, err
		}
		m.Pool = c.HostPool
		ct = NewController(c, m, rec)
		if o.Period > 0 {
			ct.Period = o.Period
		}
		connect = ct.Connect
		m.Start()
		ct.Start()
	}
	j, err := startJob(c, o.Workload, connect)
	if err != nil {
		return nil, err
	}
	for _, p := range j.pairs {
		rec.Watch(p.A.T)
	}
	in.Start()
	deadline := sim.Time(o.Deadline)
	runJob(c, j, deadline)
	// Let every fault that ends end (its undo is part of the drill).
	var last time.Duration
	for _, ev := range plan.Events {
		last = max(last, ev.End(), ev.At)
	}
	if t := min(sim.Time(last)+1, deadline); t > c.Now() {
		c.RunUntil(t)
	}
	rec.Finish()
	if m != nil {
		m.Stop()
		ct.Stop()
	}
	s := &Summary{Transport: cfg.Transport.Kind, Forwarding: c.Topo.Mode.String(), Faults: rec.Faults, Entries: rec.Entries}
	real := cfg.Transport.Payload == config.PayloadReal
	for i, tr := range j.trs {
		s.Transfers++
		s.Bytes += tr.Length
		st := j.pairs[i].A.T.Stats()
		s.Retransmissions += st.Retransmissions
		s.Timeouts += st.Timeouts
		if j.pairs[i].A.T.State() == verbs.QPError {
			s.QPErrors++
		}
		switch {
		case !tr.Done():
			s.Stalled++
		case len(tr.Errors) > 0:
			s.Failed++
		default:
			s.Completed++
			if real {
				if bytes.Equal(tr.Src.Buf, tr.Dst.Buf) {
					s.Verified++
				} else {
					s.VerifyFailures++
				}
			}
		}
	}
	s.RetransmitBytes = s.Retransmissions * 4096
	if j.done() {
		s.JobNs = jobEnd(j)
	}
	s.BaselineNs = int64(base)
	if base > 0 && s.JobNs > 0 {
		s.Slowdown = float64(s.JobNs)/float64(base) - 1
	}
	switch {
	case s.QPErrors > 0 || s.Failed > 0:
		s.TransportOutcome = "qp_error"
	case s.Stalled > 0:
		s.TransportOutcome = "stalled"
	default:
		s.TransportOutcome = "completed"
	}
	if m != nil {
		s.ProbesSent, s.ProbesLost = m.Sent, m.Lost
		for _, f := range m.Findings() {
			s.Findings = append(s.Findings, f.String())
		}
		s.Denylist = ct.Denylist()
	}
	return s, rec.Err()
}

func jobEnd(j *job) int64 {
	var end sim.Time
	for _, t := range j.trs {
		end = max(end, t.End, t.RecvImmAt)
	}
	return int64(end)
}

// WriteSummary prints the summary for people.
func (s *Summary) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "transport  %s, forwarding %s\n", s.Transport, s.Forwarding)
	fmt.Fprintf(w, "job        %d transfers, %d completed (%d verified byte for byte, %d corrupted), %d failed, %d stalled → %s\n",
		s.Transfers, s.Completed, s.Verified, s.VerifyFailures, s.Failed, s.Stalled, s.TransportOutcome)
	if s.JobNs > 0 {
		fmt.Fprintf(w, "time       %v", time.Duration(s.JobNs))
		if s.BaselineNs > 0 {
			fmt.Fprintf(w, " (baseline %v, slowdown %+.1f%%)", time.Duration(s.BaselineNs), 100*s.Slowdown)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "transport  %d retransmissions (%d bytes), %d timeouts, %d QPs in error\n", s.Retransmissions, s.RetransmitBytes, s.Timeouts, s.QPErrors)
	if s.ProbesSent > 0 {
		fmt.Fprintf(w, "probes     %d sent, %d lost; findings %v; denylist %v\n", s.ProbesSent, s.ProbesLost, s.Findings, s.Denylist)
	}
	if len(s.Faults) > 0 {
		fmt.Fprintln(w, "faults (times from each fault's start; detect* = by Clustermapper):")
		WriteTable(w, s.Faults)
	}
}
