package faults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
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
	Mapper    bool
	MapperCfg MapperConfig
	Period    time.Duration // controller period (default 1 s)
	Log       io.Writer     // event log, JSON lines (may be nil)
	Deadline  time.Duration // virtual-time cap (default 1 s)
	Baseline  bool          // also run the workload without faults, for the slowdown
	OnCluster func(c *cluster.Cluster)
	// OnBaseline, if set, is called with the fault-free baseline's cluster
	// (Baseline) before it runs, as OnCluster is with the faulted one: an
	// observer can count and capture both.
	OnBaseline func(c *cluster.Cluster)
	OnInjector func(in *Injector)
	// Parallel is --parallel: 0 runs the classic single loop; N ≥ 1 the
	// partitioned cluster (cluster.NewForWorkers) on N goroutines, with
	// the plan, Clustermapper, the controller and the recorder acting as
	// global events between windows. The summary and the event log are
	// the same for every N, the classic loop's (0) included: every loop
	// orders frames arriving together by link rank.
	Parallel int
	// Partitions, with Parallel ≥ 1, is the number of partitions (0:
	// cluster.NewForWorkers's choice, 4 per worker); results do not
	// depend on it either.
	Partitions int
	// HoldUntilPlanEnd keeps the workload running until the plan's last
	// fault is over: whenever every transfer is done before then, the
	// same transfers start again (a round), so every fault is judged
	// under traffic. Off (the default), the job runs once and a fault
	// starting after it ended is reported after_job_end.
	HoldUntilPlanEnd bool
}

// Summary is a drill's outcome.
type Summary struct {
	Transport        string         `json:"transport"`
	Forwarding       string         `json:"forwarding"`
	Faults           []*FaultReport `json:"faults"`
	Transfers        int            `json:"transfers"`
	Completed        int            `json:"completed"`
	FailedTransfers  int            `json:"failed"`  // a work request completed in error
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
	// QPErrorPeers names the pairs whose QPs failed: "h3↔h7 (retry
	// limit)".
	QPErrorPeers []string `json:"qp_error_peers,omitempty"`
	Rounds       int      `json:"rounds"`     // times the workload ran (HoldUntilPlanEnd: ≥ 1)
	JobEndNs     int64    `json:"job_end_ns"` // absolute virtual time the workload ended; 0: not done
	DeadlineNs   int64    `json:"deadline_ns"`
	// AfterJobEnd counts faults that started after the workload ended
	// (outcome after_job_end).
	AfterJobEnd int `json:"after_job_end"`
	// Mapper says whether Clustermapper ran, and why not when it did not.
	Mapper  string  `json:"mapper"`
	Entries []Entry `json:"-"`
}

type job struct {
	trs   []*cluster.Transfer
	pairs []cluster.Pair
	// all holds every round's transfers (HoldUntilPlanEnd); trs the
	// current round's.
	all    []*cluster.Transfer
	rounds int
	// real: payloads are real, so completed transfers are compared byte
	// for byte (verified or corrupted).
	real                bool
	verified, corrupted int
}

// verify compares every transfer of trs that completed without error.
func (j *job) verify(trs []*cluster.Transfer) {
	for _, t := range trs {
		if !t.Done() || len(t.Errors) > 0 {
			continue
		}
		if bytes.Equal(t.Src.Buf, t.Dst.Buf) {
			j.verified++
		} else {
			j.corrupted++
		}
	}
}

// again starts another round: the same transfers on the same QPs and
// memory regions.
func (j *job) again(c *cluster.Cluster) error {
	if j.real {
		j.verify(j.trs)
	}
	next := make([]*cluster.Transfer, len(j.trs))
	for i, t := range j.trs {
		clear(t.Dst.Buf) // so this round's verification proves this round's bytes
		tr, err := c.StartTransfer(t.Pair, t.Src, t.Dst, t.Length, t.Chunk)
		if err != nil {
			return err
		}
		next[i] = tr
	}
	j.trs = next
	j.all = append(j.all, next...)
	j.rounds++
	return nil
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

// WorkloadPatterns are the drill workloads' patterns (Workload.Pattern).
var WorkloadPatterns = []string{"p2p", "shift", "alltoall"}

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
	j.all = append(j.all, j.trs...)
	j.rounds = 1
	j.real = c.Config.Transport.Payload == config.PayloadReal
	return j, nil
}

// runJob runs the cluster until the job is done or the deadline passes
// (partitioned: checked between windows); with hold > 0 it starts the
// job again while it finishes before hold.
func runJob(c *cluster.Cluster, j *job, deadline, hold sim.Time) error {
	for {
		c.RunWhile(func() bool { return !j.done() && c.Now() < deadline })
		if !j.done() || c.Now() >= hold || c.Now() >= deadline {
			return nil
		}
		if err := j.again(c); err != nil {
			return err
		}
	}
}

