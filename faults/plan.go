// Package faults injects failures into a simulated cluster on its event
// loop: a fault plan (YAML: a timeline of fault events, each with a start,
// a duration, a target selector and parameters) is parsed with line
// numbers, resolved against the topology and validated before the run,
// then applied and undone by an Injector. Clustermapper agents probe the
// fabric with real SRv6 loopback frames and locate failures; a policy
// controller turns their findings into a link denylist pushed to every
// NIC; a Recorder keeps an event log (JSON lines) and a per-run summary.
//
// Nothing here reads the wall clock or sleeps: everything runs on the
// cluster's sim.Scheduler (its sim.Loop, or a partitioned cluster's global
// events between windows: cluster.Cluster.Scheduler), and every random
// choice comes from a stream seeded by the plan seed, so a run replays
// exactly. See docs/faults.md.
package faults

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vcluster/vcluster/units"
)

// Kind is a fault kind.
type Kind string

// Fault kinds.
const (
	LinkDown     Kind = "link_down"     // the cable(s) go dark both ways
	LinkFlap     Kind = "link_flap"     // down/up cycles: period, count, jitter, down
	Loss         Kind = "loss"          // random loss: rate, model (bernoulli|gilbert), burst, direction
	BitErrors    Kind = "bit_errors"    // ber → frames fail FCS, direction
	Degrade      Kind = "degrade"       // gray failure: loss and/or delay (default forward), capacity (default both ways), direction
	Latency      Kind = "latency"       // extra propagation delay: delay, direction
	SwitchDown   Kind = "switch_down"   // the switch crashes; back (tables intact) at the end
	SwitchReboot Kind = "switch_reboot" // down for boot (default: the duration), then back
	Optics       Kind = "optics"        // an OSFP fails: every cable of the group down
	PlaneDown    Kind = "plane_down"    // every switch of the plane down
	NICDown      Kind = "nic_down"      // host NIC port(s) down
	PFCStorm     Kind = "pfc_storm"     // a NIC pauses its port: class, interval
	BlackHole    Kind = "black_hole"    // a switch silently drops a fraction of one uSID prefix
)

// Kinds lists every fault kind with the parameters it accepts.
var Kinds = map[Kind][]string{
	LinkDown:     {},
	LinkFlap:     {"period", "count", "jitter", "down"},
	Loss:         {"rate", "model", "burst", "direction"},
	BitErrors:    {"ber", "direction"},
	Degrade:      {"loss", "delay", "capacity", "direction"},
	Latency:      {"delay", "direction"},
	SwitchDown:   {},
	SwitchReboot: {"boot"},
	Optics:       {},
	PlaneDown:    {},
	NICDown:      {},
	PFCStorm:     {"class", "interval", "quanta"},
	BlackHole:    {"usid", "fraction"},
}

// KindNames returns the kinds, sorted.
func KindNames() []string {
	var n []string
	for k := range Kinds {
		n = append(n, string(k))
	}
	sort.Strings(n)
	return n
}

// Event is one fault of a plan.
type Event struct {
	Index    int           // position in the plan
	Line     int           // line of the event in the YAML (0 if built in code)
	Name     string        // optional label
	At       time.Duration // start, virtual time from the run's start
	Duration time.Duration // 0: until the end of the run
	Kind     Kind
	Target   string            // selector, see ParseSelector
	Params   map[string]string // kind-specific parameters, as written
	params   map[string]int    // parameter → line

	sel     Selector
	checked bool // checkParams ran (ParsePlan); events built in code are checked by Resolve
}

// Bounds on a plan's parameters, checked by ParsePlan (docs/faults.md).
const (
	// MaxFlapCount bounds link_flap's count: every cycle is two events and
	// two log lines.
	MaxFlapCount = 100_000
	// MinFlapPeriod is link_flap's shortest period: below it a cable
	// changes state faster than a 4 KiB frame crosses a 100G link.
	MinFlapPeriod = time.Microsecond
	// MinStormInterval is pfc_storm's shortest re-pause interval (0 would
	// send PAUSE frames forever without virtual time moving).
	MinStormInterval = time.Microsecond
)

