package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mprdma"
	unit "github.com/vcluster/vcluster/units"
)

// FieldError is one problem with one config field. Its message is
//
//	<path>: <reason>, got <value>
//
// for example "fabric.planes: must be 1..16, got 0". Path is the dotted
// lowerCamel key as written in YAML or --set. String values are quoted. A
// nil Value omits the ", got" part (used for "unknown field").
//
// Validate and Load return a join (errors.Join) of *FieldError; use
// errors.As or the Unwrap() []error method to get at them.
type FieldError struct {
	Path   string
	Reason string
	Value  any
}

func (e *FieldError) Error() string {
	if e.Value == nil {
		return e.Path + ": " + e.Reason
	}
	return e.Path + ": " + e.Reason + ", got " + formatValue(e.Value)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// floatRanges is the allowed range of every float field outside the
// transports' sections (which state theirs: verbs.SectionChecker.Float),
// as the error message states it. Every float field must have a range (a
// test walks Config to check: floatRange): NaN and ±Inf are refused for
// each, on input and by Validate.
var floatRanges = map[string]string{
	"fabric.queue.ecn.pmax": "(0, 1] with preset custom",
	"run.realtimeSlowdown":  "[1, 1e+06]",
}

type validator struct {
	errs []error
	// rules, when not nil, records the rule each helper below applies to
	// a path, whether or not the value passes: Schema reads them, so the
	// documented ranges are the ones enforced.
	rules map[string]fieldRule
}

// fieldRule is one recorded rule: its kind (the value's format: "speed",
// "duration"; "" for a plain range or choice) and its text, and what a
// transport's section states besides (verbs.SectionChecker): a float
// range, a note, a unit.
type fieldRule struct{ kind, text, float, note, unit string }

func (v *validator) rule(path, kind, text string) {
	v.describe(path, func(r *fieldRule) { r.kind, r.text = kind, text })
}

// describe updates path's recorded rule with set (when recording).
func (v *validator) describe(path string, set func(*fieldRule)) {
	if v.rules != nil {
		r := v.rules[path]
		set(&r)
		v.rules[path] = r
	}
}

func (v *validator) add(path, reason string, value any) {
	v.errs = append(v.errs, &FieldError{Path: path, Reason: reason, Value: value})
}

func (v *validator) intRange(path string, x, lo, hi int) bool {
	v.rule(path, "", fmt.Sprintf("%d..%d", lo, hi))
	if x < lo || x > hi {
		v.add(path, fmt.Sprintf("must be %d..%d", lo, hi), x)
		return false
	}
	return true
}

// intRangeOrZero is intRange with 0 allowed too (0: off / unbounded).
func (v *validator) intRangeOrZero(path string, x, lo, hi int) bool {
	v.rule(path, "", fmt.Sprintf("0 or %d..%d", lo, hi))
	if x != 0 && (x < lo || x > hi) {
		v.add(path, fmt.Sprintf("must be 0 or %d..%d", lo, hi), x)
		return false
	}
	return true
}

func (v *validator) oneOf(path, x string, allowed ...string) bool {
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	v.rule(path, "", "one of "+strings.Join(q, ", "))
	if !slices.Contains(allowed, x) {
		v.add(path, "must be one of "+strings.Join(q, ", "), x)
		return false
	}
	return true
}

func (v *validator) speed(path, s string) {
	v.rule(path, "speed", fmt.Sprintf("%s..%s, with a unit", unit.FormatSpeed(MinLinkBps), unit.FormatSpeed(MaxLinkBps)))
	bps, err := unit.ParseSpeed(s)
	if err != nil {
		if hint := unit.SpeedHint(s); hint != "" {
			v.add(path, fmt.Sprintf("%q has no unit; did you mean %s? (a speed is %s..%s)", s, hint, unit.FormatSpeed(MinLinkBps), unit.FormatSpeed(MaxLinkBps)), nil)
			return
		}
		v.add(path, fmt.Sprintf(`must be a speed like "100G", "400Gbps" or "25000M", %s..%s`, unit.FormatSpeed(MinLinkBps), unit.FormatSpeed(MaxLinkBps)), s)
		return
	}
	if bps < MinLinkBps || bps > MaxLinkBps {
		v.add(path, fmt.Sprintf("must be %s..%s", unit.FormatSpeed(MinLinkBps), unit.FormatSpeed(MaxLinkBps)), s)
	}
}

// duration parses a Go duration, saying so when a bare number has no unit.
func (v *validator) duration(path, s, example string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, true
	}
	if t := strings.TrimSpace(s); unit.IsDecimal(t) && s != "0" {
		v.add(path, fmt.Sprintf("%q has no unit; did you mean %sus? (a Go duration: ns, us, ms, s)", s, t), nil)
	} else {
		v.add(path, fmt.Sprintf("must be a Go duration like %q", example), s)
	}
	return 0, false
}

