package faults

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// Resolve validates the plan against a topology: every selector must match
// something of the kind's element type, every black-hole prefix must parse
// (and the fabric must forward by uSID), events built in code get
// ParsePlan's parameter checks. Random selectors are drawn here, from the
// plan seed (or seed when the plan has none), so they are fixed before the
// run. The problems come back all at once — ParsePlan's too, and the
// targets of events ParsePlan rejected — each with its line, sorted.
func (p *Plan) Resolve(topo *fabric.Topology, seed uint64) ([]*Target, error) {
	if p.Seed != 0 {
		seed = p.Seed
	}
	r := newResolver(topo, sim.NewStream(seed, "faults/select"))
	errs := append(Errors{}, p.errs...)
	out := make([]*Target, len(p.Events))
	for i, ev := range p.Events {
		if !ev.checked {
			if _, ok := Kinds[ev.Kind]; !ok {
				errs = append(errs, &LineError{Source: p.Source, Line: ev.Line, Msg: fmt.Sprintf("events[%d]: kind: unknown fault kind %q", ev.Index, ev.Kind)})
				continue
			}
			errs = append(errs, ev.paramErrors(p.Source)...)
		}
		t, es := p.resolveEvent(topo, r, ev)
		errs = append(errs, es...)
		out[i] = t
	}
	// Events with syntax problems do not run, but a wrong name in their
	// target is one more thing to fix: report it now, not next time. (They
	// draw from their own stream, so the valid events' random picks do not
	// depend on them.)
	rr := newResolver(topo, sim.NewStream(seed, "faults/select-rejected"))
	for _, ev := range p.rejected {
		if ev.sel.raw != "" {
			_, es := p.resolveEvent(topo, rr, ev)
			errs = append(errs, es...)
		}
	}
	return out, errs.sorted().err()
}

func (p *Plan) resolveEvent(topo *fabric.Topology, r *resolver, ev *Event) (*Target, Errors) {
	var errs Errors
	bad := func(line int, f string, a ...any) {
		if line == 0 {
			line = ev.Line
		}
		errs = append(errs, &LineError{Source: p.Source, Line: line, Msg: fmt.Sprintf("events[%d]: ", ev.Index) + fmt.Sprintf(f, a...)})
	}
	if ev.Kind == BlackHole {
		if topo.Mode != fabric.ForwardUSID {
			bad(0, "kind: black_hole drops one uSID prefix, which exists only under uSID forwarding; this fabric forwards by %s (set fabric.forwarding=usid, or use loss on the links instead)", topo.Mode)
		} else if _, err := parseUSID(topo, ev.Params["usid"]); err != nil {
			bad(0, "params.usid: %v", err)
		}
	}
	if ev.sel.raw == "" {
		sel, err := ParseSelector(ev.Target)
		if err != nil {
			bad(0, "target: %v", err)
			return nil, errs
		}
		ev.sel = sel
	}
	t, err := r.resolve(ev.sel)
	if err != nil {
		bad(0, "target: %v", err)
		return nil, errs
	}
	switch ev.Kind {
	case SwitchDown, SwitchReboot, PlaneDown, BlackHole:
		if len(t.Switches) == 0 {
			bad(0, "target: %s needs switches, %q selects cables", ev.Kind, ev.Target)
		}
	case PFCStorm:
		if len(t.NICPorts) == 0 {
			bad(0, "target: pfc_storm needs NIC ports (nic:hH/pP), %q selects none", ev.Target)
		}
	default:
		if len(t.Cables) == 0 && t.Dynamic == nil {
			bad(0, "target: %s needs cables, %q selects switches", ev.Kind, ev.Target)
		}
	}
	return t, errs
}

// Injector applies a plan's faults and undoes each at its end, as events
// of a sim.Scheduler: the classic loop, or a partitioned cluster's global
// events (cluster.Scheduler), which run with every partition stopped.
// Overlapping faults compose: a link is down while any fault holds it
// down, loss and corruption models stack, extra delays add up.
type Injector struct {
	Topo  *fabric.Topology
	Sched sim.Scheduler
	Plan  *Plan
	Rec   *Recorder // may be nil

	targets []*Target
	res     *resolver
	seed    uint64
	start   sim.Time

	linkDown map[*fabric.Link]int
	swDown   map[*fabric.Switch]int
	loss     map[*fabric.Link]*layered
	corr     map[*fabric.Link]*layered
	delay    map[*fabric.Link]*delays
	rates    map[*fabric.Link]*rates
	storms   map[int]*storm
	flaps    map[int]*flapper
	holes    map[*fabric.Switch]int
	// Active counts faults in effect.
	Active int
}