// Plan is a parsed fault plan.
type Plan struct {
	Seed   uint64 // random selectors and jitter; 0: the cluster's seed
	Events []*Event
	Source string // file name for messages

	// errs are ParsePlan's problems; rejected the events they concern
	// (their targets are still resolved, so one pass reports everything).
	errs     Errors
	rejected []*Event
}

// LineError is a plan problem at a line of its YAML.
type LineError struct {
	Source string
	Line   int
	Msg    string
}

func (e *LineError) Error() string {
	src := e.Source
	if src == "" {
		src = "plan"
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", src, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", src, e.Msg)
}

// Errors is a list of plan problems, one per line of its message.
type Errors []error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func errLine(e error) int {
	if le, ok := e.(*LineError); ok {
		return le.Line
	}
	return 0
}

// sorted orders the problems by line (stable: one line's keep their order).
func (es Errors) sorted() Errors {
	sort.SliceStable(es, func(i, j int) bool { return errLine(es[i]) < errLine(es[j]) })
	return es
}

// LoadPlan reads and parses a plan file (it is not validated against a
// topology: see Plan.Resolve).
func LoadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePlan(path, b)
}

// ParsePlan parses a plan. Syntax problems — unknown or duplicate keys,
// unknown fault kinds, bad or negative durations, malformed selectors,
// parameters a kind does not take, cannot parse or holds out of range —
// are all reported, each with its line, as Errors. The plan comes back
// even then (holding the events without problems), so that Plan.Resolve
// or CheckPlan can add the topology's problems to the same list.
func ParsePlan(source string, b []byte) (*Plan, error) {
	p := &Plan{Source: source}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		p.errs = Errors{yamlError(source, err)}
		return p, p.errs
	}
	bad := func(n *yaml.Node, f string, a ...any) {
		p.errs = append(p.errs, &LineError{Source: source, Line: n.Line, Msg: fmt.Sprintf(f, a...)})
	}
	if len(doc.Content) == 0 {
		return p, nil // empty plan
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		bad(root, "a plan is a mapping with seed and events")
		return p, p.errs
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			bad(k, "duplicate key %q (first at line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "seed":
			s, err := strconv.ParseUint(v.Value, 0, 64)
			if err != nil || v.Kind != yaml.ScalarNode {
				bad(v, "seed: %q is not an unsigned integer (0 to 2^64-1)", v.Value)
			}
			p.Seed = s
		case "events":
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				continue // "events:" with nothing: none
			}
			if v.Kind != yaml.SequenceNode {
				bad(v, "events: must be a list")
				continue
			}
			for j, en := range v.Content {
				ev, es := parseEvent(source, j, en)
				p.errs = append(p.errs, es...)
				switch {
				case ev != nil && len(es) == 0:
					p.Events = append(p.Events, ev)
				case ev != nil:
					p.rejected = append(p.rejected, ev)
				}
			}
		default:
			bad(k, "unknown key %q (want seed, events)", k.Value)
		}
	}
	p.errs.sorted()
	return p, p.errs.err()
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// yamlError turns a YAML syntax error ("yaml: line 3: ...") into a
// LineError at that line.
func yamlError(source string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &LineError{Source: source, Line: n, Msg: "YAML: " + msg[len(m[0]):]}
	}
	return &LineError{Source: source, Msg: msg}
}

