package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize reads a size in bytes: decimal digits with an optional binary
// unit K, M, G or T (2^10 … 2^40; case-insensitive, also as KiB … TiB or
// with a trailing B), surrounding space ignored: "4096", "64K", "1M",
// "1GiB", "2tb". 0 is a size; more than 2^64-1 bytes is not. The error
// reads `bad size "x" (want e.g. 4096, 64K, 1M, 1G, 1T)`.
func ParseSize(s string) (uint64, error) {
	if v, ok := parseSize(s, "KMGT"); ok {
		return v, nil
	}
	return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64K, 1M, 1G, 1T)", s)
}

// ParseBytes reads a message size: as ParseSize, with units up to G (no
// T) and refusing 0. The error reads
// `bad size "x" (want e.g. 4096, 64K, 1M, 1G)`.
func ParseBytes(s string) (uint64, error) {
	if v, ok := parseSize(s, "KMG"); ok && v > 0 {
		return v, nil
	}
	return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64K, 1M, 1G)", s)
}

// parseSize reads digits with an optional unit from units (K = 2^10, M =
// 2^20, … in that order), refusing a value past 2^64.
func parseSize(s, units string) (uint64, bool) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	shift := uint(0)
	if t != "" {
		if i := strings.IndexByte(units, t[len(t)-1]); i >= 0 {
			shift = 10 * uint(i+1)
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > math.MaxUint64>>shift {
		return 0, false
	}
	return v << shift, true
}

// FormatBytes renders a size with the largest binary unit up to G that
// divides it ("64K", "1M", "3G"), else in bytes ("1500B"); ParseBytes
// reads every result but "0B" back.
func FormatBytes(b uint64) string {
	for _, u := range []struct {
		s string
		v uint64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b >= u.v && b%u.v == 0 {
			return fmt.Sprintf("%d%s", b/u.v, u.s)
		}
	}
	return fmt.Sprintf("%dB", b)
}