type layered struct {
	base   any
	models []any
}

type delays struct {
	base  time.Duration
	extra []time.Duration
}

// rates is a link's rate before any capacity fault and the fractions of it
// the faults on it leave (they multiply).
type rates struct {
	base  uint64
	fracs []float64
}

type storm struct {
	ports   []*fabric.Port
	class   uint8
	quanta  uint16
	every   time.Duration
	stopped bool
}

// NewInjector validates plan against topo (see Plan.Resolve) and returns
// an injector for it, acting on s (cluster.Scheduler); seed is the
// cluster's seed (used when the plan has none).
func NewInjector(topo *fabric.Topology, s sim.Scheduler, plan *Plan, seed uint64, rec *Recorder) (*Injector, error) {
	ts, err := plan.Resolve(topo, seed)
	if err != nil {
		return nil, err
	}
	if plan.Seed != 0 {
		seed = plan.Seed
	}
	return &Injector{Topo: topo, Sched: s, Plan: plan, Rec: rec, targets: ts, seed: seed,
		res:      newResolver(topo, sim.NewStream(seed, "faults/dynamic")),
		linkDown: map[*fabric.Link]int{}, swDown: map[*fabric.Switch]int{},
		loss: map[*fabric.Link]*layered{}, corr: map[*fabric.Link]*layered{}, delay: map[*fabric.Link]*delays{}, rates: map[*fabric.Link]*rates{},
		storms: map[int]*storm{}, flaps: map[int]*flapper{}, holes: map[*fabric.Switch]int{}}, nil
}

// Target returns what event i resolved to (after it started, for dynamic
// selectors).
func (in *Injector) Target(i int) *Target { return in.targets[i] }

// Start schedules every event relative to now.
func (in *Injector) Start() {
	in.start = in.Sched.Now()
	for i, ev := range in.Plan.Events {
		i, ev := i, ev
		in.Sched.At(in.start+sim.Time(ev.At), func() { in.apply(i) })
		if end := ev.End(); end > 0 {
			in.Sched.At(in.start+sim.Time(end), func() { in.undo(i) })
		}
	}
}

func (in *Injector) apply(i int) {
	ev, t := in.Plan.Events[i], in.targets[i]
	if t.Dynamic != nil {
		t = in.res.busiest(*t.Dynamic)
		in.targets[i] = t
	}
	in.Active++
	if in.Rec != nil {
		in.Rec.injected(i, ev, t)
	}
	switch ev.Kind {
	case LinkDown, Optics, NICDown:
		for _, c := range t.Cables {
			in.cableDown(c, true)
		}
	case LinkFlap:
		in.flap(i, ev, t)
	case Loss, Degrade, BitErrors:
		for _, l := range in.dirLinks(ev, t) {
			in.addImpair(i, ev, l)
		}
		if ev.Kind == Degrade && ev.Params["capacity"] != "" {
			for _, l := range capacityLinks(ev, t) {
				in.addRate(l, ev.float("capacity", 1))
			}
		}
	case Latency:
		for _, l := range in.dirLinks(ev, t) {
			in.addDelay(l, ev.dur("delay", 0))
		}
	case SwitchDown, SwitchReboot, PlaneDown:
		for _, s := range t.Switches {
			in.switchDown(s, true)
		}
	case PFCStorm:
		st := &storm{ports: t.NICPorts, class: uint8(ev.int("class", 3)), quanta: uint16(ev.int("quanta", fabric.MaxQuanta))}
		// Default: re-pause at half the pause time, so the class never
		// resumes.
		rate := st.ports[0].Tx.Rate
		pause := time.Duration(float64(st.quanta) * 512 / float64(rate) * 1e9)
		st.every = ev.dur("interval", max(pause/2, time.Microsecond))
		in.storms[i] = st
		in.stormTick(st)
	case BlackHole:
		sid, _ := parseUSID(in.Topo, ev.Params["usid"])
		for _, s := range t.Switches {
			in.holes[s]++
			s.BlackHole(sid, ev.float("fraction", 1))
		}
	}
}

