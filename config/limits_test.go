package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// floatPaths lists the dotted key of every float64 field of Config, found
// by reflection so that a new field is covered without editing the test.
func floatPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		path := joinPath(prefix, fieldName(f))
		switch f.Type.Kind() {
		case reflect.Struct:
			out = append(out, floatPaths(f.Type, path)...)
		case reflect.Float32, reflect.Float64:
			out = append(out, path)
		case reflect.Slice:
			if k := f.Type.Elem().Kind(); k == reflect.Float32 || k == reflect.Float64 {
				out = append(out, path)
			}
		}
	}
	return out
}

// yamlFor nests a dotted key and a raw YAML scalar into a document.
func yamlFor(path, raw string) string {
	parts := strings.Split(path, ".")
	s := parts[len(parts)-1] + ": " + raw
	for i := len(parts) - 2; i >= 0; i-- {
		s = parts[i] + ": {" + s + "}"
	}
	return s
}

// Every float field refuses NaN and ±Inf, however they are written, in
// --set and in YAML, with the field named, the reason and its range — and
// Validate refuses them in a Config built in code, whether or not the
// feature the field belongs to is on.
func TestNonFiniteFloatsRejected(t *testing.T) {
	paths := floatPaths(configType, "")
	if len(paths) == 0 {
		t.Fatal("no float fields found")
	}
	for _, path := range paths {
		rng := floatRange(path)
		if rng == "" {
			t.Errorf("%s: float field without a range (floatRanges, or its section's SectionChecker.Float)", path)
			continue
		}
		for _, raw := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "infinity", "1e999", "-1e999"} {
			_, err := Load("", []string{path + "=" + raw})
			checkFinite(t, "--set "+path+"="+raw, err, path, rng)
		}
		for _, raw := range []string{".nan", ".NaN", ".inf", "-.inf", "+.Inf", "1e999", "NaN", "Infinity"} {
			_, err := Load(writeYAML(t, yamlFor(path, raw)), nil)
			checkFinite(t, "YAML "+yamlFor(path, raw), err, path, rng)
		}
	}
	// A Config built in code: set every float field to NaN in turn, with
	// ECN (where pmax lives) off.
	for _, path := range paths {
		c := Default()
		c.Fabric.Queue.ECN.Enabled = false
		setFloat(t, reflect.ValueOf(&c).Elem(), strings.Split(path, "."), nanValue())
		checkFinite(t, "Validate with "+path+" = NaN", c.Validate(), path, floatRange(path))
	}
}

func nanValue() float64 { var z float64; return z / z }

func setFloat(t *testing.T, v reflect.Value, parts []string, x float64) {
	t.Helper()
	for _, p := range parts {
		f, ok := fieldByKey(v.Type(), p)
		if !ok {
			t.Fatalf("no field %s", p)
		}
		v = v.FieldByIndex(f.Index)
	}
	v.SetFloat(x)
}

func checkFinite(t *testing.T, what string, err error, path, rng string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", what)
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Errorf("%s: error %q does not name %s", what, err, path)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, "finite") || !strings.Contains(msg, rng) {
		t.Errorf("%s: error %q does not say the value must be finite and in %s", what, msg, rng)
	}
}

// A speed is a number with a unit: a bare number is refused with the unit
// suggested, in --set and in YAML; speeds are 1M..1.6T.
func TestSpeedNeedsUnitAndRange(t *testing.T) {
	_, err := Load("", []string{"fabric.hostLinkSpeed=100"})
	if err == nil || !strings.Contains(err.Error(), `fabric.hostLinkSpeed: "100" has no unit; did you mean 100G?`) {
		t.Errorf("--set fabric.hostLinkSpeed=100: %v", err)
	}
	_, err = Load(writeYAML(t, "fabric: {fabricLinkSpeed: 25000000000}"), nil)
	if err == nil || !strings.Contains(err.Error(), `fabric.fabricLinkSpeed: "25000000000" has no unit; did you mean 25G?`) {
		t.Errorf("YAML fabricLinkSpeed: 25000000000: %v", err)
	}
	for _, s := range []string{"500k", "999999bps", "1.7T", "3.2T"} {
		_, err := Load("", []string{"fabric.hostLinkSpeed=" + s, "fabric.fabricLinkSpeed=" + s})
		if err == nil || !strings.Contains(err.Error(), "fabric.hostLinkSpeed") || !strings.Contains(err.Error(), "1M..1.6T") {
			t.Errorf("speed %s: %v; want refused with the range 1M..1.6T", s, err)
		}
	}
	for _, s := range []string{"1M", "1000000bps", "1.6T", "1600G"} {
		if _, err := Load("", []string{"fabric.hostLinkSpeed=" + s, "fabric.fabricLinkSpeed=" + s}); err != nil {
			t.Errorf("speed %s: %v", s, err)
		}
	}
}

