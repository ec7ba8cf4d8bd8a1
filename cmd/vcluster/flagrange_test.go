package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vcluster/vcluster/units"
)

// numericFlagTypes are the pflag types that hold numbers.
var numericFlagTypes = map[string]bool{
	"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true,
	"float32": true, "float64": true, "duration": true, "bytes": true,
	"intSlice": true, "int32Slice": true, "int64Slice": true, "uintSlice": true,
	"float32Slice": true, "float64Slice": true, "durationSlice": true,
}

// numericStringFlags are string flags that carry sizes.
var numericStringFlags = map[string]bool{"collective --sizes": true, "bench memory --sizes": true}

func walkFlags(c *cobra.Command, fn func(path string, f *pflag.Flag)) {
	seen := map[*pflag.Flag]bool{}
	visit := func(f *pflag.Flag) {
		if !seen[f] {
			seen[f] = true
			fn(strings.TrimPrefix(c.CommandPath(), "vcluster "), f)
		}
	}
	c.LocalFlags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	for _, s := range c.Commands() {
		walkFlags(s, fn)
	}
}

// Every numeric flag of every command has a range (limit), and its
// default is inside it.
func TestEveryNumericFlagHasARange(t *testing.T) {
	n := 0
	walkFlags(newRootCmd(), func(path string, f *pflag.Flag) {
		key := path + " --" + f.Name
		if !numericFlagTypes[f.Value.Type()] && !numericStringFlags[key] {
			return
		}
		n++
		rv, ok := f.Value.(*rangedValue)
		if !ok {
			t.Errorf("%s (%s): no range: register it with limit()", key, f.Value.Type())
			return
		}
		if f.DefValue != "" && f.DefValue != "[]" {
			def := strings.Trim(f.DefValue, "[]")
			if err := rv.check(def); err != nil {
				t.Errorf("%s: default %q is out of its own range: %v", key, f.DefValue, err)
			}
		}
	})
	if n < 40 {
		t.Errorf("found %d numeric flags, expected more: is the walk missing commands?", n)
	}
}

