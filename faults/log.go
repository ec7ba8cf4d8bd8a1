package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// Entry is one line of the event log.
type Entry struct {
	T      int64    `json:"t_ns"`
	Time   string   `json:"t"`
	Event  string   `json:"event"`
	Fault  *int     `json:"fault,omitempty"`
	Kind   string   `json:"kind,omitempty"`
	Target []string `json:"target,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Value  float64  `json:"value,omitempty"`
}

// FaultReport is what happened around one fault. StartNs and EndNs are
// absolute virtual times (the event log's t_ns basis); the other times are
// offsets from the fault's start (JSON names *_after_ns); -1 means never.
type FaultReport struct {
	Index   int      `json:"index"`
	Label   string   `json:"label"`
	Kind    string   `json:"kind"`
	Targets []string `json:"targets"`
	StartNs int64    `json:"start_ns"`
	EndNs   int64    `json:"end_ns"` // -1: still active when the run ended

	FirstLossNs  int64  `json:"first_loss_after_ns"` // first frame lost at the fault
	DetectNs     int64  `json:"detect_after_ns"`     // first loss seen by a transport or a probe
	DetectBy     string `json:"detect_by"`           // transport | clustermapper
	BypassNs     int64  `json:"bypass_after_ns"`     // last data frame into the fault (traffic moved off it)
	LocateNs     int64  `json:"locate_after_ns"`     // Clustermapper named the right element
	DenyNs       int64  `json:"deny_after_ns"`       // the controller pushed a denylist covering it
	PacketsLost  uint64 `json:"packets_lost"`        // frames dropped at the faulted elements
	DataIntoFail uint64 `json:"data_into_fail"`      // data frames sent into a hard-failed element
	QPErrors     int    `json:"qp_errors"`
	// Outcome: bypassed | not_bypassed | stalled | qp_error | no_traffic |
	// no_loss | after_job_end | n/a (see Recorder.Finish).
	Outcome string `json:"outcome"`

	// The affected traffic (the watched pairs with an end on a host the
	// fault touches; every pair when it touches none): bytes placed by
	// their responders, sampled, for the progress rule of Finish.
	affected       []int
	placed0        uint64
	placedAtInto   uint64
	lastProgress   sim.Time
	lastPlaced     uint64
	placedEnd      uint64
	outstandingEnd uint64

	keys       map[string]bool
	hard       bool
	start      sim.Time
	lossFn     func() uint64
	intoFn     func() uint64
	loss0      uint64
	into0      uint64
	lastInto   uint64
	lastIntoAt sim.Time
	ended      bool
	endAt      sim.Time
}

// Recorder keeps the event log and measures every fault: it samples the
// faulted elements' counters and the watched QPs' statistics, finely
// (Fine) for FineWindow after each injection and coarsely (Coarse) while
// any fault is active. It runs on a sim.Scheduler (the classic loop, or a
// partitioned cluster's global events: cluster.Scheduler), so it reads
// counters and QPs with every partition stopped.
type Recorder struct {
	Sched      sim.Scheduler
	W          io.Writer // JSON lines; nil keeps them in Entries only
	Entries    []Entry
	Faults     []*FaultReport
	Fine       time.Duration
	FineWindow time.Duration
	Coarse     time.Duration

	// JobEnd, when set (the drill sets it once the workload is done), is
	// when the traffic ended: a fault starting at or after it is reported
	// after_job_end, and no fault is judged on the idle fabric after it.
	JobEnd sim.Time

	qps       []verbs.Transport
	pairs     []cluster.Pair
	qpErr     map[verbs.Transport]bool
	qpErrAt   map[verbs.Transport]sim.Time
	retx      uint64
	evOut     int
	evBuf     []verbs.PathChange
	lastInj   sim.Time
	sampling  bool
	stopped   bool
	ticks     uint64
	encodeErr error
	enc       *json.Encoder
}

// NewRecorder returns a recorder writing JSON lines to w (may be nil),
// sampling on s (cluster.Scheduler).
func NewRecorder(s sim.Scheduler, w io.Writer) *Recorder {
	return &Recorder{Sched: s, W: w, Fine: time.Microsecond, FineWindow: 2 * time.Millisecond, Coarse: 50 * time.Microsecond,
		qpErr: map[verbs.Transport]bool{}, qpErrAt: map[verbs.Transport]sim.Time{}}
}

// Watch adds QPs whose statistics count as the transports' view.
func (r *Recorder) Watch(ts ...verbs.Transport) { r.qps = append(r.qps, ts...) }

// WatchPairs watches the requester QPs of pairs (as Watch) and keeps the
// pairs, so that each fault's outcome follows from the traffic it affects
// actually delivered (Finish). Watch pairs before the first fault starts.
func (r *Recorder) WatchPairs(ps ...cluster.Pair) {
	for _, p := range ps {
		r.qps = append(r.qps, p.A.T)
	}
	r.pairs = append(r.pairs, ps...)
}

// affectedPairs are the watched pairs with an end on a host t touches (a
// host end of a cable, a NIC port, a host under a faulted T0); every pair
// when t touches no host (a T0–T1 cable, a T1).
func (r *Recorder) affectedPairs(t *Target) []int {
	hosts := map[int]bool{}
	addPort := func(p *fabric.Port) {
		if p == nil {
			return
		}
		if h, ok := portHost(p.Name); ok {
			hosts[h] = true
		}
	}
	for _, c := range t.Cables {
		addPort(c.A)
		addPort(c.B)
	}
	for _, p := range t.NICPorts {
		addPort(p)
	}
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			addPort(p.Peer)
		}
	}
	var out []int
	for i, p := range r.pairs {
		if len(hosts) == 0 || hosts[p.A.Host] || hosts[p.B.Host] {
			out = append(out, i)
		}
	}
	return out
}

// portHost returns the host of a host port name ("h3/p1").
func portHost(name string) (int, bool) {
	h, _, ok := strings.Cut(name, "/")
	if !ok {
		return 0, false
	}
	return hostIndex(h)
}

// placed is the bytes the responders of pairs placed so far; outstanding
// the bytes their requesters posted and have not completed.
func (r *Recorder) placed(pairs []int) (placed, outstanding uint64) {
	for _, i := range pairs {
		p := r.pairs[i]
		placed += p.B.T.Stats().BytesPlaced
		a := p.A.T.Stats()
		if a.BytesPosted > a.BytesCompleted {
			outstanding += a.BytesPosted - a.BytesCompleted
		}
	}
	return
}

// Log appends an entry at the current virtual time.
func (r *Recorder) Log(e Entry) {
	now := r.Sched.Now()
	e.T, e.Time = int64(now), time.Duration(now).String()
	r.Entries = append(r.Entries, e)
	if r.W != nil {
		if r.enc == nil {
			r.enc = json.NewEncoder(r.W)
			r.enc.SetEscapeHTML(false)
		}
		if err := r.enc.Encode(e); err != nil && r.encodeErr == nil {
			r.encodeErr = err
		}
	}
}

// Err reports the first error writing the log.
func (r *Recorder) Err() error { return r.encodeErr }

func ip(i int) *int { return &i }

func (r *Recorder) note(i int, what string, t []string) {
	r.Log(Entry{Event: what, Fault: ip(i), Target: t})
}

func hardKind(k Kind) bool {
	switch k {
	case LinkDown, LinkFlap, Optics, NICDown, SwitchDown, SwitchReboot, PlaneDown:
		return true
	}
	return false
}

func (r *Recorder) injected(i int, ev *Event, t *Target) {
	names := t.Names()
	r.Log(Entry{Event: "inject", Fault: ip(i), Kind: string(ev.Kind), Target: names, Detail: paramString(ev)})
	fr := &FaultReport{Index: i, Label: ev.Label(), Kind: string(ev.Kind), Targets: names, start: r.Sched.Now(), StartNs: int64(r.Sched.Now()),
		EndNs: -1, FirstLossNs: -1, DetectNs: -1, BypassNs: -1, LocateNs: -1, DenyNs: -1, hard: hardKind(ev.Kind), keys: map[string]bool{}}
	var links []*fabric.Link
	var feeders []*fabric.Port
	for _, c := range t.Cables {
		links = append(links, c.A.Tx, c.B.Tx)
		feeders = append(feeders, c.A, c.B)
		fr.keys[c.A.Name], fr.keys[c.B.Name] = true, true
	}
	sws := t.Switches
	for _, s := range sws {
		fr.keys[s.Name] = true
		for _, p := range s.Ports {
			if p.Peer != nil {
				links = append(links, p.Tx, p.Peer.Tx)
				feeders = append(feeders, p.Peer)
				fr.keys[p.Name], fr.keys[p.Peer.Name] = true, true
			}
		}
	}
	fr.lossFn = func() uint64 {
		var n uint64
		for _, l := range links {
			n += l.Counters.DroppedDown + l.Counters.Lost + l.Counters.Corrupted
		}
		for _, s := range sws {
			n += s.Counters.Down + s.Counters.BlackHoled
		}
		return n
	}
	if fr.hard {
		fr.intoFn = func() uint64 {
			var n uint64
			for _, p := range feeders {
				n += dataTx(p)
			}
			return n
		}
	} else {
		fr.intoFn = fr.lossFn
	}
	fr.loss0, fr.into0 = fr.lossFn(), fr.intoFn()
	fr.lastInto = fr.into0
	fr.affected = r.affectedPairs(t)
	fr.placed0, _ = r.placed(fr.affected)
	fr.placedAtInto, fr.lastPlaced, fr.lastProgress = fr.placed0, fr.placed0, r.Sched.Now()
	if ev.Kind == Latency || ev.Kind == PFCStorm {
		fr.Outcome = "n/a"
	}
	r.Faults = append(r.Faults, fr)
	r.lastInj = r.Sched.Now()
	r.startSampling()
}

func paramString(ev *Event) string {
	var ks []string
	for k := range ev.Params {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, ev.Params[k])
	}
	if ev.Duration > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "duration=%v", ev.Duration)
	}
	return b.String()
}

func (r *Recorder) report(i int) *FaultReport {
	for k := len(r.Faults) - 1; k >= 0; k-- {
		if r.Faults[k].Index == i {
			return r.Faults[k]
		}
	}
	return nil
}

func (r *Recorder) recovered(i int, _ *Event, t *Target) {
	r.sample()
	if fr := r.report(i); fr != nil {
		fr.ended, fr.endAt, fr.EndNs = true, r.Sched.Now(), int64(r.Sched.Now())
		fr.placedEnd, fr.outstandingEnd = r.placed(fr.affected)
	}
	r.Log(Entry{Event: "recovered", Fault: ip(i), Target: t.Names()})
}

func (r *Recorder) startSampling() {
	if r.sampling || r.stopped {
		return
	}
	r.sampling = true
	r.Sched.AfterFunc(r.Fine, r.tick)
}

// Stop ends sampling (the loop then runs dry once the workload does).
func (r *Recorder) Stop() { r.stopped = true }

func (r *Recorder) tick() {
	if r.stopped {
		r.sampling = false
		return
	}
	r.sample()
	now := r.Sched.Now()
	active := false
	for _, f := range r.Faults {
		if !f.ended {
			active = true
		}
	}
	switch {
	case now-r.lastInj < sim.Time(r.FineWindow):
		r.Sched.AfterFunc(r.Fine, r.tick)
	case active:
		r.Sched.AfterFunc(r.Coarse, r.tick)
	default:
		r.sampling = false
	}
}

// sample reads every counter once.
func (r *Recorder) sample() {
	now := r.Sched.Now()
	r.ticks++
	for _, f := range r.Faults {
		if f.ended {
			continue
		}
		if l := f.lossFn(); l > f.loss0+f.PacketsLost {
			if f.FirstLossNs < 0 {
				f.FirstLossNs = int64(now - f.start)
				r.Log(Entry{Event: "first_loss", Fault: ip(f.Index), Value: float64(l - f.loss0)})
			}
			f.PacketsLost = l - f.loss0
		}
		pl := f.lastPlaced
		if len(f.affected) > 0 {
			pl, _ = r.placed(f.affected)
		}
		if n := f.intoFn(); n > f.lastInto {
			f.lastInto, f.lastIntoAt = n, now
			f.placedAtInto = pl
		}
		if pl > f.lastPlaced {
			f.lastPlaced, f.lastProgress = pl, now
		}
	}
	var retx uint64
	for _, q := range r.qps {
		st := q.Stats()
		retx += st.Retransmissions + st.Timeouts
		if q.State() == verbs.QPError && !r.qpErr[q] {
			r.qpErr[q] = true
			r.qpErrAt[q] = now
			r.Log(Entry{Event: "qp_error", Detail: fmt.Sprintf("qpn %#x", q.QPN())})
			for _, f := range r.Faults {
				if !f.ended {
					f.QPErrors++
				}
			}
		}
	}
	if retx > r.retx {
		for _, f := range r.Faults {
			if !f.ended && f.DetectNs < 0 {
				f.DetectNs, f.DetectBy = int64(now-f.start), "transport"
				r.Log(Entry{Event: "transport_loss", Fault: ip(f.Index), Value: float64(retx - r.retx)})
			}
		}
		r.retx = retx
	}
	r.logEVChanges()
	if r.ticks%8 == 0 || now-r.lastInj >= sim.Time(r.FineWindow) {
		out := 0
		for _, q := range r.qps {
			if h, ok := q.(verbs.PathHealth); ok {
				out += h.PathsOutOfUse()
			}
		}
		if out != r.evOut {
			r.Log(Entry{Event: "ev_out_of_use", Value: float64(out), Detail: fmt.Sprintf("EVs ASSUMED_BAD or DENIED: %d → %d", r.evOut, out)})
			r.evOut = out
		}
	}
}

// logEVChanges logs the path (EV) state changes the multipath QPs report
// (verbs.PathHealth; MRC: into or out of ASSUMED_BAD or DENIED), each with
// its cause and the virtual time it happened.
func (r *Recorder) logEVChanges() {
	for _, q := range r.qps {
		h, ok := q.(verbs.PathHealth)
		if !ok {
			continue
		}
		r.evBuf = h.PollPathChanges(r.evBuf[:0])
		for _, c := range r.evBuf {
			r.Log(Entry{Event: "ev_state", Kind: c.Cause, Value: float64(c.At),
				Detail: fmt.Sprintf("qpn %#x ev %#08x plane %d: %v → %v at %v", h.QPN(), c.EV, c.Plane, c.From, c.To, time.Duration(c.At))})
		}
	}
}

// probeLoss is told by Clustermapper that a probe was lost.
func (r *Recorder) probeLoss(what string) {
	now := r.Sched.Now()
	for _, f := range r.Faults {
		if !f.ended && f.DetectNs < 0 && now > f.start {
			f.DetectNs, f.DetectBy = int64(now-f.start), "clustermapper"
			r.Log(Entry{Event: "probe_loss", Fault: ip(f.Index), Detail: what})
		}
	}
}

// located is told by Clustermapper what it found.
func (r *Recorder) located(fd Finding) {
	now := r.Sched.Now()
	r.Log(Entry{Event: "located", Target: []string{fd.Element}, Kind: fd.Kind, Detail: fd.String(), Value: fd.LossRate})
	for _, f := range r.Faults {
		if f.LocateNs < 0 && f.keys[fd.Element] && (!f.ended || now <= f.endAt) {
			f.LocateNs = int64(now - f.start)
		}
	}
}

// denied is told by the controller which links it pushed.
func (r *Recorder) denied(keys []string, evs int) {
	now := r.Sched.Now()
	r.Log(Entry{Event: "deny_pushed", Target: keys, Value: float64(evs)})
	for _, f := range r.Faults {
		if f.DenyNs >= 0 || f.ended {
			continue
		}
		for _, k := range keys {
			if f.keys[k] {
				f.DenyNs = int64(now - f.start)
				break
			}
		}
	}
}

// Finish takes a last sample and decides each fault's outcome. A fault is
// judged over [its start, E], E its end (or the run's), cut at JobEnd when
// the workload finished earlier (an idle fabric proves nothing):
//
//   - after_job_end: it started at or after JobEnd;
//   - qp_error: a QP of the traffic it affects went to error within it;
//   - stalled: the affected traffic had bytes outstanding at E and placed
//     nothing for the quiet time (200 µs hard, 5 ms soft) before E;
//   - no_traffic (no_loss for a soft fault that lost nothing): nothing
//     entered the faulted elements;
//   - bypassed: no data frame entered the failed element (hard) or was
//     lost (soft) for the quiet time before E, and the affected traffic
//     placed bytes after the fault started (when the pairs are watched:
//     WatchPairs);
//   - not_bypassed: otherwise.
//
// Latency and pfc_storm faults are n/a (nothing to bypass) unless a QP
// failed or the traffic stalled under them.
func (r *Recorder) Finish() {
	r.sample()
	r.Stop()
	now := r.Sched.Now()
	for _, f := range r.Faults {
		f.DataIntoFail = f.lastInto - f.into0
		if r.JobEnd > 0 && f.start >= r.JobEnd {
			f.Outcome, f.BypassNs = "after_job_end", -1
			continue
		}
		end, placedE := now, f.lastPlaced
		if f.ended {
			end, placedE = f.endAt, f.placedEnd
		}
		if r.JobEnd > 0 && r.JobEnd < end {
			end = r.JobEnd
		}
		quiet := sim.Time(200 * sim.Microsecond)
		if !f.hard {
			quiet = sim.Time(5 * sim.Millisecond)
		}
		if r.affectedQPError(f, end) {
			f.Outcome = "qp_error"
			continue
		}
		if len(f.affected) > 0 {
			outstanding := f.outstandingEnd
			if !f.ended {
				_, outstanding = r.placed(f.affected)
			}
			if outstanding > 0 && end-max(f.lastProgress, f.start) >= quiet {
				f.Outcome = "stalled"
				continue
			}
		}
		if f.Outcome == "n/a" {
			continue
		}
		switch {
		case f.lastInto == f.into0:
			f.Outcome = "no_traffic"
			if !f.hard && f.PacketsLost == 0 {
				f.Outcome = "no_loss"
			}
		case end-f.lastIntoAt >= quiet && (len(r.pairs) == 0 || placedE > f.placed0):
			f.Outcome = "bypassed"
			f.BypassNs = int64(f.lastIntoAt - f.start)
		default:
			f.Outcome = "not_bypassed"
		}
	}
}

// affectedQPError reports whether a requester QP of f's affected traffic
// (every watched QP when no pairs are watched) went to error between f's
// start and end.
func (r *Recorder) affectedQPError(f *FaultReport, end sim.Time) bool {
	in := func(q verbs.Transport) bool {
		at, ok := r.qpErrAt[q]
		return ok && at >= f.start && at <= end
	}
	if len(r.pairs) == 0 {
		for _, q := range r.qps {
			if in(q) {
				return true
			}
		}
		return false
	}
	for _, i := range f.affected {
		if in(r.pairs[i].A.T) {
			return true
		}
	}
	return false
}

func fmtNs(ns int64) string {
	if ns < 0 {
		return "—"
	}
	return time.Duration(ns).String()
}

// WriteTable prints the fault reports as a table.
func WriteTable(w io.Writer, fs []*FaultReport) {
	fmt.Fprintf(w, "%-3s %-13s %-34s %10s %10s %10s %10s %10s %10s %8s %s\n", "#", "kind", "target", "start", "1st loss", "detect", "bypass", "locate", "deny", "lost", "outcome")
	for _, f := range fs {
		tg := strings.Join(f.Targets, ",")
		if len(tg) > 34 {
			tg = tg[:31] + "..."
		}
		det := fmtNs(f.DetectNs)
		if f.DetectBy == "clustermapper" {
			det += "*"
		}
		fmt.Fprintf(w, "%-3d %-13s %-34s %10s %10s %10s %10s %10s %10s %8d %s\n", f.Index, f.Kind, tg, time.Duration(f.StartNs),
			fmtNs(f.FirstLossNs), det, fmtNs(f.BypassNs), fmtNs(f.LocateNs), fmtNs(f.DenyNs), f.PacketsLost, f.Outcome)
	}
}