// parseEvent parses one event. It returns the event whenever n is a
// mapping, with its problems: an event with problems is kept aside (not
// run) but its target is still resolved, so every problem shows at once.
func parseEvent(source string, idx int, n *yaml.Node) (*Event, Errors) {
	var errs Errors
	bad := func(at *yaml.Node, f string, a ...any) {
		errs = append(errs, &LineError{Source: source, Line: at.Line, Msg: fmt.Sprintf("events[%d]: ", idx) + fmt.Sprintf(f, a...)})
	}
	if n.Kind != yaml.MappingNode {
		bad(n, "an event is a mapping (at, duration, kind, target, params)")
		return nil, errs
	}
	ev := &Event{Index: idx, Line: n.Line, Params: map[string]string{}, params: map[string]int{}}
	var kindNode, targetNode *yaml.Node
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := k.Value
		if key == "start" {
			key = "at" // an alias: both is a duplicate
		}
		if first, dup := seen[key]; dup {
			bad(k, "duplicate key %q (first at line %d)", k.Value, first)
			continue
		}
		seen[key] = k.Line
		if k.Value != "params" && v.Kind != yaml.ScalarNode {
			if _, known := eventKeys[k.Value]; known {
				bad(v, "%s: must be a scalar", k.Value)
				continue
			}
		}
		switch k.Value {
		case "name":
			ev.Name = v.Value
		case "at", "start":
			d, err := units.ParseDuration(v.Value)
			if err != nil {
				bad(v, "%s: %v", k.Value, err)
			} else if d < 0 {
				bad(v, "%s: negative start %s", k.Value, v.Value)
			}
			ev.At = d
		case "duration":
			d, err := units.ParseDuration(v.Value)
			if err != nil {
				bad(v, "duration: %v", err)
			} else if d < 0 {
				bad(v, "duration: negative duration %s", v.Value)
			}
			ev.Duration = d
		case "kind":
			kindNode = v
			ev.Kind = Kind(v.Value)
		case "target":
			targetNode = v
			ev.Target = v.Value
		case "params":
			if v.Kind != yaml.MappingNode {
				bad(v, "params: must be a mapping")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				pk, pv := v.Content[j], v.Content[j+1]
				if first, dup := ev.params[pk.Value]; dup {
					bad(pk, "params: duplicate key %q (first at line %d)", pk.Value, first)
					continue
				}
				ev.params[pk.Value] = pk.Line
				if pv.Kind != yaml.ScalarNode {
					bad(pv, "params.%s: must be a scalar", pk.Value)
					continue
				}
				ev.Params[pk.Value] = pv.Value
			}
		default:
			bad(k, "unknown key %q (want name, at, duration, kind, target, params)", k.Value)
		}
	}
	if kindNode == nil {
		bad(n, "kind: missing (one of %s)", strings.Join(KindNames(), ", "))
	} else if _, ok := Kinds[ev.Kind]; !ok {
		bad(kindNode, "kind: unknown fault kind %q (want one of %s)", kindNode.Value, strings.Join(KindNames(), ", "))
	}
	if targetNode == nil {
		bad(n, "target: missing")
	} else if sel, err := ParseSelector(ev.Target); err != nil {
		bad(targetNode, "target: %v", err)
	} else {
		ev.sel = sel
	}
	if _, ok := Kinds[ev.Kind]; ok {
		errs = append(errs, ev.paramErrors(source)...)
	}
	return ev, errs
}

// paramErrors runs checkParams, each problem at its parameter's line (else
// the event's).
func (ev *Event) paramErrors(source string) Errors {
	ev.checked = true
	var errs Errors
	for _, e := range checkParams(ev) {
		line := ev.params[e.key]
		if line == 0 {
			line = ev.Line
		}
		errs = append(errs, &LineError{Source: source, Line: line, Msg: fmt.Sprintf("events[%d]: params.%s: %s", ev.Index, e.key, e.msg)})
	}
	return errs
}

// eventKeys are the keys an event takes.
var eventKeys = map[string]struct{}{"name": {}, "at": {}, "start": {}, "duration": {}, "kind": {}, "target": {}, "params": {}}

type paramErr struct{ key, msg string }

// intRange is the allowed range of each integer parameter.
var intRange = map[string][2]int{"count": {1, MaxFlapCount}, "class": {0, 7}, "quanta": {1, 0xffff}}

