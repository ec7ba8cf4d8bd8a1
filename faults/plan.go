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
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Kind is a fault kind.
type Kind string

// Fault kinds.
const (
	LinkDown     Kind = "link_down"     // the cable(s) go dark both ways
	LinkFlap     Kind = "link_flap"     // down/up cycles: period, count, jitter, down
	Loss         Kind = "loss"          // random loss: rate, model (bernoulli|gilbert), burst, direction
	BitErrors    Kind = "bit_errors"    // ber → frames fail FCS, direction
	Degrade      Kind = "degrade"       // one-way gray failure: loss and/or delay, direction (default forward)
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
	Degrade:      {"loss", "delay", "direction"},
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

	sel Selector
}

// Plan is a parsed fault plan.
type Plan struct {
	Seed   uint64 // random selectors and jitter; 0: the cluster's seed
	Events []*Event
	Source string // file name for messages
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

// LoadPlan reads and parses a plan file (it is not validated against a
// topology: see Plan.Resolve).
func LoadPlan(path string) (*Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePlan(path, b)
}

// ParsePlan parses a plan. Syntax problems — unknown keys, unknown fault
// kinds, bad or negative durations, malformed selectors, parameters a kind
// does not take or cannot parse — are all reported, each with its line.
func ParsePlan(source string, b []byte) (*Plan, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, &LineError{Source: source, Msg: err.Error()}
	}
	p := &Plan{Source: source}
	var errs Errors
	bad := func(n *yaml.Node, f string, a ...any) {
		errs = append(errs, &LineError{Source: source, Line: n.Line, Msg: fmt.Sprintf(f, a...)})
	}
	if len(doc.Content) == 0 {
		return p, nil // empty plan
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		bad(root, "a plan is a mapping with seed and events")
		return nil, errs
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "seed":
			s, err := strconv.ParseUint(v.Value, 0, 64)
			if err != nil {
				bad(v, "seed: %q is not an unsigned integer", v.Value)
			}
			p.Seed = s
		case "events":
			if v.Kind != yaml.SequenceNode {
				bad(v, "events: must be a list")
				continue
			}
			for j, en := range v.Content {
				ev, es := parseEvent(source, j, en)
				errs = append(errs, es...)
				if ev != nil {
					p.Events = append(p.Events, ev)
				}
			}
		default:
			bad(k, "unknown key %q (want seed, events)", k.Value)
		}
	}
	return p, errs.err()
}

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
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "name":
			ev.Name = v.Value
		case "at", "start":
			d, err := ParseDuration(v.Value)
			if err != nil {
				bad(v, "%s: %v", k.Value, err)
			} else if d < 0 {
				bad(v, "%s: negative start %s", k.Value, v.Value)
			}
			ev.At = d
		case "duration":
			d, err := ParseDuration(v.Value)
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
				if pv.Kind != yaml.ScalarNode {
					bad(pv, "params.%s: must be a scalar", pk.Value)
					continue
				}
				ev.Params[pk.Value] = pv.Value
				ev.params[pk.Value] = pk.Line
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
		for _, e := range checkParams(ev) {
			line := ev.params[e.key]
			if line == 0 {
				line = n.Line
			}
			errs = append(errs, &LineError{Source: source, Line: line, Msg: fmt.Sprintf("events[%d]: params.%s: %s", idx, e.key, e.msg)})
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return ev, nil
}

// ParseDuration parses a Go duration ("300us", "1.5ms", "2s"); a bare 0 is
// allowed.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 300us, 2ms, 1s)", s)
	}
	return d, nil
}

type paramErr struct{ key, msg string }

// checkParams checks the parameters of ev's kind: known keys, parsable
// values in range.
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
			d, err = ParseDuration(v)
			if err == nil && d < 0 {
				err = fmt.Errorf("negative duration %s", v)
			}
		case "count", "class", "quanta":
			var n int
			n, err = strconv.Atoi(v)
			if err == nil && (n < 0 || k == "class" && n > 7 || k == "quanta" && n > 0xffff) {
				err = fmt.Errorf("%d out of range", n)
			}
		case "rate", "loss", "fraction", "ber":
			var f float64
			f, err = strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
			if strings.HasSuffix(v, "%") {
				f /= 100
			}
			if err == nil && (f < 0 || f > 1) {
				err = fmt.Errorf("%v is outside 0..1", f)
			}
		case "burst":
			var f float64
			f, err = strconv.ParseFloat(v, 64)
			if err == nil && f < 1 {
				err = fmt.Errorf("mean burst length %v < 1 packet", f)
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
		}
	}
	if ev.Kind == Degrade && ev.Params["loss"] == "" && ev.Params["delay"] == "" {
		out = append(out, paramErr{"loss", "degrade needs loss and/or delay"})
	}
	if ev.Kind == BlackHole && ev.Params["usid"] == "" {
		out = append(out, paramErr{"usid", "black_hole needs the uSID prefix (a switch name, host:h<N>/p<P> or a 16-bit number)"})
	}
	return out
}

func (ev *Event) float(k string, def float64) float64 {
	v, ok := ev.Params[k]
	if !ok {
		return def
	}
	pct := strings.HasSuffix(v, "%")
	f, _ := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if pct {
		f /= 100
	}
	return f
}

func (ev *Event) dur(k string, def time.Duration) time.Duration {
	v, ok := ev.Params[k]
	if !ok {
		return def
	}
	d, _ := ParseDuration(v)
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

// End is when the event's fault is undone (0 with no duration: never).
func (ev *Event) End() time.Duration {
	if ev.Kind == SwitchReboot && ev.Duration == 0 {
		return ev.At + ev.dur("boot", 0)
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