func (v *validator) delay(path, s string) {
	v.rule(path, "duration", "0.."+shortDuration(MaxLinkDelay))
	d, ok := v.duration(path, s, "1us")
	switch {
	case !ok:
	case d < 0 || d > MaxLinkDelay:
		v.add(path, "must be 0.."+shortDuration(MaxLinkDelay), s)
	}
}

// boundedDuration checks a duration in [0, hi].
func (v *validator) boundedDuration(path, s string, hi time.Duration, example string) {
	v.rule(path, "duration", "0.."+shortDuration(hi))
	d, ok := v.duration(path, s, example)
	switch {
	case !ok:
	case d < 0 || d > hi:
		v.add(path, "must be 0.."+shortDuration(hi), s)
	}
}

// positiveDuration checks a required duration in (0, hi] and returns it.
func (v *validator) positiveDuration(path, s string, hi time.Duration) (time.Duration, bool) {
	v.rule(path, "duration", positiveDurationRule(hi))
	d, ok := v.duration(path, s, "10ms")
	switch {
	case !ok:
		return 0, false
	case d <= 0 || d > hi:
		v.add(path, "must be > 0 and ≤ "+shortDuration(hi), s)
		return 0, false
	}
	return d, true
}

// durationRange checks a required duration in [lo, hi].
func (v *validator) durationRange(path, s string, lo, hi time.Duration, example string) {
	r := shortDuration(lo) + ".." + shortDuration(hi)
	v.rule(path, "duration", r)
	d, ok := v.duration(path, s, example)
	if ok && (d < lo || d > hi) {
		v.add(path, "must be "+r, s)
	}
}

func positiveDurationRule(hi time.Duration) string { return "> 0 and ≤ " + shortDuration(hi) }

