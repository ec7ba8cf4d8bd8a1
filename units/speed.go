package units

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// ParseSpeed parses a link speed into bits/s. The grammar is
//
//	number [unit] [suffix]
//
// where number is decimal digits with an optional fraction ("1.6"), unit is
// one of k, M, G, T (decimal: 10^3, 10^6, 10^9, 10^12; case-insensitive)
// and suffix is "bps" or "b/s". Examples: "100G", "100Gbps", "400g",
// "25000M", "1.6T", "10000000000bps". A unit or a suffix is required: a
// bare "100" is an error (it would be 100 bit/s; the user meant 100G) whose
// text suggests a unit (see SpeedHint). The result must be a whole number
// of bits/s that fits a uint64. "0G" parses: ranges are the caller's.
func ParseSpeed(s string) (uint64, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	suffixed := false
	for _, suf := range []string{"bps", "b/s"} {
		if t, ok := strings.CutSuffix(s, suf); ok {
			s, suffixed = t, true
			break
		}
	}
	s = strings.TrimSpace(s)
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k':
			mult = 1e3
		case 'm':
			mult = 1e6
		case 'g':
			mult = 1e9
		case 't':
			mult = 1e12
		}
		if mult != 1 {
			s = strings.TrimSpace(s[:n-1])
		}
	}
	if mult == 1 && !suffixed && IsDecimal(s) {
		return 0, fmt.Errorf("invalid speed %q: no unit; did you mean %s?", in, SpeedHint(s))
	}
	if !IsDecimal(s) {
		return 0, fmt.Errorf("invalid speed %q: want a number with a k/M/G/T unit or a bps suffix, e.g. \"100G\" or \"400Gbps\"", in)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("invalid speed %q", in)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("invalid speed %q: not a whole number of bits/s", in)
	}
	if !r.Num().IsUint64() {
		return 0, fmt.Errorf("invalid speed %q: too large", in)
	}
	return r.Num().Uint64(), nil
}

// IsDecimal reports whether s is a number as ParseSpeed reads it: digits
// with at most one '.', and at least one digit.
func IsDecimal(s string) bool {
	digits, dots := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// hintMinBps is where SpeedHint takes a bare number for bits/s rather
// than for a count of G: 1 Mb/s, the slowest link a config accepts
// (config.MinLinkBps).
const hintMinBps = 1_000_000

// SpeedHint returns, for a bare number s (IsDecimal after trimming space),
// the speed a user most likely meant: a count of bits/s from 1M up in its
// shortest form ("25000000000" → "25G"), anything smaller with G appended
// ("100" → "100G"). It returns "" when s is not a bare number.
func SpeedHint(s string) string {
	s = strings.TrimSpace(s)
	if !IsDecimal(s) {
		return ""
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil && n >= hintMinBps {
		return FormatSpeed(n)
	}
	return s + "G"
}

// FormatSpeed renders bits/s in the shortest exact form ParseSpeed reads
// back: 100e9 → "100G", 1.6e12 → "1.6T", 25e6 → "25M", 1500 → "1.5k",
// 999 → "999bps".
func FormatSpeed(bps uint64) string {
	units := []struct {
		div  uint64
		name string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}
	for _, u := range units {
		if bps >= u.div {
			r := new(big.Rat).SetFrac(new(big.Int).SetUint64(bps), new(big.Int).SetUint64(u.div))
			// Shortest decimal that is exact: at most 12 fraction digits.
			for prec := 0; prec <= 12; prec++ {
				str := r.FloatString(prec)
				if back, ok := new(big.Rat).SetString(str); ok && back.Cmp(r) == 0 {
					return str + u.name
				}
			}
		}
	}
	return strconv.FormatUint(bps, 10) + "bps"
}
