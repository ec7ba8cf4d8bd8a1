package units

import (
	"testing"
	"time"
)

// Every accepted and rejected form of each parser, with the error texts
// the callers print: collectives' message sizes (ParseBytes) and sweep
// sizes (ParseSize), faults' and experiments' durations (ParseDuration),
// config's link speeds (ParseSpeed).

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "4096": 4096, " 64K ": 64 << 10, "64k": 64 << 10, "1M": 1 << 20, "1MiB": 1 << 20, "1mb": 1 << 20,
		"1G": 1 << 30, "1GB": 1 << 30, "2T": 2 << 40, "1TiB": 1 << 40, "1500B": 1500, "16777215T": 16777215 << 40,
		"18446744073709551615": 1<<64 - 1,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5M", "1P", "16777216T", "18446744073709551616", "1 K", "1KK", "0x10", "+1"} {
		_, err := ParseSize(in)
		if want := `bad size "` + in + `" (want e.g. 4096, 64K, 1M, 1G, 1T)`; err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q): %v, want %s", in, err, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"1": 1, "4096": 4096, "64K": 64 << 10, "1m": 1 << 20, "1MiB": 1 << 20, "1G": 1 << 30, "17179869183G": 17179869183 << 30, "1500B": 1500,
	} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	// Unlike ParseSize: no 0, no T.
	for _, in := range []string{"0", "0K", "", "1T", "1TiB", "17179869184G", "-1", "1.5M"} {
		_, err := ParseBytes(in)
		if want := `bad size "` + in + `" (want e.g. 4096, 64K, 1M, 1G)`; err == nil || err.Error() != want {
			t.Errorf("ParseBytes(%q): %v, want %s", in, err, want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for b, want := range map[uint64]string{0: "0B", 1: "1B", 1500: "1500B", 1024: "1K", 64 << 10: "64K", 1 << 20: "1M", 3 << 30: "3G", 1 << 40: "1024G", 1<<20 + 1<<10: "1025K"} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0": 0, "": 0, "  ": 0, " 0 ": 0, "300us": 300 * time.Microsecond, "300µs": 300 * time.Microsecond, "1.5ms": 1500 * time.Microsecond,
		" 2s ": 2 * time.Second, "1m30s": 90 * time.Second, "-1s": -time.Second, "0s": 0,
	} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, trimmed := range map[string]string{"1": "1", " 10 ": "10", "1d": "1d", "ms": "ms", "00": "00", "1e3ms": "1e3ms"} {
		_, err := ParseDuration(in)
		if want := `"` + trimmed + `" is not a duration (e.g. 300us, 2ms, 1s)`; err == nil || err.Error() != want {
			t.Errorf("ParseDuration(%q): %v, want %s", in, err, want)
		}
	}
}

func TestParseSpeed(t *testing.T) {
	for in, want := range map[string]uint64{
		"100G": 100e9, "100Gbps": 100e9, "400g": 400e9, "25000M": 25e9, "1.6T": 1.6e12, "10000000000bps": 1e10,
		" 100 G ": 100e9, "100Gb/s": 100e9, "1.5k": 1500, "0G": 0, "100 bps": 100, ".5G": 5e8, "5.G": 5e9,
		"18446744073709551615bps": 1<<64 - 1,
	} {
		if got, err := ParseSpeed(in); err != nil || got != want {
			t.Errorf("ParseSpeed(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"100":                     `invalid speed "100": no unit; did you mean 100G?`,
		" 25000000000":            `invalid speed " 25000000000": no unit; did you mean 25G?`,
		"1000000":                 `invalid speed "1000000": no unit; did you mean 1M?`,
		"999999":                  `invalid speed "999999": no unit; did you mean 999999G?`,
		"1.5":                     `invalid speed "1.5": no unit; did you mean 1.5G?`,
		"":                        `invalid speed "": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"G":                       `invalid speed "G": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"-1G":                     `invalid speed "-1G": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"1e9bps":                  `invalid speed "1e9bps": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"1P":                      `invalid speed "1P": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"1.2.3G":                  `invalid speed "1.2.3G": want a number with a k/M/G/T unit or a bps suffix, e.g. "100G" or "400Gbps"`,
		"1.5bps":                  `invalid speed "1.5bps": not a whole number of bits/s`,
		"0.0001k":                 `invalid speed "0.0001k": not a whole number of bits/s`,
		"18446744073709551616bps": `invalid speed "18446744073709551616bps": too large`,
		"20000000T":               `invalid speed "20000000T": too large`,
	} {
		if _, err := ParseSpeed(in); err == nil || err.Error() != want {
			t.Errorf("ParseSpeed(%q): %v, want %s", in, err, want)
		}
	}
}

func TestSpeedHint(t *testing.T) {
	for in, want := range map[string]string{"100": "100G", "25000000000": "25G", "1000000": "1M", "1.5": "1.5G", " 7 ": "7G", "G": "", "": "", "1e6": ""} {
		if got := SpeedHint(in); got != want {
			t.Errorf("SpeedHint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormatSpeed(t *testing.T) {
	for bps, want := range map[uint64]string{
		100e9: "100G", 1.6e12: "1.6T", 25e6: "25M", 1500: "1.5k", 999: "999bps", 0: "0bps", 1e12 + 1: "1.000000000001T", 1<<64 - 1: "18446744.073709551615T",
	} {
		if got := FormatSpeed(bps); got != want {
			t.Errorf("FormatSpeed(%d) = %q, want %q", bps, got, want)
		}
	}
}