// shortDuration renders whole hours and minutes without the zero parts
// time.Duration.String adds ("1h", not "1h0m0s").
func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// finiteFloats refuses NaN and ±Inf in every float field of the struct val
// (a Config at the top), found by reflection, whatever the field's feature:
// a NaN compares false with every bound, so a range check alone would let
// it through.
func (v *validator) finiteFloats(val reflect.Value, prefix string) {
	for i := range val.NumField() {
		f := val.Type().Field(i)
		path := joinPath(prefix, fieldName(f))
		fv := val.Field(i)
		switch fv.Kind() {
		case reflect.Struct:
			v.finiteFloats(fv, path)
		case reflect.Float32, reflect.Float64:
			if x := fv.Float(); !isFinite(x) {
				v.errs = append(v.errs, nonFinite(path, x))
			}
		case reflect.Slice:
			if k := fv.Type().Elem().Kind(); k == reflect.Float32 || k == reflect.Float64 {
				for j := range fv.Len() {
					if x := fv.Index(j).Float(); !isFinite(x) {
						v.errs = append(v.errs, nonFinite(fmt.Sprintf("%s[%d]", path, j), x))
					}
				}
			}
		}
	}
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// nonFinite is the error for a NaN, an infinity or a number too large for
// a float64 (value is what the user wrote, or the float) in field path.
func nonFinite(path string, value any) *FieldError {
	base, _, _ := strings.Cut(path, "[")
	reason := "must be a finite number"
	if r := floatRange(base); r != "" {
		reason += " in " + r
	}
	return &FieldError{Path: path, Reason: reason + " (NaN and ±Inf are not numbers here)", Value: value}
}

func (t *TransportConfig) validate(v *validator) {
	v.oneOf("transport.kind", t.Kind, TransportKinds()...)
	v.intRange("transport.qpsPerConnection", t.QPsPerConnection, 1, 64)
	v.oneOf("transport.payload", t.Payload, PayloadReal, PayloadElided)
	t.validateSections(v)
}

// Validate checks every field and returns all problems at once, joined with
// errors.Join, each a *FieldError. A nil result means the config is usable.
// Validate does not modify c; fields that Normalize derives may be zero
// (see Normalize).
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate, recording into rules (when not nil) the rule each
// validator helper applies (Schema).
func (c *Config) validate(rules map[string]fieldRule) error {
	v := validator{rules: rules}
	v.finiteFloats(reflect.ValueOf(*c), "")
	// ECN preset auto is checked as what it resolves to for the transport.
	fab := c.Fabric
	fab.Queue.ECN = c.EffectiveECN()
	fab.validate(&v)
	if len(v.errs) == 0 {
		// Port names only mean something on a valid fabric.
		v.errs = append(v.errs, capturePortErrors(c)...)
	}
	c.Transport.validate(&v)
	c.validateTorMulticast(&v)
	c.validatePathQuality(&v)
	c.Run.validate(&v)
	c.validateSelected(&v)
	c.validateMultipath(&v)
	v.boundedDuration("host.nicTxLatency", c.Host.NICTxLatency, MaxNICLatency, "1us")
	v.boundedDuration("host.nicRxLatency", c.Host.NICRxLatency, MaxNICLatency, "1us")
	if c.Host.TCP && !c.Host.Netstack {
		v.add("host.tcp", "needs host.netstack", c.Host.TCP)
	}
	c.Output.validate(&v)
	return errors.Join(v.errs...)
}

func (o *OutputConfig) validate(v *validator) {
	if strings.TrimSpace(o.Dir) == "" {
		v.add("output.dir", "must not be empty", o.Dir)
	}
	v.oneOf("output.pcapFormat", o.PcapFormat, PcapFormatNG, PcapFormatClassic)
	v.intRange("output.pcapMaxPackets", o.PcapMaxPackets, 1, MaxPcapMaxPackets)
	if s := o.PcapSnaplen; s != 0 && (s < MinPcapSnaplen || s > MaxPcapSnaplen) {
		v.add("output.pcapSnaplen", fmt.Sprintf("must be 0 (whole frames) or %d..%d", MinPcapSnaplen, MaxPcapSnaplen), s)
	}
}

// CheckCapturePorts reports every name in c.Output.Pcap that names no port
// of the fabric c describes, and every name listed twice, without building
// the fabric: it knows the names the topology builders give (Clos:
// h<host>/p<plane>, p<plane>.t0.<i>/<port>, p<plane>.t1.<i>/<port>;
// fat-tree: h<host>/p0, edge.<pod>.<i>/<port>, agg.<pod>.<i>/<port>,
// core.<i>/<port>; numbers in decimal without leading zeros), and says
// what the valid ranges are. Validate calls it once the fabric fields are
// valid; on an invalid fabric it reports that instead.
func CheckCapturePorts(c Config) error {
	return errors.Join(capturePortErrors(&c)...)
}

func capturePortErrors(c *Config) []error {
	if len(c.Output.Pcap) == 0 {
		return nil
	}
	rules, ok := portRules(c.Fabric)
	if !ok {
		return []error{&FieldError{Path: "output.pcap", Reason: "cannot be checked: the fabric fields are invalid"}}
	}
	var errs []error
	seen := map[string]bool{}
	for _, name := range c.Output.Pcap {
		if seen[name] {
			errs = append(errs, &FieldError{Path: "output.pcap", Reason: fmt.Sprintf("lists port %q twice", name)})
			continue
		}
		seen[name] = true
		if why := checkPortName(rules, name); why != "" {
			errs = append(errs, &FieldError{Path: "output.pcap", Reason: fmt.Sprintf("no port named %q: %s", name, why)})
		}
	}
	return errs
}

// portRule is one kind of port name: pattern, with '#' for each number,
// the count of values of each number (0..n-1) and the ranges in words.
type portRule struct {
	pattern string
	n       []int
	ranges  string
}

// portRules returns the port names of the fabric f describes, or false
// when its shape is not valid.
func portRules(f FabricConfig) ([]portRule, bool) {
	hosts := func(n, planes int) portRule {
		r := portRule{"h#/p#", []int{n, planes}, fmt.Sprintf("hosts are h0..h%d, planes p0..p%d", n-1, planes-1)}
		if planes == 1 {
			r.ranges = fmt.Sprintf("hosts are h0..h%d, plane p0", n-1)
		}
		return r
	}
	sw := func(what, pattern string, n ...int) portRule {
		r := portRule{pattern: pattern, n: n}
		text := pattern
		for _, x := range n {
			text = strings.Replace(text, "#", fmt.Sprintf("<0..%d>", x-1), 1)
		}
		r.ranges = what + " ports are " + text
		return r
	}
	switch f.Topology {
	case TopologyClos:
		t0 := f.T0PerPlane
		if t0 == 0 && f.HostsPerT0 > 0 && f.Hosts%f.HostsPerT0 == 0 {
			t0 = f.Hosts / f.HostsPerT0
		}
		if f.Planes < 1 || f.HostsPerT0 < 1 || t0 < 1 || f.T1PerPlane < 1 {
			return nil, false
		}
		return []portRule{
			hosts(f.HostsPerT0*t0, f.Planes),
			sw("T0 switch", "p#.t0.#/#", f.Planes, t0, f.HostsPerT0+f.T1PerPlane),
			sw("T1 switch", "p#.t1.#/#", f.Planes, f.T1PerPlane, t0),
		}, true
	case TopologyFatTree:
		if !validK(f.K) {
			return nil, false
		}
		k, h := f.K, f.K/2
		return []portRule{
			hosts(k*k*k/4, 1),
			sw("edge switch", "edge.#.#/#", k, h, k),
			sw("aggregation switch", "agg.#.#/#", k, h, k),
			sw("core switch", "core.#/#", h*h, k),
		}, true
	}
	return nil, false
}

// checkPortName returns "" when name is a port of rules, else why not: the
// ranges of the rule it fits but for a number out of range, or of every
// rule.
func checkPortName(rules []portRule, name string) string {
	var all []string
	for _, r := range rules {
		nums, ok := scanPortName(name, r.pattern)
		if !ok {
			all = append(all, r.ranges)
			continue
		}
		for i, x := range nums {
			if x >= r.n[i] {
				return r.ranges
			}
		}
		return ""
	}
	return strings.Join(all, "; ")
}

// scanPortName matches name against pattern ('#': a decimal number without
// sign or leading zeros, as the builders print them) and returns the
// numbers.
func scanPortName(name, pattern string) ([]int, bool) {
	var nums []int
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '#' {
			if name == "" || name[0] != pattern[i] {
				return nil, false
			}
			name = name[1:]
			continue
		}
		d := 0
		for d < len(name) && name[d] >= '0' && name[d] <= '9' {
			d++
		}
		if d == 0 || d > 9 || (d > 1 && name[0] == '0') {
			return nil, false
		}
		n, _ := strconv.Atoi(name[:d])
		nums = append(nums, n)
		name = name[d:]
	}
	return nums, name == ""
}

