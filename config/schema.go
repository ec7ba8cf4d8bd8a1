package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Field is one leaf of the config schema: what docs/config.md's field
// tables show (TestConfigDocIsCurrent renders them from Schema).
type Field struct {
	Path     string // dotted lowerCamel key, as in YAML and --set
	GoType   string // the Go type of the field ("int", "[]string", …)
	YAMLType string // what to write: int, uint64, float, bool, string, speed, duration, list of …
	Default  string // the value in Default(), as YAML writes it
	Unit     string // unit of the value, "" when it has none
	// Rule is what Validate accepts. The ranges and choices that the
	// validator's helpers check are recorded from Validate itself; the
	// rest (relations between fields, checks written inline) come from
	// inlineRules, float ranges from floatRanges.
	Rule string
	// FreeForm is why the field takes any value of its type ("" for a
	// field with a rule).
	FreeForm string
	// When is the condition under which Rule is checked ("" = always).
	When string
}

// inlineRules states what Validate checks on a field in code of its own
// rather than through a validator helper (so nothing is recorded), or adds
// the cross-field conditions to a recorded range. For a field with a
// recorded rule the text is appended to it.
var inlineRules = map[string]string{
	"fabric.preset":                         `"" or one of ` + quoteAll(PresetNames()) + " (see Presets)",
	"fabric.planes":                         "fattree: must be 1 (derived)",
	"fabric.hosts":                          fmt.Sprintf("0..%d (MaxHosts); 0 = derive. clos: must equal hostsPerT0 × t0PerPlane; fattree: k³/4", MaxHosts),
	"fabric.hostsPerT0":                     fmt.Sprintf("≤ %d with forwarding usid (host-port uSIDs are port+1 in 10 bits); fattree: unused (0)", MaxSwitchDim-1),
	"fabric.t0PerPlane":                     "0 = derive from fabric.hosts; fattree: unused (0)",
	"fabric.t1PerPlane":                     fmt.Sprintf("the fabric's ports, planes × (t0PerPlane × (hostsPerT0 + 2 × t1PerPlane) + hosts), ≤ %d (MaxPorts); fattree: unused (0)", MaxPorts),
	"fabric.k":                              fmt.Sprintf("even, %d..%d (≤ 44 with forwarding usid: k²/2 edge switches in the uSID plan's 1024); clos: unused (0)", MinFatTreeK, MaxFatTreeK),
	"fabric.fabricLinkSpeed":                "fattree: must equal fabric.hostLinkSpeed",
	"fabric.fabricLinkDelay":                "fattree: must equal fabric.hostLinkDelay",
	"fabric.forwarding":                     "ecmp, static or pathquality with transport.kind mprdma, random or orderre (path addresses); pathquality needs fabric.pathQuality.mode auto or on",
	"transport.mprdma.paths":                "with kind mprdma, random or orderre: ≤ the paths the fabric offers (clos: planes × t1PerPlane; fattree: k/2)",
	"fabric.ecmpReconvergence":              `or "": never (the ECMP groups stay as built); used with forwarding ecmp and pathquality`,
	"fabric.queue.bufferBytes":              fmt.Sprintf("> 0 and ≤ %d (MaxBufferBytes, 256 MiB); ≥ 2 × fabric.mtu", MaxBufferBytes),
	"fabric.queue.ecn.preset":               "its Kmax at the fabric link rate (and the host link rate with lastHop) ≤ fabric.queue.bufferBytes, else bufferBytes is refused; htsim's is checked when the fabric is built (it depends on the base RTT)",
	"fabric.queue.ecn.kminBytes":            "custom: ≥ 0 and < fabric.queue.ecn.kmaxBytes; other presets: 0",
	"fabric.queue.ecn.kmaxBytes":            "custom: ≤ fabric.queue.bufferBytes; other presets: 0",
	"fabric.queue.pfc.priorities":           fmt.Sprintf("at least one; each 0..%d; no duplicates", MaxPriority),
	"fabric.queue.pfc.sharedBufferBytes":    fmt.Sprintf("0..%d; 0 = the switch's ports × fabric.queue.bufferBytes; used in mode dynamic", MaxBufferBytes),
	"fabric.queue.pfc.xoffBytes":            "> fabric.queue.pfc.xonBytes and < fabric.queue.bufferBytes (checked in both modes, used in static)",
	"fabric.queue.pfc.xonBytes":             "≥ 0",
	"fabric.queue.pfc.headroomBytes":        fmt.Sprintf("0..%d; 0 = 3 × rate × delay of the port's link (its propagation delay + fabric.switchLatency)", MaxBufferBytes),
	"fabric.queue.pfc.watchdog.restoration": `or "": 2 × detection`,
	"fabric.torMulticast.mode":              `auto: on when transport.kind is orderre; on (or auto, on) needs fabric.forwarding ecmp, static or pathquality`,
	"fabric.pathQuality.mode":               "checked always; auto: on when fabric.forwarding is pathquality; on under ecmp, static or usid measures and advertises without steering; off is refused with forwarding pathquality",
	"fabric.pathQuality.delayRef":           "0s = 10 × hdc.rdmaThreshold",
	"host.tcp":                              "true needs host.netstack",
	"output.dir":                            "not empty",
	"output.pcap":                           "each a port of this fabric (h<host>/p<plane> or a switch port, see CheckCapturePorts), no duplicates",
	"output.pcapSnaplen":                    fmt.Sprintf("0 (whole frames) or %d..%d", MinPcapSnaplen, MaxPcapSnaplen),
}