func (in *Injector) undo(i int) {
	ev, t := in.Plan.Events[i], in.targets[i]
	if t.Dynamic != nil {
		return // never started
	}
	in.Active--
	switch ev.Kind {
	case LinkDown, Optics, NICDown:
		for _, c := range t.Cables {
			in.cableDown(c, false)
		}
	case LinkFlap:
		// Stop the schedule; release the cables only if the flap holds
		// them down now (another fault may hold them too).
		if f := in.flaps[i]; f != nil {
			f.stopped = true
			in.releaseFlap(f)
			delete(in.flaps, i)
		}
	case Loss, Degrade, BitErrors:
		for _, l := range in.dirLinks(ev, t) {
			in.removeImpair(i, ev, l)
		}
		if ev.Kind == Degrade && ev.Params["capacity"] != "" {
			for _, l := range capacityLinks(ev, t) {
				in.removeRate(l, ev.float("capacity", 1))
			}
		}
	case Latency:
		for _, l := range in.dirLinks(ev, t) {
			in.removeDelay(l, ev.dur("delay", 0))
		}
	case SwitchDown, SwitchReboot, PlaneDown:
		for _, s := range t.Switches {
			in.switchDown(s, false)
		}
	case PFCStorm:
		st := in.storms[i]
		st.stopped = true
		for _, p := range st.ports {
			p.SendPause(st.class, 0)
		}
		delete(in.storms, i)
	case BlackHole:
		for _, s := range t.Switches {
			if in.holes[s]--; in.holes[s] == 0 {
				s.BlackHole(0, 0)
			}
		}
	}
	if in.Rec != nil {
		in.Rec.recovered(i, ev, t)
	}
}

// dirLinks returns the link directions an event acts on: forward (A→B),
// reverse, or both (the default, except degrade: forward).
func (in *Injector) dirLinks(ev *Event, t *Target) []*fabric.Link {
	def := "both"
	if ev.Kind == Degrade {
		def = "forward"
	}
	return linksIn(t, ev.str("direction", def))
}

// capacityLinks returns the link directions a degrade's capacity acts on:
// both unless direction says otherwise (a link that trains down to fewer
// lanes or a lower speed is slower both ways).
func capacityLinks(ev *Event, t *Target) []*fabric.Link {
	return linksIn(t, ev.str("direction", "both"))
}

// linksIn returns the directions dir of t's cables.
func linksIn(t *Target, dir string) []*fabric.Link {
	var out []*fabric.Link
	for _, c := range t.Cables {
		if dir != "reverse" {
			out = append(out, c.A.Tx)
		}
		if dir != "forward" {
			out = append(out, c.B.Tx)
		}
	}
	return out
}

func (in *Injector) setLink(l *fabric.Link, down bool) {
	if down {
		in.linkDown[l]++
		l.SetUp(false)
		return
	}
	if in.linkDown[l] > 0 {
		in.linkDown[l]--
	}
	if in.linkDown[l] == 0 && !in.switchHeld(l) {
		l.SetUp(true)
	}
}

// switchHeld reports whether a switch at either end of l is down by a fault.
func (in *Injector) switchHeld(l *fabric.Link) bool {
	if s, ok := l.Dst().Owner.(*fabric.Switch); ok && in.swDown[s] > 0 {
		return true
	}
	if p := l.Dst().Peer; p != nil {
		if s, ok := p.Owner.(*fabric.Switch); ok && in.swDown[s] > 0 {
			return true
		}
	}
	return false
}

func (in *Injector) cableDown(c Cable, down bool) {
	in.setLink(c.A.Tx, down)
	in.setLink(c.B.Tx, down)
}

func (in *Injector) switchDown(s *fabric.Switch, down bool) {
	if down {
		in.swDown[s]++
		s.SetDown(true)
		return
	}
	if in.swDown[s] > 0 {
		in.swDown[s]--
	}
	if in.swDown[s] > 0 {
		return
	}
	s.SetDown(false)
	// SetDown(false) brought every cable up: keep those other faults hold
	// down (a link fault, or the switch at the far end) down.
	for _, p := range s.Ports {
		if p.Tx == nil {
			continue
		}
		for _, l := range []*fabric.Link{p.Tx, p.Peer.Tx} {
			if in.linkDown[l] > 0 || in.switchHeld(l) {
				l.SetUp(false)
			}
		}
	}
}