func (f *FabricConfig) validate(v *validator) {
	v.oneOf("fabric.topology", f.Topology, TopologyClos, TopologyFatTree)
	if f.Preset != "" {
		if _, ok := presets[f.Preset]; !ok {
			v.add("fabric.preset", `must be "" or one of `+strings.Join(PresetNames(), ", "), f.Preset)
		}
	}
	switch f.Topology {
	case TopologyClos:
		f.validateClos(v)
	case TopologyFatTree:
		f.validateFatTree(v)
	}

	v.speed("fabric.hostLinkSpeed", f.HostLinkSpeed)
	v.speed("fabric.fabricLinkSpeed", f.FabricLinkSpeed)
	v.delay("fabric.hostLinkDelay", f.HostLinkDelay)
	v.delay("fabric.fabricLinkDelay", f.FabricLinkDelay)
	v.boundedDuration("fabric.switchLatency", f.SwitchLatency, MaxSwitchLatency, "500ns")
	if f.ECMPReconvergence != "" {
		v.boundedDuration("fabric.ecmpReconvergence", f.ECMPReconvergence, MaxECMPReconvergence, "50ms")
	}
	mtuOK := v.intRange("fabric.mtu", f.MTU, MinMTU, MaxMTU)
	v.oneOf("fabric.forwarding", f.Forwarding, forwardingNames()...)
	v.intRange("fabric.ifgBytes", f.IFGBytes, 0, MaxIFGBytes)
	f.Queue.validate(v, f.MTU, mtuOK, f.ECNRates())
	f.TorMulticast.validate(v)
}