// checkParams checks the parameters of ev's kind: known keys, parsable
// values in range, and the combinations (a flap's schedule, a reboot's
// boot time against the duration).
func checkParams(ev *Event) []paramErr {
	var out []paramErr
	allowed := map[string]bool{}
	for _, k := range Kinds[ev.Kind] {
		allowed[k] = true
	}
	keys := make([]string, 0, len(ev.Params))
	for k := range ev.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ok := map[string]bool{} // parameters that parsed and are in range
	for _, k := range keys {
		v := ev.Params[k]
		if !allowed[k] {
			out = append(out, paramErr{k, fmt.Sprintf("%s takes no parameter %q (takes %v)", ev.Kind, k, Kinds[ev.Kind])})
			continue
		}
		var err error
		switch k {
		case "period", "jitter", "down", "delay", "boot", "interval":
			var d time.Duration
			d, err = units.ParseDuration(v)
			switch {
			case err != nil:
			case k == "period" && d < MinFlapPeriod:
				err = fmt.Errorf("%s is too short: must be ≥ %v", v, MinFlapPeriod)
			case k == "interval" && d < MinStormInterval:
				err = fmt.Errorf("%s: the re-pause interval must be ≥ %v", v, MinStormInterval)
			case (k == "down" || k == "boot") && d <= 0:
				err = fmt.Errorf("%s: must be > 0", v)
			case d < 0:
				err = fmt.Errorf("negative duration %s (must be ≥ 0)", v)
			}
		case "count", "class", "quanta":
			r := intRange[k]
			lo, hi := r[0], r[1]
			n, perr := strconv.Atoi(v)
			switch {
			case perr != nil:
				err = fmt.Errorf("%q is not an integer (must be in [%d, %d])", v, lo, hi)
			case n < lo || n > hi:
				err = fmt.Errorf("%d out of range: must be in [%d, %d]", n, lo, hi)
			}
		case "rate", "loss", "fraction", "ber":
			var f float64
			f, err = parseFraction(v)
			if err == nil && (f < 0 || f > 1) {
				err = fmt.Errorf("%v is outside 0..1", f)
			}
		case "capacity":
			var f float64
			f, err = parseFraction(v)
			if err == nil && !(f > 0 && f <= 1) {
				err = fmt.Errorf("%v is outside (0, 1]: the fraction of the link's rate left (1: full rate)", f)
			}
		case "burst":
			var f float64
			f, err = parseFloat(v)
			if err == nil && f < 1 {
				err = fmt.Errorf("mean burst length %v < 1 packet (must be ≥ 1)", f)
			}
		case "model":
			if v != "bernoulli" && v != "gilbert" {
				err = fmt.Errorf("%q: want bernoulli or gilbert", v)
			}
		case "direction":
			if v != "both" && v != "forward" && v != "reverse" {
				err = fmt.Errorf("%q: want both, forward or reverse", v)
			}
		case "usid":
			// resolved against the topology
		}
		if err != nil {
			out = append(out, paramErr{k, err.Error()})
		} else {
			ok[k] = true
		}
	}
	if ev.Kind == Degrade && ev.Params["loss"] == "" && ev.Params["delay"] == "" && ev.Params["capacity"] == "" {
		out = append(out, paramErr{"loss", "degrade needs loss, delay and/or capacity"})
	}
	if ev.Kind == BlackHole && ev.Params["usid"] == "" {
		out = append(out, paramErr{"usid", "black_hole needs the uSID prefix (a switch name, host:h<N>/p<P> or a 16-bit number)"})
	}
	if ev.Kind == SwitchReboot {
		_, hasBoot := ev.Params["boot"]
		switch {
		case !hasBoot && ev.Duration == 0:
			out = append(out, paramErr{"boot", "switch_reboot needs the boot time: params.boot or the event's duration"})
		case hasBoot && ok["boot"] && ev.Duration > 0 && ev.dur("boot", 0) != ev.Duration:
			out = append(out, paramErr{"boot", fmt.Sprintf("boot %v and duration %v disagree: the switch is down for the boot time; give one of them (or both equal)", ev.dur("boot", 0), ev.Duration)})
		}
	}
	if ev.Kind == LinkFlap {
		out = append(out, checkFlap(ev, ok)...)
	}
	return out
}

// flapSchedule is a link_flap's schedule: count cycles of period, each
// down for down after a jitter drawn from [0, jitter].
func (ev *Event) flapSchedule() (period, down, jitter time.Duration, count int) {
	period = ev.dur("period", 0)
	down = ev.dur("down", period/2)
	jitter = ev.dur("jitter", 0)
	count = ev.int("count", 0)
	if count == 0 {
		if ev.Duration > 0 && period > 0 {
			count = int(ev.Duration / period)
		} else {
			count = 10
		}
	}
	return
}