// flapper runs one link_flap: one pending event at a time (the next down
// or up), so a long flap costs O(1) events in the queue, and it remembers
// whether it holds its cables down, so its end releases only its own hold.
type flapper struct {
	cables               []Cable
	period, down, jitter time.Duration
	count, k             int
	rng                  *rand.Rand
	start                sim.Time
	held, stopped        bool
}

func (in *Injector) flap(i int, ev *Event, t *Target) {
	period, downFor, jitter, count := ev.flapSchedule()
	f := &flapper{cables: t.Cables, period: period, down: downFor, jitter: jitter, count: count,
		rng: sim.NewStream(in.seed, fmt.Sprintf("faults/flap/%d", i)), start: in.Sched.Now()}
	in.flaps[i] = f
	in.nextFlap(i, f)
}

// nextFlap schedules cycle f.k: down at k·period plus a jitter drawn from
// [0, jitter] (one draw per cycle, in order), up after down.
func (in *Injector) nextFlap(i int, f *flapper) {
	if f.stopped || f.k >= f.count {
		return
	}
	var j time.Duration
	if f.jitter > 0 {
		j = time.Duration(f.rng.Int64N(int64(f.jitter) + 1))
	}
	at := f.start + sim.Time(time.Duration(f.k)*f.period+j)
	in.Sched.At(at, func() {
		if f.stopped {
			return
		}
		f.held = true
		for _, c := range f.cables {
			in.cableDown(c, true)
		}
		if in.Rec != nil {
			in.Rec.note(i, "flap_down", nil)
		}
		in.Sched.At(at+sim.Time(f.down), func() {
			if f.stopped {
				return
			}
			in.releaseFlap(f)
			if in.Rec != nil {
				in.Rec.note(i, "flap_up", nil)
			}
			f.k++
			in.nextFlap(i, f)
		})
	})
}

// releaseFlap lets go of the flap's hold on its cables, if it has one.
func (in *Injector) releaseFlap(f *flapper) {
	if !f.held {
		return
	}
	f.held = false
	for _, c := range f.cables {
		in.cableDown(c, false)
	}
}

func (in *Injector) addImpair(i int, ev *Event, l *fabric.Link) {
	name := fmt.Sprintf("%d/%s", i, l.Name)
	switch ev.Kind {
	case BitErrors:
		in.push(in.corr, l, fabric.NewBitErrors(ev.float("ber", 0), in.seed, name), true)
	case Degrade:
		if ev.Params["loss"] != "" {
			in.push(in.loss, l, fabric.NewBernoulli(ev.float("loss", 0), in.seed, name), false)
		}
		if ev.Params["delay"] != "" {
			in.addDelay(l, ev.dur("delay", 0))
		}
	case Loss:
		rate := ev.float("rate", 0)
		var m fabric.LossModel
		if ev.str("model", "bernoulli") == "gilbert" {
			// Bursts of mean length `burst` packets lost in full (Bad
			// loses all, Good nothing), entered at the rate that gives the
			// mean loss: P/(P+R) = rate.
			burst := ev.float("burst", 4)
			r := 1 / burst
			p := rate * r / max(1-rate, 1e-9)
			m = fabric.NewGilbertElliott(p, r, 0, 1, in.seed, name)
		} else {
			m = fabric.NewBernoulli(rate, in.seed, name)
		}
		in.push(in.loss, l, m, false)
	}
}

func (in *Injector) removeImpair(i int, ev *Event, l *fabric.Link) {
	name := fmt.Sprintf("%d/%s", i, l.Name)
	switch ev.Kind {
	case BitErrors:
		in.pop(in.corr, l, name, true)
	case Degrade:
		if ev.Params["loss"] != "" {
			in.pop(in.loss, l, name, false)
		}
		if ev.Params["delay"] != "" {
			in.removeDelay(l, ev.dur("delay", 0))
		}
	case Loss:
		in.pop(in.loss, l, name, false)
	}
}

func (in *Injector) push(set map[*fabric.Link]*layered, l *fabric.Link, m any, corr bool) {
	ly := set[l]
	if ly == nil {
		ly = &layered{}
		if corr {
			ly.base = l.Corr
		} else {
			ly.base = l.Loss
		}
		set[l] = ly
	}
	ly.models = append(ly.models, m)
	in.install(ly, l, corr)
}