func (t *TorMulticastConfig) validate(v *validator) {
	v.oneOf("fabric.torMulticast.mode", t.Mode, TorMulticastAuto, TorMulticastOn, TorMulticastOff)
	v.intRange("fabric.torMulticast.groups", t.Groups, 1, fabric.MaxTorGroups)
	v.durationRange("fabric.torMulticast.idleTimeout", t.IdleTimeout, fabric.MinTorIdleTimeout, fabric.MaxTorIdleTimeout, "1ms")
	v.intRange("fabric.torMulticast.dedupEntries", t.DedupEntries, 1, fabric.MaxTorDedupEntries)
	v.durationRange("fabric.torMulticast.dedupWindow", t.DedupWindow, fabric.MinTorDedupWindow, fabric.MaxTorDedupWindow, "100us")
}

// validateTorMulticast checks what the programmable ToRs need of the rest
// of the config once they are on: the copies are routed by path address,
// which uSID forwarding ignores (docs/addressing.md).
func (c *Config) validateTorMulticast(v *validator) {
	// auto is on only for orderre, whose own rule already names
	// fabric.forwarding under usid: one error for one mistake.
	if c.TorMulticastEnabled() && c.Fabric.Forwarding == ForwardingUSID && c.Fabric.TorMulticast.Mode == TorMulticastOn {
		v.add("fabric.torMulticast.mode", "on needs fabric.forwarding ecmp, static or pathquality (the ToR routes FReTx copies by path address, which usid forwarding ignores); set fabric.forwarding or mode off", c.Fabric.TorMulticast.Mode)
	}
}

func (f *FabricConfig) validateClos(v *validator) {
	planesOK := v.intRange("fabric.planes", f.Planes, 1, MaxPlanes)
	hptOK := v.intRange("fabric.hostsPerT0", f.HostsPerT0, 1, MaxSwitchDim)
	if hptOK && f.Forwarding == ForwardingUSID && f.HostsPerT0 >= MaxSwitchDim {
		// Host-port uSIDs are port+1 in 10 bits (docs/addressing.md).
		v.add("fabric.hostsPerT0", fmt.Sprintf("must be ≤ %d with forwarding usid", MaxSwitchDim-1), f.HostsPerT0)
	}
	t1OK := v.intRange("fabric.t1PerPlane", f.T1PerPlane, 1, MaxSwitchDim)
	if f.Hosts < 0 {
		v.add("fabric.hosts", "must be ≥ 0 (0 = hostsPerT0 × t0PerPlane)", f.Hosts)
		return
	}
	if f.Hosts > MaxHosts {
		v.add("fabric.hosts", fmt.Sprintf("must be ≤ %d (cluster B, the largest supported)", MaxHosts), f.Hosts)
		return
	}
	t0 := f.T0PerPlane
	if t0 == 0 && f.Hosts > 0 {
		// t0PerPlane derives from hosts.
		if !hptOK {
			return
		}
		if f.Hosts%f.HostsPerT0 != 0 {
			v.add("fabric.hosts", fmt.Sprintf("must be a multiple of fabric.hostsPerT0 (%d)", f.HostsPerT0), f.Hosts)
			return
		}
		t0 = f.Hosts / f.HostsPerT0
		if t0 > MaxSwitchDim {
			v.add("fabric.hosts", fmt.Sprintf("must be ≤ fabric.hostsPerT0 × %d (%d)", MaxSwitchDim, f.HostsPerT0*MaxSwitchDim), f.Hosts)
			return
		}
	} else {
		if !v.intRange("fabric.t0PerPlane", t0, 1, MaxSwitchDim) || !hptOK {
			return
		}
		if f.Hosts != 0 && f.Hosts != f.HostsPerT0*t0 {
			v.add("fabric.hosts", fmt.Sprintf("must equal fabric.hostsPerT0 × fabric.t0PerPlane (%d × %d = %d)",
				f.HostsPerT0, t0, f.HostsPerT0*t0), f.Hosts)
			return
		}
	}
	hosts := f.HostsPerT0 * t0
	if hosts > MaxHosts {
		v.add("fabric.hosts", fmt.Sprintf("must be ≤ %d (cluster B, the largest supported): fabric.hostsPerT0 × fabric.t0PerPlane is %d × %d",
			MaxHosts, f.HostsPerT0, t0), hosts)
		return
	}
	if !planesOK || !t1OK {
		return
	}
	// Every T0 has its hosts and one uplink per T1, every T1 one downlink
	// per T0, every NIC one port per plane; each port drives one link.
	if ports := f.Planes * (t0*(f.HostsPerT0+2*f.T1PerPlane) + hosts); ports > MaxPorts {
		v.add("fabric.t1PerPlane", fmt.Sprintf("makes %d ports (planes × (t0PerPlane × (hostsPerT0 + 2 × t1PerPlane) + hosts) = %d × (%d × (%d + 2 × %d) + %d)): must be ≤ %d",
			ports, f.Planes, t0, f.HostsPerT0, f.T1PerPlane, hosts, MaxPorts), f.T1PerPlane)
	}
}

