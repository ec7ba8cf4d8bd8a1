package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/units"
)

// Every numeric flag of every command has a range, checked when the flag
// is parsed, before the command runs: a value out of range, NaN or ±Inf
// is a usage error (exit status 2) that names the flag, the value, the
// reason and the allowed range, e.g.
//
//	invalid argument "2" for "--loss" flag: 2 is not a loss rate; must be in [0, 1)
//
// limit wraps a registered flag's value with its check; byteSize flags
// take sizes with units (16M, 1T). TestEveryNumericFlagHasARange keeps
// new flags from skipping this.

// rangedValue is a flag value whose Set checks the text first.
type rangedValue struct {
	pflag.Value
	allowed string // the range, as the error states it
	check   func(s string) error
}

func (v *rangedValue) Set(s string) error {
	if err := v.check(s); err != nil {
		return err
	}
	return v.Value.Set(s)
}

// limit gives flag name of fs the check c (allowed is its range for the
// error text). It panics on an unknown flag: a programming error.
func limit(fs *pflag.FlagSet, name string, c flagCheck) {
	f := fs.Lookup(name)
	if f == nil {
		panic("limit: no flag --" + name)
	}
	f.Value = &rangedValue{Value: f.Value, allowed: c.allowed, check: c.check}
}

// flagCheck is a range: its text and the check of a flag's text.
type flagCheck struct {
	allowed string
	check   func(s string) error
}

func outOfRange(s, allowed string) error {
	return fmt.Errorf("%s is out of range; must be %s", s, allowed)
}

// intIn is an integer in [lo, hi]; note says what a special value means.
func intIn(lo, hi int64, note string) flagCheck {
	allowed := fmt.Sprintf("an integer in [%d, %d]", lo, hi)
	if note != "" {
		allowed += " (" + note + ")"
	}
	return flagCheck{allowed, func(s string) error {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
		if err != nil || v < lo || v > hi {
			return outOfRange(s, allowed)
		}
		return nil
	}}
}

// uintAny is any 64-bit unsigned integer (a seed).
func uintAny() flagCheck {
	allowed := "an integer in [0, 18446744073709551615]"
	return flagCheck{allowed, func(s string) error {
		if _, err := strconv.ParseUint(strings.TrimSpace(s), 0, 64); err != nil {
			return outOfRange(s, allowed)
		}
		return nil
	}}
}

// floatIn is a finite number in [lo, hi] (or [lo, hi) with hiOpen) of
// unit, what being a noun for the reason ("a loss rate").
func floatIn(lo, hi float64, hiOpen bool, what, unit string) flagCheck {
	closing := "]"
	if hiOpen {
		closing = ")"
	}
	allowed := fmt.Sprintf("in [%s, %s%s", fmtFloat(lo), fmtFloat(hi), closing)
	if unit != "" {
		allowed += " " + unit
	}
	return flagCheck{allowed, func(s string) error {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi || hiOpen && v == hi {
			return fmt.Errorf("%s is not %s; must be %s", s, what, allowed)
		}
		return nil
	}}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// lossRate is a Bernoulli loss rate.
func lossRate() flagCheck { return floatIn(0, 1, true, "a loss rate", "") }

// durationIn is a Go duration (300us, 2ms, 1s) in [lo, hi], or (lo, hi]
// with loOpen: a zero or negative duration is never a silent default.
func durationIn(lo, hi time.Duration, loOpen bool) flagCheck {
	open := "["
	if loOpen {
		open = "("
	}
	allowed := fmt.Sprintf("a duration in %s%s, %s] (e.g. 300us, 2ms, 1s)", open, fmtDuration(lo), fmtDuration(hi))
	return flagCheck{allowed, func(s string) error {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%s is not a duration (a number with a unit: ns, us, ms, s, m, h); must be %s", s, allowed)
		}
		if d < lo || d > hi || loOpen && d == lo {
			return outOfRange(s, allowed)
		}
		return nil
	}}
}

// fmtDuration is d as Go prints it without zero minutes and seconds (1h).
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "h0m0s") {
		return strings.TrimSuffix(s, "0m0s")
	}
	return s
}

