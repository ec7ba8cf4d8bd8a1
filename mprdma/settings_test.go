package mprdma

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a verbs.SectionChecker that keeps every complaint and note.
type recorder struct {
	errs  []string
	notes map[string]string
	units map[string]string
}

func newRecorder() *recorder {
	return &recorder{notes: map[string]string{}, units: map[string]string{}}
}

func (r *recorder) IntRange(f string, x, lo, hi int) bool {
	if x < lo || x > hi {
		r.errs = append(r.errs, fmt.Sprintf("%s: %d not in %d..%d", f, x, lo, hi))
		return false
	}
	return true
}

func (r *recorder) IntRangeOrZero(f string, x, lo, hi int) bool {
	if x == 0 {
		return true
	}
	return r.IntRange(f, x, lo, hi)
}

func (r *recorder) OneOf(f, x string, allowed ...string) bool { return true }

func (r *recorder) OptionalDuration(f, s string, hi time.Duration) bool {
	if s == "" {
		return true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > hi {
		r.errs = append(r.errs, fmt.Sprintf("%s: %q", f, s))
		return false
	}
	return true
}

func (r *recorder) Float(f string, x float64, rangeText string, in bool, reason string) {}
func (r *recorder) Invalid(f, reason string, value any) {
	r.errs = append(r.errs, fmt.Sprintf("%s: %s (%v)", f, reason, value))
}
func (r *recorder) Note(f, text string) { r.notes[f] = text }
func (r *recorder) Unit(f, unit string) { r.units[f] = unit }

// The defaults are the documented ones and pass their own rules.
func TestSettingsDefaults(t *testing.T) {
	var s Settings
	s.SetDefaults()
	if s != (Settings{BitmapEntries: 64, RetryCount: 7}) {
		t.Errorf("defaults %+v: want every path, a 64-entry bitmap (MP-RDMA's), 7 retries, the rest derived", s)
	}
	var o OrderRESettings
	o.SetDefaults()
	if o != (OrderRESettings{}) {
		t.Errorf("OrderRE defaults %+v: want every field derived", o)
	}
	r := newRecorder()
	s.Validate(r)
	o.Validate(r)
	if len(r.errs) != 0 {
		t.Errorf("defaults refused: %v", r.errs)
	}
	for _, f := range []string{"paths", "rto", "lossThreshold", "initCwnd", "maxCwnd", "lFast", "delta", "oMax", "copies", "repairTimeout"} {
		if r.notes[f] == "" {
			t.Errorf("%s: no note says what 0 / \"\" means", f)
		}
	}
	if r.units["bitmapEntries"] != "packets" || r.units["delta"] != "packets" {
		t.Errorf("units %v: counts are in packets", r.units)
	}
	if k := s.Kinds(); len(k) != 3 || k[0] != KindMPRDMA || k[1] != KindRandom || k[2] != KindOrderRE {
		t.Errorf("Kinds() = %v, want the section's key (mprdma) first, then random, orderre", k)
	}
}

// Each bad value is refused naming its field, and only it.
func TestSettingsValidate(t *testing.T) {
	base := func() (Settings, OrderRESettings) {
		var s Settings
		s.SetDefaults()
		var o OrderRESettings
		o.SetDefaults()
		return s, o
	}
	for _, c := range []struct {
		field string
		mod   func(*Settings, *OrderRESettings)
	}{
		{"paths", func(s *Settings, _ *OrderRESettings) { s.Paths = MaxPaths + 1 }},
		{"paths", func(s *Settings, _ *OrderRESettings) { s.Paths = -1 }},
		{"bitmapEntries", func(s *Settings, _ *OrderRESettings) { s.BitmapEntries = 0 }},
		{"bitmapEntries", func(s *Settings, _ *OrderRESettings) { s.BitmapEntries = MaxBitmapEntries + 1 }},
		{"rto", func(s *Settings, _ *OrderRESettings) { s.RTO = "2s" }},
		{"rto", func(s *Settings, _ *OrderRESettings) { s.RTO = "soon" }},
		{"retryCount", func(s *Settings, _ *OrderRESettings) { s.RetryCount = 0 }},
		{"retryCount", func(s *Settings, _ *OrderRESettings) { s.RetryCount = 8 }},
		{"lossThreshold", func(s *Settings, _ *OrderRESettings) { s.LossThreshold = -3 }},
		{"initCwnd", func(s *Settings, _ *OrderRESettings) { s.InitCwnd = MaxWindow + 1 }},
		{"maxCwnd", func(s *Settings, _ *OrderRESettings) { s.MaxCwnd = -1 }},
		{"maxCwnd", func(s *Settings, _ *OrderRESettings) { s.InitCwnd, s.MaxCwnd = 40, 20 }},
		{"lFast", func(_ *Settings, o *OrderRESettings) { o.LFast = -1 }},
		{"delta", func(_ *Settings, o *OrderRESettings) { o.Delta = MaxWindow + 1 }},
		{"oMax", func(_ *Settings, o *OrderRESettings) { o.OMax = -1 }},
		{"copies", func(_ *Settings, o *OrderRESettings) { o.Copies = 16 }},
		{"repairTimeout", func(_ *Settings, o *OrderRESettings) { o.RepairTimeout = "-1ms" }},
	} {
		s, o := base()
		c.mod(&s, &o)
		r := newRecorder()
		s.Validate(r)
		o.Validate(r)
		if len(r.errs) != 1 || !strings.HasPrefix(r.errs[0], c.field+":") {
			t.Errorf("%s %+v %+v: errors %q, want one naming %s", c.field, s, o, r.errs, c.field)
		}
	}
}

// Apply carries every section field into the Config, parses the
// durations, and leaves the fabric's fields to the caller; the result
// validates and derives as Config documents.
func TestSettingsApply(t *testing.T) {
	s := Settings{Paths: 3, BitmapEntries: 32, RTO: "50us", RetryCount: 5, LossThreshold: 6, InitCwnd: 10, MaxCwnd: 20}
	o := OrderRESettings{LFast: 2, Delta: 4, OMax: 9, Copies: 2, RepairTimeout: "300us"}
	base := DefaultConfig()
	base.Paths, base.Scheme, base.BDPPackets = 4, SchemeOrderRE, 40
	c, err := s.Apply(base, o, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.Paths, want.BitmapEntries, want.RTO, want.RetryCount, want.LossThreshold = 3, 32, 50_000, 5, 6
	want.InitCwnd, want.MaxCwnd = 10, 20
	want.LFast, want.Delta, want.OMax, want.Copies, want.RepairTimeout = 2, 4, 9, 2, 300_000
	if c != want {
		t.Errorf("Apply = %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}

	// Defaults: the given RTO, the fabric's path count, everything derived.
	var ds Settings
	ds.SetDefaults()
	c, err = ds.Apply(base, OrderRESettings{}, 80*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if c.Paths != 4 || c.RTO != 80_000 || c.RepairTimeout != 0 || c.BitmapEntries != 64 {
		t.Errorf("defaults applied: %+v", c)
	}
	d := c.Derived()
	if d.RepairTimeout != 160_000 || d.InitCwnd != 40 || d.MaxCwnd != 80 || d.Delta != 4 || d.LFast != 5 || d.LossThreshold != 10 {
		t.Errorf("derived %+v: want repair 2 RTO, windows 1 and 2 BDP, Δ BDP/10, L_fast BDP/8, loss BDP/4", d)
	}
	// A = 1 + (4−1)·5/14 = 2.07 → 2 (seed 004 §3.2.1).
	if d.OMax != 14 || d.Copies != 2 {
		t.Errorf("O_MAX %d, A %d; want 14 (0.35 BDP) and 2", d.OMax, d.Copies)
	}
	if _, err := (Settings{RTO: "x"}).Apply(base, o, 0); err == nil || !strings.Contains(err.Error(), "transport.mprdma.rto") {
		t.Errorf("bad rto: %v", err)
	}
}