func (f *FabricConfig) validateFatTree(v *validator) {
	if f.Planes != 0 && f.Planes != 1 {
		v.add("fabric.planes", "must be 1 for topology fattree", f.Planes)
	}
	if !validK(f.K) {
		v.add("fabric.k", fmt.Sprintf("must be an even number %d..%d for topology fattree", MinFatTreeK, MaxFatTreeK), f.K)
		return
	}
	if want := f.K * f.K * f.K / 4; f.Hosts != 0 && f.Hosts != want {
		v.add("fabric.hosts", fmt.Sprintf("must be k³/4 = %d for a k=%d fat-tree (or 0 to derive)", want, f.K), f.Hosts)
	}
	// The fat-tree has one link speed and delay throughout.
	if a, b := speedOrZero(f.HostLinkSpeed), speedOrZero(f.FabricLinkSpeed); a != 0 && b != 0 && a != b {
		v.add("fabric.fabricLinkSpeed", "must equal fabric.hostLinkSpeed for topology fattree (one link speed)", f.FabricLinkSpeed)
	}
	if a, b := f.HostLinkDelay, f.FabricLinkDelay; durationOrZero(a) != durationOrZero(b) {
		v.add("fabric.fabricLinkDelay", "must equal fabric.hostLinkDelay for topology fattree (one link delay)", b)
	}
	// The uSID plan has 10 bits of switch index per tier (docs/addressing.md).
	if f.Forwarding == ForwardingUSID && f.K*f.K/2 > 1024 {
		v.add("fabric.k", "must be ≤ 44 with forwarding usid (k²/2 edge switches must fit the uSID plan's 1024)", f.K)
	}
}