// Drill builds the cluster cfg describes, starts the workload and the
// plan (and Clustermapper with the controller), runs until the workload is
// done (or the deadline) and every fault of the plan has ended, and
// returns the summary. The plan is resolved against the fabric before
// anything runs (the baseline too): a bad plan returns Errors with every
// problem. Every completed transfer is compared byte for byte (with
// transport.payload=real).
func Drill(cfg config.Config, o DrillOptions) (*Summary, error) {
	if o.Deadline == 0 {
		o.Deadline = time.Second
	}
	if o.Workload.Bytes == 0 {
		o.Workload.Bytes = 4 << 20
	}
	plan := o.Plan
	if plan == nil {
		plan = &Plan{}
	}
	build := func() (*cluster.Cluster, error) {
		if o.Parallel > 0 && o.Partitions > 0 {
			return cluster.NewPartitioned(cfg, o.Partitions, o.Parallel)
		}
		return cluster.NewForWorkers(cfg, o.Parallel)
	}
	// The last fault's end (or start, for one that lasts to the end of
	// the run): the drill runs at least until then.
	var last time.Duration
	for _, ev := range plan.Events {
		last = max(last, ev.End(), ev.At)
	}
	var hold sim.Time
	if o.HoldUntilPlanEnd {
		hold = sim.Time(last)
	}
	deadline := sim.Time(o.Deadline)
	var base time.Duration
	if o.Baseline {
		c, err := build()
		if err != nil {
			return nil, err
		}
		if o.OnBaseline != nil {
			o.OnBaseline(c)
		}
		if _, err := plan.Resolve(c.Topo, cfg.Seed); err != nil {
			c.Close()
			return nil, err
		}
		j, err := startJob(c, o.Workload, c.Connect)
		if err != nil {
			c.Close()
			return nil, err
		}
		if err := runJob(c, j, deadline, 0); err != nil {
			c.Close()
			return nil, err
		}
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
	mapperNote := mapperStatus(cfg, c.Topo, o.Mapper)
	if mapperNote == "" {
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
		mapperNote = "ran"
	}
	j, err := startJob(c, o.Workload, connect)
	if err != nil {
		return nil, err
	}
	rec.WatchPairs(j.pairs...)
	in.Start()
	if err := runJob(c, j, deadline, hold); err != nil {
		return nil, err
	}
	if j.done() {
		rec.JobEnd = sim.Time(jobEnd(j))
	}
	// Let every fault that ends end (its undo is part of the drill).
	if t := min(sim.Time(last)+1, deadline); t > c.Now() {
		c.RunUntil(t)
	}
	rec.Finish()
	if m != nil {
		m.Stop()
		ct.Stop()
	}
	s := &Summary{Transport: cfg.Transport.Kind, Forwarding: c.Topo.Mode.String(), Faults: rec.Faults, Entries: rec.Entries,
		Rounds: j.rounds, DeadlineNs: int64(deadline), Mapper: mapperNote}
	real := cfg.Transport.Payload == config.PayloadReal
	for _, tr := range j.all {
		s.Transfers++
		s.Bytes += tr.Length
		switch {
		case !tr.Done():
			s.Stalled++
		case len(tr.Errors) > 0:
			s.FailedTransfers++
		default:
			s.Completed++
		}
	}
	if real {
		j.verify(j.trs) // the earlier rounds were checked before the next started
		s.Verified, s.VerifyFailures = j.verified, j.corrupted
	}
	for i, p := range j.pairs {
		st := p.A.T.Stats()
		s.Retransmissions += st.Retransmissions
		s.Timeouts += st.Timeouts
		if p.A.T.State() == verbs.QPError || p.B.T.State() == verbs.QPError {
			s.QPErrors++
			s.QPErrorPeers = append(s.QPErrorPeers, fmt.Sprintf("h%d↔h%d (%s)", p.A.Host, p.B.Host, qpErrorReason(j, i)))
		}
	}
	s.RetransmitBytes = s.Retransmissions * 4096
	if j.done() {
		s.JobNs = jobEnd(j)
		s.JobEndNs = s.JobNs
	}
	s.BaselineNs = int64(base)
	if base > 0 && s.JobNs > 0 {
		// Rounds run back to back: fault-free they would take rounds ×
		// the baseline.
		s.Slowdown = float64(s.JobNs)/float64(int64(base)*int64(j.rounds)) - 1
	}
	switch {
	case s.QPErrors > 0 || s.FailedTransfers > 0:
		s.TransportOutcome = "qp_error"
	case s.Stalled > 0:
		s.TransportOutcome = "stalled"
	default:
		s.TransportOutcome = "completed"
	}
	for _, f := range s.Faults {
		if f.Outcome == "after_job_end" {
			s.AfterJobEnd++
		}
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

// CheckPlan checks p against the fabric cfg describes (the fabric alone is
// built, no hosts) and returns every problem of the plan at once, sorted
// by line: ParsePlan's (unknown or duplicate keys, bad values, parameters
// out of range) and Resolve's (names the fabric lacks, a kind given the
// wrong element, black_hole without uSID) — nil when it is good. Call it
// with the plan ParsePlan returned even when ParsePlan reported problems.
func CheckPlan(cfg config.Config, p *Plan) error {
	topo, err := cluster.BuildTopology(sim.NewLoop(sim.Options{Seed: cfg.Seed}), cfg)
	if err != nil {
		return err
	}
	_, err = p.Resolve(topo, cfg.Seed)
	return err
}

// mapperStatus returns "" when Clustermapper can run, else why it does not.
func mapperStatus(cfg config.Config, topo *fabric.Topology, want bool) string {
	switch {
	case !want:
		return "off (not requested)"
	case topo.Kind != fabric.KindClos:
		return fmt.Sprintf("did not run: it probes Clos fabrics only (this is a %s)", topo.Kind)
	case topo.Mode != fabric.ForwardUSID:
		return fmt.Sprintf("did not run: its probes are SRv6 uSID loopback paths, and this fabric forwards by %s (fabric.forwarding=usid)", topo.Mode)
	}
	return ""
}

// qpErrorReason says why pair i's QPs failed: the first error completion
// that is not a flush, else the QP's state.
func qpErrorReason(j *job, i int) string {
	for _, tr := range j.all {
		if tr.Pair.A.T != j.pairs[i].A.T {
			continue
		}
		for _, e := range tr.Errors {
			if e.Status != verbs.StatusFlushed {
				return statusReason(e.Status)
			}
		}
	}
	if j.pairs[i].A.T.State() != verbs.QPError {
		return "responder QP in error"
	}
	return "QP in error"
}

func statusReason(s verbs.Status) string {
	switch s {
	case verbs.StatusRetryExceeded:
		return "retry limit"
	case verbs.StatusRemoteAccess:
		return "remote access error"
	case verbs.StatusLocalAccess:
		return "local access error"
	case verbs.StatusRemoteOp:
		return "remote operation error"
	}
	return s.String()
}

func jobEnd(j *job) int64 {
	var end sim.Time
	for _, t := range j.trs {
		end = max(end, t.End, t.RecvImmAt)
	}
	return int64(end)
}

// Failed reports whether the drill failed: nil when every transfer
// completed, byte for byte where checked, with no QP in error; otherwise an
// error saying what failed ("job stalled: 3 of 16 transfers incomplete at
// deadline 50ms; 2 QPs in error: h3↔h7 (retry limit), …").
func (s *Summary) Failed() error {
	var why []string
	if s.Stalled > 0 {
		why = append(why, fmt.Sprintf("job stalled: %d of %d transfers incomplete at deadline %v", s.Stalled, s.Transfers, time.Duration(s.DeadlineNs)))
	}
	if s.FailedTransfers > 0 {
		why = append(why, fmt.Sprintf("%d of %d transfers completed in error", s.FailedTransfers, s.Transfers))
	}
	if s.QPErrors > 0 {
		why = append(why, fmt.Sprintf("%d QPs in error: %s", s.QPErrors, strings.Join(s.QPErrorPeers, ", ")))
	}
	if s.VerifyFailures > 0 {
		why = append(why, fmt.Sprintf("%d transfers delivered wrong bytes", s.VerifyFailures))
	}
	if len(why) == 0 {
		return nil
	}
	return errors.New(strings.Join(why, "; "))
}

// WriteSummary prints the summary for people.
func (s *Summary) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "transport  %s, forwarding %s\n", s.Transport, s.Forwarding)
	rounds := ""
	if s.Rounds > 1 {
		rounds = fmt.Sprintf(" in %d rounds", s.Rounds)
	}
	fmt.Fprintf(w, "job        %d transfers%s, %d completed (%d verified byte for byte, %d corrupted), %d failed, %d stalled → %s\n",
		s.Transfers, rounds, s.Completed, s.Verified, s.VerifyFailures, s.FailedTransfers, s.Stalled, s.TransportOutcome)
	if s.JobNs > 0 {
		fmt.Fprintf(w, "time       %v", time.Duration(s.JobNs))
		if s.BaselineNs > 0 {
			fmt.Fprintf(w, " (baseline %v, slowdown %+.1f%%)", time.Duration(s.BaselineNs), 100*s.Slowdown)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "transport  %d retransmissions (%d bytes), %d timeouts, %d QPs in error\n", s.Retransmissions, s.RetransmitBytes, s.Timeouts, s.QPErrors)
	if len(s.QPErrorPeers) > 0 {
		fmt.Fprintf(w, "qp errors  %s\n", strings.Join(s.QPErrorPeers, ", "))
	}
	if strings.HasPrefix(s.Mapper, "did not run") {
		fmt.Fprintf(w, "mapper     Clustermapper %s\n", s.Mapper)
	}
	if s.ProbesSent > 0 {
		fmt.Fprintf(w, "probes     %d sent, %d lost; findings %v; denylist %v\n", s.ProbesSent, s.ProbesLost, s.Findings, s.Denylist)
	}
	if s.AfterJobEnd > 0 {
		fmt.Fprintf(w, "note       %d of %d faults started after the job ended at %v: outcome after_job_end, not judged (HoldUntilPlanEnd keeps the workload running)\n",
			s.AfterJobEnd, len(s.Faults), time.Duration(s.JobEndNs))
	}
	if len(s.Faults) > 0 {
		fmt.Fprintln(w, "faults (start: virtual time; the other times from each fault's start; detect* = by Clustermapper):")
		WriteTable(w, s.Faults)
	}
}
