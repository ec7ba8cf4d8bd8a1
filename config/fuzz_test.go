package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	unit "github.com/vcluster/vcluster/units"
)

// The config parsers must never panic, and a config they accept must be
// valid and survive YAML() and a reload unchanged. The targets call load
// with the bytes directly (no temporary file per input). What made the first
// fuzzer crawl (1 945 executions in 45 s) was Go's default minimization of
// every new input (60 s each), not the parsing: fuzz-short passes
// -fuzzminimizetime 200x, and FuzzLoadYAML then runs ≈ 13 000 inputs/s
// (most are rejected before viper decodes them).

// seedYAMLs are real configurations: the defaults, every preset, a
// fat-tree, the examples of docs/config.md.
func seedYAMLs(f *testing.F) [][]byte {
	var out [][]byte
	add := func(c Config) {
		y, err := c.YAML()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, y)
	}
	add(Default())
	for _, p := range PresetNames() {
		c := Default()
		if err := ApplyPreset(&c, p); err != nil {
			f.Fatal(err)
		}
		add(c)
	}
	for _, sets := range [][]string{
		{"fabric.topology=fattree", "fabric.k=8"},
		{"fabric.preset=B", "fabric.queue.pfc.enabled=true", "fabric.queue.pfc.priorities=3,4", "transport.kind=roce", "output.pcap=h0/p7,p7.t1.3/3"},
		{"run.pacing=realtime", "run.realtimeSlowdown=2.5", "transport.mrc.rto=200us", "host.netstack=false"},
	} {
		c, err := Load("", sets)
		if err != nil {
			f.Fatal(err)
		}
		add(c)
	}
	if doc, err := os.ReadFile("../docs/config.md"); err == nil {
		for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1) {
			out = append(out, m[1])
		}
	}
	return append(out, []byte(""), []byte("fabric: {queue: {ecn: {pmax: .nan}}}"), []byte("fabric: {hostLinkSpeed: 100}"),
		[]byte("fabric: {queue: {bufferBytes: 1e12}}"), []byte("fabric: [1, 2]"), []byte("seed: -1"))
}

// seedSets is one --set per key of docs/config.md's tables, with its
// documented default, and a few values at and past the limits.
func seedSets(f *testing.F) []string {
	out := []string{"fabric.planes=8", "fabric.hostLinkSpeed=100", "fabric.queue.ecn.pmax=NaN", "run.realtimeSlowdown=1e999",
		"fabric.hosts=100000", "fabric.queue.bufferBytes=1e12", "fabric.queue.pfc.priorities=3,4", "output.pcap=", "fabric.preset=Z", "=", "fabric"}
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		f.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-zA-Z.]+)` \\| [^|]+ \\| `([^`]*)`")
	n := 0
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		if _, err := leafType(m[1], m[2]); err == nil {
			out = append(out, m[1]+"="+strings.Trim(m[2], "[]\""))
			n++
		}
	}
	if n < 40 {
		f.Fatalf("found %d keys in docs/config.md's tables; the pattern no longer matches them", n)
	}
	return out
}

// checkAccepted: an accepted config validates, and YAML() reloads to the
// same config.
func checkAccepted(t *testing.T, c Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("Load accepted a config Validate refuses: %v", err)
	}
	y, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := load("resolved.yaml", func() ([]byte, error) { return y, nil }, nil)
	if err != nil {
		t.Fatalf("YAML() of an accepted config does not load: %v\n%s", err, y)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("YAML() round trip changed the config:\n got %+v\nwant %+v\n%s", back, c, y)
	}
}

func FuzzLoadYAML(f *testing.F) {
	for _, y := range seedYAMLs(f) {
		f.Add(y)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := load("fuzz.yaml", func() ([]byte, error) { return data, nil }, nil)
		if err == nil {
			checkAccepted(t, c)
		}
	})
}

func FuzzLoadSet(f *testing.F) {
	sets := seedSets(f)
	for i, s := range sets {
		f.Add(s, sets[(i+7)%len(sets)])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		c, err := Load("", []string{a, b})
		if err == nil {
			checkAccepted(t, c)
		}
	})
}

func FuzzParseSpeed(f *testing.F) {
	for _, s := range []string{"100G", "100Gbps", "400g", "25000M", "1.6T", "10000000000bps", "2.5Gb/s", " 40 G ", "1500k",
		"0G", "100", "1e9", "-100G", "1.2.3G", "99999999999T", "18446744073709551615bps", "18446744073709551616bps", "0.000000000001T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bps, err := unit.ParseSpeed(s)
		if err != nil {
			return
		}
		back, err := unit.ParseSpeed(unit.FormatSpeed(bps))
		if err != nil || back != bps {
			t.Fatalf("unit.ParseSpeed(%q) = %d, but FormatSpeed gives %q, which parses to %d, %v", s, bps, unit.FormatSpeed(bps), back, err)
		}
		// The range rule is the same whether a speed is written as the
		// user wrote it or as FormatSpeed prints it.
		_, e1 := Load("", []string{"fabric.hostLinkSpeed=" + s, "fabric.fabricLinkSpeed=" + s})
		_, e2 := Load("", []string{"fabric.hostLinkSpeed=" + unit.FormatSpeed(bps), "fabric.fabricLinkSpeed=" + unit.FormatSpeed(bps)})
		inRange := bps >= MinLinkBps && bps <= MaxLinkBps
		if strings.ContainsAny(s, ",") {
			return // a list separator: --set would not pass it whole
		}
		if (e1 == nil) != inRange || (e2 == nil) != inRange {
			t.Fatalf("speed %q = %d bit/s (in range: %v): loading it: %v; loading %q: %v", s, bps, inRange, e1, unit.FormatSpeed(bps), e2)
		}
	})
}

// BenchmarkLoad is one valid --set load, decoded through viper: ≈ 0.3 ms,
// 90% of it in viper's Unmarshal.
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load("", []string{"fabric.preset=B", "fabric.hosts=64"}); err != nil {
			b.Fatal(err)
		}
	}
}