// freeForm lists the fields that take any value of their type, and why.
var freeForm = map[string]string{
	"seed":            "any uint64: every random stream of the run derives from it",
	"fabric.ecmpSeed": "any uint64: seeds the switches' ECMP hash",
}

// units names the unit of fields whose name or format does not say it
// (*Bytes fields are bytes, speeds bit/s, durations a time).
var units = map[string]string{
	"fabric.mtu":                         "bytes",
	"fabric.torMulticast.groups":         "entries",
	"fabric.torMulticast.dedupEntries":   "entries",
	"fabric.pathQuality.damping.minGbps": "Gb/s",
	"fabric.pathQuality.hdc.maxRecords":  "records",
	"fabric.pathQuality.hdc.snapLen":     "bytes",
	"run.realtimeSlowdown":               "wall s per simulated s",
}

// checkedWhen is when Validate checks a section's fields, or one field
// (every other field is checked always).
var checkedWhen = map[string]string{
	"fabric.hostsPerT0":         "fabric.topology is clos",
	"fabric.t0PerPlane":         "fabric.topology is clos",
	"fabric.t1PerPlane":         "fabric.topology is clos",
	"fabric.k":                  "fabric.topology is fattree",
	"fabric.queue.ecn":          "fabric.queue.ecn.enabled",
	"fabric.queue.trim":         "fabric.queue.trim.enabled",
	"fabric.queue.pfc":          "fabric.queue.pfc.enabled",
	"fabric.queue.pfc.watchdog": "fabric.queue.pfc.enabled and fabric.queue.pfc.watchdog.enabled",
	"fabric.pathQuality":        "fabric.pathQuality is on (mode on, or auto with fabric.forwarding pathquality)",
}

// schemaProbe is the config whose validation records the rules: the
// default with every optional check switched on (PFC and its watchdog,
// the optional timeouts set), so that every helper runs.
func schemaProbe() Config {
	c := Default()
	q := &c.Fabric.Queue
	q.ECN.Enabled, q.Trim.Enabled, q.PFC.Enabled, q.PFC.Watchdog.Enabled = true, true, true, true
	c.Fabric.ECMPReconvergence = "50ms"
	c.Fabric.PathQuality.Mode = PathQualityOn
	return c
}

// Schema lists every leaf field of Config in declaration order with its
// types, default, unit, rule and the condition under which the rule
// holds. The recorded part of each rule is what Validate itself applies.
func Schema() []Field {
	probe := schemaProbe()
	rules := map[string]fieldRule{}
	_ = probe.validate(rules) // the rules are recorded whether or not the probe passes
	def := Default()
	var out []Field
	var walk func(t reflect.Type, v reflect.Value, prefix, when string)
	walk = func(t reflect.Type, v reflect.Value, prefix, when string) {
		for i := range t.NumField() {
			sf := t.Field(i)
			path := joinPath(prefix, fieldName(sf))
			if sf.Type.Kind() == reflect.Struct {
				w := when
				if s, ok := checkedWhen[path]; ok {
					w = s
				}
				walk(sf.Type, v.Field(i), path, w)
				continue
			}
			f := Field{Path: path, GoType: sf.Type.String(), Default: yamlValue(v.Field(i)), FreeForm: freeForm[path]}
			r := rules[path]
			f.YAMLType = yamlType(sf.Type, r.kind)
			f.Unit = unitOf(path, r)
			f.Rule = joinRule(r.text, floatRange(path), inlineRules[path], r.note)
			if f.Rule == "" && sf.Type.Kind() == reflect.Bool {
				f.Rule = "true or false"
			}
			switch {
			case checkedWhen[path] != "":
				f.When = checkedWhen[path]
			case f.Rule != "true or false":
				f.When = when // a switch (an enabled flag) is never itself checked
			}
			out = append(out, f)
		}
	}
	walk(configType, reflect.ValueOf(def), "", "")
	return out
}

func joinRule(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

func yamlType(t reflect.Type, kind string) string {
	if kind != "" {
		return kind
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list of " + yamlType(t.Elem(), "")
	case reflect.Float64:
		return "float"
	}
	return t.Kind().String()
}

func unitOf(path string, r fieldRule) string {
	kind := r.kind
	switch {
	case r.unit != "":
		return r.unit
	case units[path] != "":
		return units[path]
	case kind == "speed":
		return "bit/s"
	case kind == "duration":
		return "time"
	case strings.HasSuffix(path, "Bytes"):
		return "bytes"
	}
	return ""
}

// yamlValue renders a default as it reads in YAML: "" for the empty
// string, [a, b] for lists.
func yamlValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return `""`
		}
		return v.String()
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		items := make([]string, v.Len())
		for i := range items {
			items[i] = yamlValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}
