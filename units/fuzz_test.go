package units

import (
	"strings"
	"testing"
	"time"
)

// The parsers never panic; what they accept formats and parses back to
// itself; the message-size form is the sweep-size form less 0 and T.

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "64K", "1MiB", "2tb", "16777216T", "18446744073709551616", "-1", " 1 G "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		b, berr := ParseBytes(s)
		if berr == nil && (err != nil || b != v) {
			t.Fatalf("ParseBytes(%q) = %d but ParseSize = %d, %v", s, b, v, err)
		}
		if err != nil {
			return
		}
		if back, err := ParseSize(FormatBytes(v)); err != nil || back != v {
			t.Fatalf("ParseSize(%q) = %d; FormatBytes gives %q, which parses to %d, %v", s, v, FormatBytes(v), back, err)
		}
		if berr == nil && b == 0 {
			t.Fatalf("ParseBytes(%q) accepted 0", s)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1", "64K", "1m", "17179869183G", "17179869184G", "0", "1T", "1.5M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBytes(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad size ") {
				t.Fatalf("ParseBytes(%q): %v", s, err)
			}
			return
		}
		if b == 0 {
			t.Fatalf("ParseBytes(%q) accepted 0", s)
		}
		if back, err := ParseBytes(FormatBytes(b)); err != nil || back != b {
			t.Fatalf("ParseBytes(%q) = %d; FormatBytes gives %q, which parses to %d, %v", s, b, FormatBytes(b), back, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0", "", "300us", "1.5ms", " 2s ", "-1s", "1", "1d", "9223372036s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		trimmed := strings.TrimSpace(s)
		if trimmed == "" || trimmed == "0" {
			if err != nil || d != 0 {
				t.Fatalf("ParseDuration(%q) = %v, %v; want 0", s, d, err)
			}
			return
		}
		want, werr := time.ParseDuration(trimmed)
		if (err == nil) != (werr == nil) || d != want {
			t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration gives %v, %v", s, d, err, want, werr)
		}
		if err == nil {
			if back, err := ParseDuration(d.String()); err != nil || back != d {
				t.Fatalf("ParseDuration(%q) = %v, which reads back as %v, %v", s, d, back, err)
			}
		}
	})
}

func FuzzParseSpeed(f *testing.F) {
	for _, s := range []string{"100G", "100Gbps", "400g", "1.6T", "100", "1.5bps", "18446744073709551616bps", " 25 M b/s", ".5k", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSpeed(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid speed ") {
				t.Fatalf("ParseSpeed(%q): %v", s, err)
			}
			return
		}
		if back, err := ParseSpeed(FormatSpeed(v)); err != nil || back != v {
			t.Fatalf("ParseSpeed(%q) = %d; FormatSpeed gives %q, which parses to %d, %v", s, v, FormatSpeed(v), back, err)
		}
	})
}
