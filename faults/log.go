package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
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

// FaultReport is what happened around one fault. Times are virtual, from
// the fault's start; -1 means never.
type FaultReport struct {
	Index   int      `json:"index"`
	Label   string   `json:"label"`
	Kind    string   `json:"kind"`
	Targets []string `json:"targets"`
	StartNs int64    `json:"start_ns"`
	EndNs   int64    `json:"end_ns"` // -1: still active when the run ended

	FirstLossNs  int64  `json:"first_loss_ns"`  // first frame lost at the fault
	DetectNs     int64  `json:"detect_ns"`      // first loss seen by a transport or a probe
	DetectBy     string `json:"detect_by"`      // transport | clustermapper
	BypassNs     int64  `json:"bypass_ns"`      // last data frame into the fault (traffic moved off it)
	LocateNs     int64  `json:"locate_ns"`      // Clustermapper named the right element
	DenyNs       int64  `json:"deny_ns"`        // the controller pushed a denylist covering it
	PacketsLost  uint64 `json:"packets_lost"`   // frames dropped at the faulted elements
	DataIntoFail uint64 `json:"data_into_fail"` // data frames sent into a hard-failed element
	QPErrors     int    `json:"qp_errors"`
	Outcome      string `json:"outcome"` // bypassed | not_bypassed | no_traffic | n/a

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

	qps       []verbs.Transport
	qpErr     map[verbs.Transport]bool
	retx      uint64
	evOut     int
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
		qpErr: map[verbs.Transport]bool{}}
}

// Watch adds QPs whose statistics count as the transports' view.
func (r *Recorder) Watch(ts ...verbs.Transport) { r.qps = append(r.qps, ts...) }

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
		fr.ended, fr.endAt, fr.EndNs = true, r.Sched.Now(), int64(r.Sched.Now()-fr.start)
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
		if n := f.intoFn(); n > f.lastInto {
			f.lastInto, f.lastIntoAt = n, now
		}
	}
	var retx uint64
	for _, q := range r.qps {
		st := q.Stats()
		retx += st.Retransmissions + st.Timeouts
		if q.State() == verbs.QPError && !r.qpErr[q] {
			r.qpErr[q] = true
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
	if r.ticks%8 == 0 || now-r.lastInj >= sim.Time(r.FineWindow) {
		out := 0
		for _, q := range r.qps {
			if m, ok := q.(*mrc.QP); ok {
				s := m.MRCStats()
				out += s.EVAssumedBad + s.EVDenied
			}
		}
		if out != r.evOut {
			r.Log(Entry{Event: "ev_out_of_use", Value: float64(out), Detail: fmt.Sprintf("EVs ASSUMED_BAD or DENIED: %d → %d", r.evOut, out)})
			r.evOut = out
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

// Finish takes a last sample and decides each fault's outcome.
func (r *Recorder) Finish() {
	r.sample()
	r.Stop()
	now := r.Sched.Now()
	for _, f := range r.Faults {
		end := now
		if f.ended {
			end = f.endAt
		}
		f.DataIntoFail = f.lastInto - f.into0
		if f.Outcome == "n/a" {
			continue
		}
		quiet := sim.Time(200 * sim.Microsecond)
		if !f.hard {
			quiet = sim.Time(5 * sim.Millisecond)
		}
		switch {
		case f.lastInto == f.into0:
			f.Outcome = "no_traffic"
			if !f.hard && f.PacketsLost == 0 {
				f.Outcome = "no_loss"
			}
		case end-f.lastIntoAt >= quiet:
			f.Outcome = "bypassed"
			f.BypassNs = int64(f.lastIntoAt - f.start)
		default:
			f.Outcome = "not_bypassed"
		}
	}
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