// Out-of-range, NaN, ±Inf and zero-as-default values of every command's
// numeric flags are usage errors (exit status 2) naming the flag and the
// allowed range, before anything runs.
func TestFlagRanges(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
		want string // part of the range the message states
	}{
		{[]string{"collective", "--loss", "2"}, "--loss", "must be in [0, 1)"},
		{[]string{"collective", "--loss", "-0.1"}, "--loss", "must be in [0, 1)"},
		{[]string{"collective", "--loss", "NaN"}, "--loss", "not a loss rate"},
		{[]string{"collective", "--loss", "+Inf"}, "--loss", "not a loss rate"},
		{[]string{"collective", "--loss", "1"}, "--loss", "must be in [0, 1)"},
		{[]string{"collective", "--parallel", "-1"}, "--parallel", "[0, 1024]"},
		{[]string{"collective", "--iters", "0"}, "--iters", "[1, "},
		{[]string{"collective", "--warmup", "-1"}, "--warmup", "[0, "},
		{[]string{"collective", "--hosts", "-1"}, "--hosts", "0: the preset's"},
		{[]string{"collective", "--ranks", "-2"}, "--ranks", "0: every host"},
		{[]string{"collective", "--root", "-1"}, "--root", "[0, "},
		{[]string{"collective", "--chunk", "0"}, "--chunk", "[4, 2G]"},
		{[]string{"collective", "--chunk", "3"}, "--chunk", "[4, 2G]"},
		{[]string{"collective", "--chunk", "1X"}, "--chunk", "[4, 2G]"},
		{[]string{"collective", "--chunk", "4G"}, "--chunk", "[4, 2G]"},
		{[]string{"collective", "--sizes", "0:1M"}, "--sizes", "min is 0"},
		{[]string{"collective", "--sizes", "1M:1K"}, "--sizes", "max 1K is below min 1M"},
		{[]string{"collective", "--sizes", "2T"}, "--sizes", "min 2T is outside [1, 1T]"},
		{[]string{"collective", "--sizes", "1M:2T:4"}, "--sizes", "max 2T is outside [1, 1T]"},
		{[]string{"collective", "--sizes", "1M:1G:1"}, "--sizes", "factor 1 is below 2"},
		{[]string{"collective", "--sizes", "1M:1G:0"}, "--sizes", "factor 0 is below 2"},
		{[]string{"collective", "--sizes", "1M:1G:2.5"}, "--sizes", `factor "2.5" is not an integer`},
		{[]string{"collective", "--sizes", "1M:1G:x"}, "--sizes", `factor "x" is not an integer`},
		{[]string{"collective", "--sizes", "1M:1G:4096"}, "--sizes", "factor 4096 is above 1024"},
		{[]string{"collective", "--sizes", "1M:1G:2:2"}, "--sizes", "4 parts"},
		{[]string{"collective", "--deadline", "0"}, "--deadline", "(0s, 1h]"},
		{[]string{"collective", "--deadline", "-5ms"}, "--deadline", "(0s, 1h]"},
		{[]string{"collective", "--deadline", "2h"}, "--deadline", "(0s, 1h]"},
		{[]string{"collective", "--deadline", "soon"}, "--deadline", "(0s, 1h]"},
		{[]string{"collective", "--metrics-linger", "-1s"}, "--metrics-linger", "[0s, 24h]"},
		{[]string{"drill", "--metrics-linger", "25h"}, "--metrics-linger", "[0s, 24h]"},
		{[]string{"collective", "--reduce-rate", "-1"}, "--reduce-rate", "bytes/s"},
		{[]string{"collective", "--reduce-rate", "NaN"}, "--reduce-rate", "bytes/s"},
		{[]string{"drill", "--deadline", "-1s"}, "--deadline", "(0s, 1h]"},
		{[]string{"drill", "--deadline", "0"}, "--deadline", "(0s, 1h]"},
		{[]string{"drill", "--period", "-1s"}, "--period", "(0s, 1h]"},
		{[]string{"drill", "--period", "0s"}, "--period", "(0s, 1h]"},
		{[]string{"drill", "--bytes", "0"}, "--bytes", "[1, 1T]"},
		{[]string{"drill", "--bytes", "2T"}, "--bytes", "[1, 1T]"},
		{[]string{"drill", "--bytes", "-5"}, "--bytes", "[1, 1T]"},
		{[]string{"drill", "--at", "-1us"}, "--at", "[0s, 1h]"},
		{[]string{"drill", "--duration", "0"}, "--duration", "(0s, 1h]"},
		{[]string{"drill", "--src", "-1"}, "--src", "[0, "},
		{[]string{"drill", "--dst", "-2"}, "--dst", "-1: the last host"},
		{[]string{"drill", "--hosts", "-4"}, "--hosts", "[0, "},
		{[]string{"drill", "--parallel", "5000"}, "--parallel", "[0, 1024]"},
		{[]string{"ping", "--count", "0"}, "--count", "[1, 1000000]"},
		{[]string{"ping", "--payload", "-1"}, "--payload", "[0, 65535]"},
		{[]string{"ping", "--payload", "64K"}, "--payload", "[0, 65535]"},
		{[]string{"ping", "--interval", "0"}, "--interval", "(0s, 1h]"},
		{[]string{"ping", "--plane", "-1"}, "--plane", "[0, 1024]"},
		{[]string{"ping", "--from", "-1"}, "--from", "[0, "},
		{[]string{"ping", "--to", "-3"}, "--to", "-1: the last host"},
		{[]string{"topo", "--hosts", "-3"}, "--hosts", "[0, "},
		{[]string{"run", "--parallel", "-1"}, "--parallel", "[0, 1024]"},
		{[]string{"run", "--metrics-linger", "-1s"}, "--metrics-linger", "[0s, 24h]"},
		{[]string{"experiment", "p2p", "--parallel", "-3"}, "--parallel", "[0, 1024]"},
		{[]string{"bench", "loop", "--events", "0"}, "--events", "[1, "},
		{[]string{"bench", "fabric", "--hops", "-1"}, "--hops", "[1, "},
		{[]string{"bench", "hosts", "--hosts", "0"}, "--hosts", "[1, "},
		{[]string{"bench", "hosts", "--hosts-per-t0", "0"}, "--hosts-per-t0", "[1, 4096]"},
		{[]string{"bench", "hosts", "--t1", "0"}, "--t1", "[1, 4096]"},
		{[]string{"bench", "p2p", "--size", "0"}, "--size", "[1, 1T]"},
		{[]string{"bench", "p2p", "--loss", "0,2"}, "--loss", "must be in [0, 1)"},
		{[]string{"bench", "p2p", "--loss", "NaN"}, "--loss", "not a loss rate"},
		{[]string{"bench", "fattree-perm", "--k", "0"}, "--k", "[2, 256]"},
		{[]string{"bench", "fattree-perm", "--bytes", "0"}, "--bytes", "[1, 1T]"},
		{[]string{"bench", "fattree-perm", "--huge-pages-gib", "-1"}, "--huge-pages-gib", "[0, 1024]"},
		{[]string{"bench", "clusterB", "--hosts-per-t0", "0"}, "--hosts-per-t0", "[1, 256]"},
		{[]string{"bench", "clusterB", "--bytes", "0"}, "--bytes", "[1, 1T]"},
		{[]string{"bench", "clusterB", "--mem-limit-gib", "-1"}, "--mem-limit-gib", "0: no limit"},
		{[]string{"bench", "memory", "--sizes", "64M,0"}, "--sizes", "[1M, 1T]"},
		{[]string{"bench", "memory", "--sizes", "64"}, "--sizes", "[1M, 1T]"}, // bytes now, not MiB: refused, not misread
		{[]string{"bench", "memory", "--sizes", "2T"}, "--sizes", "[1M, 1T]"},
		{[]string{"bench", "memory", "--chains", "0"}, "--chains", "[1, 1024]"},
		{[]string{"bench", "memory", "--reads", "0"}, "--reads", "[1, "},
		{[]string{"bench", "memory", "--lines", "-4"}, "--lines", "[1, 1024]"},
		{[]string{"bench", "loop", "--metrics-linger", "-1s"}, "--metrics-linger", "[0s, 24h]"},
		{[]string{"version", "--seed", "-1"}, "--seed", "[0, 18446744073709551615]"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit status %d, want 2; stderr:\n%s", tc.args, code, errOut)
			continue
		}
		if out != "" {
			t.Errorf("%v: printed %q: something ran", tc.args, out)
		}
		if !strings.Contains(errOut, `"`+tc.flag+`"`) || !strings.Contains(errOut, "must be") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr does not name %s and its range (%q):\n%s", tc.args, tc.flag, tc.want, errOut)
		}
	}
}