func (q *QueueConfig) validate(v *validator, mtu int, mtuOK bool, rates []uint64) {
	switch {
	case q.BufferBytes <= 0 || q.BufferBytes > MaxBufferBytes:
		v.add("fabric.queue.bufferBytes", fmt.Sprintf("must be > 0 and ≤ %d (256 MiB: no switch chip has more buffer for one port)", MaxBufferBytes), q.BufferBytes)
	case mtuOK && q.BufferBytes < 2*mtu:
		v.add("fabric.queue.bufferBytes", fmt.Sprintf("must be ≥ 2 × fabric.mtu (%d)", 2*mtu), q.BufferBytes)
	}
	buf := q.BufferBytes

	if e := q.ECN; e.Enabled {
		v.oneOf("fabric.queue.ecn.preset", e.Preset, ECNPresetNames()...)
		if e.Preset == ECNCustom {
			switch {
			case e.KmaxBytes <= 0:
				v.add("fabric.queue.ecn.kmaxBytes", "must be > 0 with preset custom (give kminBytes, kmaxBytes and pmax)", e.KmaxBytes)
			case e.KminBytes < 0:
				v.add("fabric.queue.ecn.kminBytes", "must be ≥ 0", e.KminBytes)
			case e.KminBytes >= e.KmaxBytes:
				v.add("fabric.queue.ecn.kminBytes", fmt.Sprintf("must be < fabric.queue.ecn.kmaxBytes (%d)", e.KmaxBytes), e.KminBytes)
			}
			if e.KmaxBytes > buf {
				v.add("fabric.queue.ecn.kmaxBytes", fmt.Sprintf("must be ≤ fabric.queue.bufferBytes (%d)", buf), e.KmaxBytes)
			}
			if isFinite(e.Pmax) && !(e.Pmax > 0 && e.Pmax <= 1) { // NaN/Inf: finiteFloats
				v.add("fabric.queue.ecn.pmax", "must be in "+floatRanges["fabric.queue.ecn.pmax"], e.Pmax)
			}
		} else if slices.Contains(ECNPresetNames(), e.Preset) {
			why := fmt.Sprintf("must be 0 unless fabric.queue.ecn.preset is custom (preset %q sets it)", e.Preset)
			if e.KminBytes != 0 {
				v.add("fabric.queue.ecn.kminBytes", why, e.KminBytes)
			}
			if e.KmaxBytes != 0 {
				v.add("fabric.queue.ecn.kmaxBytes", why, e.KmaxBytes)
			}
			if isFinite(e.Pmax) && e.Pmax != 0 {
				v.add("fabric.queue.ecn.pmax", why, e.Pmax)
			}
		}
		// A preset's Kmax must fit the buffer at every marking rate (htsim's
		// depends on the base RTT: checked where the fabric is built).
		if _, fixed := fixedECN[e.Preset]; fixed || e.Preset == ECNHPCC {
			for _, r := range rates {
				if r == 0 {
					continue
				}
				if t := e.Thresholds(r, 0, 0); t.KmaxBytes > buf {
					v.add("fabric.queue.bufferBytes", fmt.Sprintf("must be ≥ %d, the Kmax of fabric.queue.ecn.preset %q at %s (or choose another preset)", t.KmaxBytes, e.Preset, unit.FormatSpeed(r)), buf)
				}
			}
		}
	}

	if t := q.Trim; t.Enabled {
		v.intRange("fabric.queue.trim.sizeBytes", t.SizeBytes, MinTrimBytes, MaxTrimBytes)
	}

	if p := q.PFC; p.Enabled {
		if len(p.Priorities) == 0 {
			v.add("fabric.queue.pfc.priorities", fmt.Sprintf("must list at least one priority 0..%d", MaxPriority), p.Priorities)
		}
		seen := map[int]bool{}
		dup := false
		for i, pr := range p.Priorities {
			if pr < 0 || pr > MaxPriority {
				v.add(fmt.Sprintf("fabric.queue.pfc.priorities[%d]", i), fmt.Sprintf("must be 0..%d", MaxPriority), pr)
			}
			dup = dup || seen[pr]
			seen[pr] = true
		}
		if dup {
			v.add("fabric.queue.pfc.priorities", "must not list a priority twice", p.Priorities)
		}
		v.oneOf("fabric.queue.pfc.mode", p.Mode, PFCStatic, PFCDynamic)
		if p.SharedBufferBytes < 0 || p.SharedBufferBytes > MaxBufferBytes {
			v.add("fabric.queue.pfc.sharedBufferBytes", fmt.Sprintf("must be 0..%d (0 = ports × bufferBytes)", MaxBufferBytes), p.SharedBufferBytes)
		}
		if p.XonBytes < 0 {
			v.add("fabric.queue.pfc.xonBytes", "must be ≥ 0", p.XonBytes)
		}
		if p.XoffBytes <= p.XonBytes {
			v.add("fabric.queue.pfc.xoffBytes", fmt.Sprintf("must be > fabric.queue.pfc.xonBytes (%d)", p.XonBytes), p.XoffBytes)
		}
		if p.XoffBytes >= buf {
			v.add("fabric.queue.pfc.xoffBytes", fmt.Sprintf("must be < fabric.queue.bufferBytes (%d)", buf), p.XoffBytes)
		}
		if p.HeadroomBytes < 0 || p.HeadroomBytes > MaxBufferBytes {
			v.add("fabric.queue.pfc.headroomBytes", fmt.Sprintf("must be 0..%d (0 = 3 × rate × delay)", MaxBufferBytes), p.HeadroomBytes)
		}
		if w := p.Watchdog; w.Enabled {
			v.positiveDuration("fabric.queue.pfc.watchdog.detection", w.Detection, MaxWatchdog)
			if w.Restoration != "" {
				v.positiveDuration("fabric.queue.pfc.watchdog.restoration", w.Restoration, MaxWatchdog)
			}
			v.oneOf("fabric.queue.pfc.watchdog.action", w.Action, WatchdogDrop, WatchdogForward, WatchdogAlert)
		}
	}
}