// checkFlap bounds a flap's schedule: a period, down < period, down +
// jitter ≤ period (cycles never overlap), count ≤ MaxFlapCount, and with a
// duration every cycle inside it.
func checkFlap(ev *Event, ok map[string]bool) []paramErr {
	if _, has := ev.Params["period"]; !has {
		return []paramErr{{"period", fmt.Sprintf("link_flap needs a period (≥ %v)", MinFlapPeriod)}}
	}
	for _, k := range []string{"period", "down", "jitter", "count"} {
		if _, has := ev.Params[k]; has && !ok[k] {
			return nil // already reported
		}
	}
	period, down, jitter, count := ev.flapSchedule()
	var out []paramErr
	switch {
	case down >= period:
		out = append(out, paramErr{"down", fmt.Sprintf("%v must be shorter than the period %v", down, period)})
	case down+jitter > period:
		out = append(out, paramErr{"jitter", fmt.Sprintf("%v + down %v exceeds the period %v: must be in [0, %v]", jitter, down, period, period-down)})
	}
	if ev.Duration > 0 {
		if _, has := ev.Params["count"]; !has && count == 0 {
			out = append(out, paramErr{"period", fmt.Sprintf("%v is longer than the duration %v: no flap would happen", period, ev.Duration)})
		} else if time.Duration(count) > ev.Duration/period {
			out = append(out, paramErr{"count", fmt.Sprintf("%d × period %v does not fit the duration %v: must be in [1, %d]", count, period, ev.Duration, ev.Duration/period)})
		}
	}
	if count > MaxFlapCount {
		out = append(out, paramErr{"count", fmt.Sprintf("duration / period gives %d flaps: at most %d (lengthen the period)", count, MaxFlapCount)})
	}
	return out
}

// parseFloat reads a finite number: NaN and ±Inf, in Go or YAML spelling
// (.nan, .inf), are not numbers a fault can use.
func parseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	lv := strings.ToLower(strings.TrimSpace(v))
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		if strings.Contains(lv, "nan") || strings.Contains(lv, "inf") || math.IsInf(f, 0) {
			return 0, fmt.Errorf("%q is not a finite number", v)
		}
		return 0, fmt.Errorf("%q is not a number", v)
	}
	return f, nil
}

// parseFraction reads a fraction written as a number (0.01) or a percentage
// (1%).
func parseFraction(v string) (float64, error) {
	pct := strings.HasSuffix(v, "%")
	f, err := parseFloat(strings.TrimSuffix(v, "%"))
	if err != nil {
		return 0, err
	}
	if pct {
		f /= 100
	}
	return f, nil
}

func (ev *Event) float(k string, def float64) float64 {
	v, ok := ev.Params[k]
	if !ok {
		return def
	}
	f, _ := parseFraction(v)
	return f
}

func (ev *Event) dur(k string, def time.Duration) time.Duration {
	v, ok := ev.Params[k]
	if !ok {
		return def
	}
	d, _ := units.ParseDuration(v)
	return d
}

func (ev *Event) int(k string, def int) int {
	v, ok := ev.Params[k]
	if !ok {
		return def
	}
	n, _ := strconv.Atoi(v)
	return n
}

func (ev *Event) str(k, def string) string {
	if v, ok := ev.Params[k]; ok {
		return v
	}
	return def
}

// End is when the event's fault is undone (0 with no duration: never). A
// switch_reboot ends after its boot time (checkParams rejects a duration
// that disagrees).
func (ev *Event) End() time.Duration {
	if ev.Kind == SwitchReboot {
		if b := ev.dur("boot", 0); b > 0 {
			return ev.At + b
		}
	}
	if ev.Duration == 0 {
		return 0
	}
	return ev.At + ev.Duration
}

// Label names the event in logs.
func (ev *Event) Label() string {
	if ev.Name != "" {
		return ev.Name
	}
	return fmt.Sprintf("#%d %s %s", ev.Index, ev.Kind, ev.Target)
}