// Sizes take units (K, M, G, T are powers of 1024) and refuse overflow.
func TestParseByteSize(t *testing.T) {
	for s, want := range map[string]uint64{"4096": 4096, "64K": 64 << 10, "1M": 1 << 20, "16MiB": 16 << 20, "1G": 1 << 30, "1T": 1 << 40, "2tb": 2 << 40} {
		if got, err := units.ParseSize(s); err != nil || got != want {
			t.Errorf("units.ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "-1", "1.5M", "1P", "18446744073709551616", "16777216T", "0x10"} {
		if got, err := units.ParseSize(s); err == nil {
			t.Errorf("units.ParseSize(%q) = %d, want an error", s, got)
		}
	}
}

// A value that does not parse says so; one that parses but is out of
// range says that; both name the range.
func TestFlagParseVsRange(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"drill", "--scenario", "t1-reboot", "--deadline", "abc"}, "abc is not a duration"},
		{[]string{"drill", "--scenario", "t1-reboot", "--deadline", "2h"}, "2h is out of range; must be a duration in (0s, 1h]"},
		{[]string{"drill", "--scenario", "t1-reboot", "--bytes", "1.5M"}, "1.5M is not a size"},
		{[]string{"drill", "--scenario", "t1-reboot", "--bytes", "2T"}, "2T is out of range; must be a size in [1, 1T]"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// A flag that would do nothing is refused rather than ignored.
func TestFlagsThatDoNothingRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"collective", "--hosts", "16", "--sizes", "1M", "--metrics-linger", "5s"}, "--metrics-linger: serves the final metrics for a while, so it needs --metrics"},
		{[]string{"plot", t.TempDir(), "--format", ""}, "--format: empty"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