func (r *RunConfig) validate(v *validator) {
	v.oneOf("run.pacing", r.Pacing, PacingSimulated, PacingRealtime)
	v.positiveDuration("run.duration", r.Duration, MaxRunDuration)
	if s := r.RealtimeSlowdown; isFinite(s) && !(s >= 1 && s <= MaxRealtimeSlowdown) { // NaN/Inf: finiteFloats
		v.add("run.realtimeSlowdown", "must be in "+floatRanges["run.realtimeSlowdown"], s)
	}
}

// IsMPRDMAKind reports whether kind is one of package mprdma's (mprdma,
// random, orderre): multipath by destination address.
func IsMPRDMAKind(kind string) bool {
	return kind == TransportMPRDMA || kind == TransportRandom || kind == TransportOrderRE
}

// OfferedPaths is how many distinct paths path addresses name between two
// hosts under different leaves of the fabric f describes
// (docs/addressing.md): a Clos, planes × t1PerPlane (a path per plane and
// spine); a fat-tree, k/2 (the path address fixes the member of every
// multi-member next-hop group, so the edge's aggregation choice and the
// aggregation's core choice move together). 0 for a shape it cannot read.
func (f FabricConfig) OfferedPaths() int {
	switch f.Topology {
	case TopologyClos:
		return max(f.Planes, 0) * max(f.T1PerPlane, 0)
	case TopologyFatTree:
		return max(f.K/2, 0)
	}
	return 0
}

// validateMultipath checks what the mprdma kinds need of the fabric while
// one of them is selected: path addresses are routed only by ECMP, static
// and pathquality (weighted ECMP) forwarding (uSID routes by segment list: docs/addressing.md), and
// transport.mprdma.paths can name only paths the fabric has.
func (c *Config) validateMultipath(v *validator) {
	if !IsMPRDMAKind(c.Transport.Kind) {
		return
	}
	f := c.Fabric.Forwarding
	if f != ForwardingECMP && f != ForwardingStatic && f != ForwardingPathQuality && slices.Contains(forwardingNames(), f) {
		v.add("fabric.forwarding", fmt.Sprintf("must be %q, %q or %q with transport.kind %s (path addresses are routed only there; docs/addressing.md)",
			ForwardingECMP, ForwardingStatic, ForwardingPathQuality, c.Transport.Kind), f)
	}
	n, p := c.Fabric.OfferedPaths(), c.Transport.MPRDMA.Paths
	if n > 0 && p > min(n, mprdma.MaxPaths) && p <= mprdma.MaxPaths {
		v.add("transport.mprdma.paths", fmt.Sprintf("must be 0 (every path) or 1..%d: the fabric offers %d paths (%s)",
			min(n, mprdma.MaxPaths), n, c.Fabric.offeredPathsText()), p)
	}
}

func (f FabricConfig) offeredPathsText() string {
	if f.Topology == TopologyFatTree {
		return fmt.Sprintf("k/2 = %d/2", f.K)
	}
	return fmt.Sprintf("planes × t1PerPlane = %d × %d", f.Planes, f.T1PerPlane)
}

// forwardingNames lists the fabric's registered forwarding modes' config
// words, in mode order: a new mode (one file in fabric/) is valid here
// without an edit.
func forwardingNames() []string {
	var names []string
	for _, m := range fabric.ForwardingModes() {
		names = append(names, m.String())
	}
	return names
}