// listOf checks every comma-separated item of a list flag with c.
func listOf(c flagCheck) flagCheck {
	allowed := "a comma-separated list, each " + c.allowed
	return flagCheck{allowed, func(s string) error {
		for _, it := range strings.Split(s, ",") {
			if err := c.check(it); err != nil {
				return fmt.Errorf("%w (in the list %q)", err, s)
			}
		}
		return nil
	}}
}

// sizeIn is a size in [lo, hi] bytes with an optional unit.
func sizeIn(lo, hi uint64) flagCheck {
	allowed := fmt.Sprintf("a size in [%s, %s] (bytes, or with K, M, G, T: powers of 1024)", fmtBytes(lo), fmtBytes(hi))
	return flagCheck{allowed, func(s string) error {
		v, err := units.ParseSize(s)
		if err != nil {
			return fmt.Errorf("%s is not a size (a whole number of bytes, or with K, M, G, T); must be %s", s, allowed)
		}
		if v < lo || v > hi {
			return fmt.Errorf("%s is out of range; must be %s", s, allowed)
		}
		return nil
	}}
}

// sizeRangeIn is --sizes: min:max:factor, min:max (factor 2) or one
// size (collectives.ParseSizeRange), min and max in [lo, hi].
func sizeRangeIn(lo, hi uint64) flagCheck {
	one := sizeIn(lo, hi)
	allowed := fmt.Sprintf("min:max:factor, min:max or one size, with min ≤ max, each %s, and factor an integer in [2, %d] (default 2)",
		one.allowed, collectives.MaxSizeFactor)
	return flagCheck{allowed, func(s string) error {
		r, err := collectives.ParseSizeRange(s)
		if err != nil {
			return fmt.Errorf("%v; must be %s", err, allowed)
		}
		for _, b := range []struct {
			name string
			v    uint64
		}{{"min", r.Min}, {"max", r.Max}} {
			if b.v < lo || b.v > hi {
				return fmt.Errorf("size range %q: %s %s is outside [%s, %s]; must be %s", s, b.name, fmtBytes(b.v), fmtBytes(lo), fmtBytes(hi), allowed)
			}
		}
		return nil
	}}
}

// fmtBytes prints a size with the largest exact binary unit.
func fmtBytes(b uint64) string {
	for i, u := range []string{"T", "G", "M", "K"} {
		sh := uint(40 - 10*i)
		if b >= 1<<sh && b%(1<<sh) == 0 {
			return strconv.FormatUint(b>>sh, 10) + u
		}
	}
	return strconv.FormatUint(b, 10)
}

// byteSize is a uint64 flag that takes a size with a unit (16M, 1T) or a
// plain number of bytes; the range is given by limit like any other.
type byteSize struct{ v *uint64 }

func (b byteSize) String() string {
	if b.v == nil {
		return "0"
	}
	return fmtBytes(*b.v)
}
func (b byteSize) Type() string { return "bytes" }
func (b byteSize) Set(s string) error {
	v, err := units.ParseSize(s)
	if err != nil {
		return err
	}
	*b.v = v
	return nil
}

// bytesVar registers a byteSize flag with range [lo, hi].
func bytesVar(fs *pflag.FlagSet, p *uint64, name string, def uint64, lo, hi uint64, usage string) {
	*p = def
	fs.Var(byteSize{p}, name, usage)
	limit(fs, name, sizeIn(lo, hi))
}

// Bounds shared by several commands' flags.
const (
	maxFlagHosts   = 1 << 24 // far above any preset: the config names the real limit
	maxFlagWorkers = 1024
	maxFlagTime    = time.Hour // virtual time
	maxFlagCount   = 1_000_000_000
	tib            = uint64(1) << 40
)

// limitLinger gives --metrics-linger (registered with the run flags) its
// range: a wall-clock duration, 0 for none.
// (metrics.go owns the flag: it is left alone if it is renamed, and
// TestEveryNumericFlagHasARange then says so).
func limitLinger(fs *pflag.FlagSet) {
	if fs.Lookup("metrics-linger") != nil {
		limit(fs, "metrics-linger", durationIn(0, 24*time.Hour, false))
	}
}