func (in *Injector) pop(set map[*fabric.Link]*layered, l *fabric.Link, _ string, corr bool) {
	ly := set[l]
	if ly == nil || len(ly.models) == 0 {
		return
	}
	// Faults on one link end in any order; models are interchangeable for
	// the outcome, so drop the oldest.
	ly.models = ly.models[1:]
	in.install(ly, l, corr)
	if len(ly.models) == 0 {
		delete(set, l)
	}
}

func (in *Injector) install(ly *layered, l *fabric.Link, corr bool) {
	all := ly.models
	if ly.base != nil && !isNilModel(ly.base) {
		all = append([]any{ly.base}, all...)
	}
	if corr {
		switch len(all) {
		case 0:
			l.Corr = nil
		case 1:
			l.Corr = all[0].(fabric.CorruptionModel)
		default:
			var ms multiCorr
			for _, m := range all {
				ms = append(ms, m.(fabric.CorruptionModel))
			}
			l.Corr = ms
		}
		return
	}
	switch len(all) {
	case 0:
		l.Loss = nil
	case 1:
		l.Loss = all[0].(fabric.LossModel)
	default:
		var ms multiLoss
		for _, m := range all {
			ms = append(ms, m.(fabric.LossModel))
		}
		l.Loss = ms
	}
}

func isNilModel(m any) bool {
	switch x := m.(type) {
	case fabric.LossModel:
		return x == nil
	case fabric.CorruptionModel:
		return x == nil
	}
	return m == nil
}

// multiLoss loses a packet when any of its models does (every model draws,
// so each keeps its own stream in step).
type multiLoss []fabric.LossModel

func (m multiLoss) Lose(p *fabric.Packet) bool {
	lost := false
	for _, x := range m {
		if x.Lose(p) {
			lost = true
		}
	}
	return lost
}

type multiCorr []fabric.CorruptionModel

func (m multiCorr) Corrupt(p *fabric.Packet) bool {
	bad := false
	for _, x := range m {
		if x.Corrupt(p) {
			bad = true
		}
	}
	return bad
}

func (in *Injector) addDelay(l *fabric.Link, d time.Duration) {
	ds := in.delay[l]
	if ds == nil {
		ds = &delays{base: l.Delay}
		in.delay[l] = ds
	}
	ds.extra = append(ds.extra, d)
	l.Delay += d
}

func (in *Injector) removeDelay(l *fabric.Link, d time.Duration) {
	ds := in.delay[l]
	if ds == nil {
		return
	}
	for k, x := range ds.extra {
		if x == d {
			ds.extra = append(ds.extra[:k], ds.extra[k+1:]...)
			break
		}
	}
	l.Delay = ds.base
	for _, x := range ds.extra {
		l.Delay += x
	}
	if len(ds.extra) == 0 {
		delete(in.delay, l)
	}
}

// addRate scales l's rate by frac (a degrade's capacity): its sending
// port serializes every later frame at the lower rate. Frames are never
// touched, only timed.
func (in *Injector) addRate(l *fabric.Link, frac float64) {
	r := in.rates[l]
	if r == nil {
		r = &rates{base: l.Rate}
		in.rates[l] = r
	}
	r.fracs = append(r.fracs, frac)
	l.Rate = r.rate()
}

// removeRate undoes one addRate(l, frac): the base rate back once no
// capacity fault is left on l.
func (in *Injector) removeRate(l *fabric.Link, frac float64) {
	r := in.rates[l]
	if r == nil {
		return
	}
	if k := slices.Index(r.fracs, frac); k >= 0 {
		r.fracs = slices.Delete(r.fracs, k, k+1)
	}
	l.Rate = r.rate()
	if len(r.fracs) == 0 {
		delete(in.rates, l)
	}
}

// rate is the base rate times every fraction, at least 1 bit/s.
func (r *rates) rate() uint64 {
	f := float64(r.base)
	for _, x := range r.fracs {
		f *= x
	}
	return max(1, uint64(math.Round(f)))
}

func (in *Injector) stormTick(st *storm) {
	if st.stopped {
		return
	}
	for _, p := range st.ports {
		p.SendPause(st.class, st.quanta)
	}
	in.Sched.AfterFunc(st.every, func() { in.stormTick(st) })
}