// Sizes, counts and durations that feed allocation or timers have a
// documented maximum.
func TestSizesCountsDurationsBounded(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		sets []string
		path string // the field the error must name
		want string // and a piece of its reason
	}{
		{"buffer 1e12 via --set", "", []string{"fabric.queue.bufferBytes=1000000000000"}, "fabric.queue.bufferBytes", fmt.Sprint(MaxBufferBytes)},
		{"buffer 1e12 in YAML", "fabric: {queue: {bufferBytes: 1e12}}", nil, "fabric.queue.bufferBytes", fmt.Sprint(MaxBufferBytes)},
		{"buffer just above the max", "", []string{fmt.Sprintf("fabric.queue.bufferBytes=%d", MaxBufferBytes+1)}, "fabric.queue.bufferBytes", fmt.Sprint(MaxBufferBytes)},
		{"headroom above the max buffer", "", []string{"fabric.queue.pfc.enabled=true", "fabric.queue.pfc.headroomBytes=1000000000000"}, "fabric.queue.pfc.headroomBytes", fmt.Sprint(MaxBufferBytes)},
		{"10^6 hosts", "", []string{"fabric.hostsPerT0=1000", "fabric.t0PerPlane=1000"}, "fabric.hosts", fmt.Sprint(MaxHosts)},
		{"10^6 hosts by count", "", []string{"fabric.hostsPerT0=1000", "fabric.hosts=1000000"}, "fabric.hosts", fmt.Sprint(MaxHosts)},
		{"one host above the max", "", []string{"fabric.hostsPerT0=257", "fabric.t0PerPlane=512"}, "fabric.hosts", fmt.Sprint(MaxHosts)},
		{"too many ports", "", []string{"fabric.planes=16", "fabric.hostsPerT0=8", "fabric.t0PerPlane=1024", "fabric.t1PerPlane=1024"}, "fabric.t1PerPlane", fmt.Sprint(MaxPorts)},
		{"run 2h", "", []string{"run.duration=2h"}, "run.duration", "≤ 1h,"},
		{"hosts 100000 names the field set, not the derived t0PerPlane", "", []string{"fabric.hosts=100000"}, "fabric.hosts", "4096"},
		{"watchdog 1h", "", []string{"fabric.queue.pfc.enabled=true", "fabric.queue.pfc.watchdog.detection=1h"}, "fabric.queue.pfc.watchdog.detection", "10s"},
		{"mrc rto 10s", "", []string{"transport.mrc.rto=10s"}, "transport.mrc.rto", "1s"},
		{"roce timeout 10s", "", []string{"transport.roce.timeout=10s"}, "transport.roce.timeout", "1s"},
		{"slowdown 1e9", "", []string{"run.realtimeSlowdown=1e9"}, "run.realtimeSlowdown", "1e+06"},
		{"duration without a unit", "", []string{"fabric.hostLinkDelay=100"}, "fabric.hostLinkDelay", "no unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = writeYAML(t, tc.yaml)
			}
			_, err := Load(path, tc.sets)
			if err == nil {
				t.Fatal("accepted")
			}
			found := false
			for _, e := range unwrapJoin(err) {
				var fe *FieldError
				if errors.As(e, &fe) && fe.Path == tc.path && strings.Contains(e.Error(), tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("error %q: want one naming %s with %q", err, tc.path, tc.want)
			}
		})
	}
	// The largest supported shapes still load: cluster B and a k=64 fat-tree.
	for _, sets := range [][]string{
		{"fabric.planes=8", "fabric.hostsPerT0=256", "fabric.t0PerPlane=512", "fabric.t1PerPlane=256", "fabric.hosts=131072"},
		{"fabric.topology=fattree", "fabric.k=64", "fabric.forwarding=ecmp"},
		{fmt.Sprintf("fabric.queue.bufferBytes=%d", MaxBufferBytes)},
	} {
		if _, err := Load("", sets); err != nil {
			t.Errorf("%v: %v", sets, err)
		}
	}
}

// transport.mrc.tlpFactor: 0 turns the probe off, 0.5..64 is a factor,
// anything else (and NaN) is refused with the range.
func TestTLPFactorRange(t *testing.T) {
	for _, ok := range []string{"0", "0.5", "2", "64"} {
		if _, err := Load("", []string{"transport.mrc.tlpFactor=" + ok}); err != nil {
			t.Errorf("tlpFactor=%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.1", "65", "-1", "NaN", "Inf"} {
		_, err := Load("", []string{"transport.mrc.tlpFactor=" + bad})
		if err == nil || !strings.Contains(err.Error(), "transport.mrc.tlpFactor") {
			t.Errorf("tlpFactor=%s: got %v, want an error naming the field", bad, err)
		}
	}
}
