package roce

import (
	"math/big"
	"slices"
	"strings"
	"testing"
)

// sweepRates are the NIC port rates the presets are checked at: 25G (the
// DCQCN model's reference), every fabric preset's speed (100G, 200G,
// 400G), the faster ports the config accepts (800G, 1.6T), and 3.2T, past
// where even the 5 Mb/s step × rate overflows int64 (1.845 Tb/s).
var sweepRates = []int64{25e9, 100e9, 200e9, 400e9, 800e9, 1600e9, 1845e9, 1846e9, 3200e9}

// scaled is step × rate / 25G, computed without overflow.
func scaled(step, rate int64) int64 {
	r := new(big.Int).Mul(big.NewInt(step), big.NewInt(rate))
	return r.Quo(r, big.NewInt(25e9)).Int64()
}

// Every rate-derived parameter of every preset is positive, at most the
// line rate, valid, and scales linearly with the line rate as HPCC's model
// says (R_AI = 5 Mb/s × rate/25G, R_HAI = 50 Mb/s × rate/25G). The old
// 50e6 × rate product overflowed int64 above ~184 Gb/s: at 200G R_HAI was
// negative (every run failed validation) and at 400G/800G/1.6T it wrapped
// to a small positive step.
func TestPresetsScaleWithLineRate(t *testing.T) {
	for _, rate := range sweepRates {
		for _, name := range Presets() {
			c := DefaultConfig()
			c.LineRateBps = rate
			if err := c.SetPreset(name); err != nil {
				t.Fatal(err)
			}
			for _, rel := range []string{GoBackN, IRN} {
				c.Reliability = rel
				if err := c.Validate(); err != nil {
					t.Errorf("%s at %d b/s, %s: %v", name, rate, rel, err)
				}
			}
			d, tm := c.DCQCN, c.Timely
			rates := map[string]int64{"DCQCN.MinRateBps": d.MinRateBps, "Timely.DeltaBps": tm.DeltaBps, "Timely.MinRateBps": tm.MinRateBps}
			rates["DCQCN.RAIBps"], rates["DCQCN.RHAIBps"] = d.RAIBps, d.RHAIBps
			for f, v := range rates {
				if v <= 0 || v > rate {
					t.Errorf("%s at %d b/s: %s = %d outside (0, %d]", name, rate, f, v, rate)
				}
			}
			if b := c.BDPBytes(); b != rate/8*20/1_000_000 || b <= 0 {
				t.Errorf("%s at %d b/s: BDPBytes %d, want rate × 20 µs = %d", name, rate, b, rate/8*20/1_000_000)
			}
		}
		h := DCQCNHPCC(rate)
		if want := scaled(5e6, rate); h.RAIBps != want {
			t.Errorf("DCQCNHPCC(%d).RAIBps = %d, want 5 Mb/s × rate/25G = %d", rate, h.RAIBps, want)
		}
		if want := scaled(50e6, rate); h.RHAIBps != want {
			t.Errorf("DCQCNHPCC(%d).RHAIBps = %d, want 50 Mb/s × rate/25G = %d", rate, h.RHAIBps, want)
		}
		// Linear: the step per 25G is the same at every rate.
		if k := rate / 25e9; rate%25e9 == 0 && (h.RAIBps != k*5e6 || h.RHAIBps != k*50e6) {
			t.Errorf("DCQCNHPCC(%d): RAI %d, RHAI %d, not %d × (5, 50) Mb/s", rate, h.RAIBps, h.RHAIBps, k)
		}
		for lvl, slow := range map[int]int64{1: 2, 2: 4} {
			a := DCQCNAggressive(h, lvl)
			if a.RAIBps != h.RAIBps/slow || a.RHAIBps != h.RHAIBps/slow || a.RAIBps <= 0 {
				t.Errorf("DCQCNAggressive(DCQCNHPCC(%d), %d): RAI %d, RHAI %d, want %d, %d", rate, lvl, a.RAIBps, a.RHAIBps, h.RAIBps/slow, h.RHAIBps/slow)
			}
		}
	}
	// The default rate's values, which every published 100G number used.
	if h := DCQCNHPCC(DefaultLineRate); h.RAIBps != 20_000_000 || h.RHAIBps != 200_000_000 {
		t.Errorf("DCQCNHPCC(100G): RAI %d, RHAI %d, want 20 and 200 Mb/s", h.RAIBps, h.RHAIBps)
	}
}

// The scaling is exact (floor of step × rate / 25G) for any rate up to
// the int64 limit, including rates that are no multiple of 25G.
func TestScaleRateExact(t *testing.T) {
	for _, rate := range []int64{1, 999, 25e9 - 1, 184_467_440_738, 184_467_440_738 + 1, 333_333_333_333, 1600e9 + 7, 1 << 62} {
		for _, step := range []int64{5e6, 50e6} {
			if got, want := scaleRate(step, rate), scaled(step, rate); got != want {
				t.Errorf("scaleRate(%d, %d) = %d, want %d", step, rate, got, want)
			}
		}
	}
}

// rateFields returns every rate a preset derives from the line rate.
func rateFields(c *Config) map[string]int64 {
	d, tm := c.DCQCN, c.Timely
	return map[string]int64{"DCQCN.RAIBps": d.RAIBps, "DCQCN.RHAIBps": d.RHAIBps, "DCQCN.MinRateBps": d.MinRateBps,
		"Timely.DeltaBps": tm.DeltaBps, "Timely.MinRateBps": tm.MinRateBps, "BDPBytes": c.BDPBytes()}
}

// Every rate-derived value of every preset has its exact value (the
// source's formula in exact integer arithmetic) at every rate up to 3.2T,
// and none decreases as the rate rises: an overflow anywhere (the 50 Mb/s
// product wraps above 184 Gb/s, the 5 Mb/s one above 1.845 Tb/s) shows as
// a wrong value or a fall.
func TestPresetRatesExactAndMonotoneTo3T2(t *testing.T) {
	prev := map[string]map[string]int64{}
	for _, rate := range sweepRates {
		for _, name := range Presets() {
			c := DefaultConfig()
			c.LineRateBps = rate
			if err := c.SetPreset(name); err != nil {
				t.Fatal(err)
			}
			got := rateFields(&c)
			want := map[string]int64{"DCQCN.MinRateBps": 1e9, "Timely.MinRateBps": 1e9, "BDPBytes": rate / 8 * 20 / 1_000_000}
			slow := int64(0)
			switch name {
			case "dcqcn_hpcc", "dcqcn_hpcc_paper":
				slow = 1
			case "dcqcn_hpcc_g4_slow2":
				slow = 2
			case "dcqcn_hpcc_g16_slow4":
				slow = 4
			case "dcqcn_sigcomm15":
				want["DCQCN.RAIBps"], want["DCQCN.RHAIBps"] = 40e6, 400e6
			}
			if slow > 0 {
				want["DCQCN.RAIBps"], want["DCQCN.RHAIBps"] = scaled(5e6, rate)/slow, scaled(50e6, rate)/slow
			}
			switch name {
			case "timely_hpcc":
				want["Timely.DeltaBps"] = new(big.Int).Quo(big.NewInt(rate), big.NewInt(1000)).Int64() // bw Mb/s per Gb/s
			case "timely_sigcomm15":
				want["Timely.DeltaBps"] = 10e6
			}
			for f, w := range want {
				if got[f] != w {
					t.Errorf("%s at %d b/s: %s = %d, want %d", name, rate, f, got[f], w)
				}
			}
			if p := prev[name]; p != nil {
				for f, v := range got {
					if v < p[f] {
						t.Errorf("%s: %s falls from %d to %d at %d b/s", name, f, p[f], v, rate)
					}
				}
			}
			prev[name] = got
		}
	}
}

// HPCC run.py's "dcqcn_paper" is the timer model with the paper's timer
// values (α 50 µs, decrease check 50 µs, increase 55 µs) and otherwise
// dcqcn_hpcc: F = 1, scaled steps, CLAMP = 0, no byte counter.
func TestDCQCNHPCCPaperPreset(t *testing.T) {
	for _, rate := range sweepRates {
		h, p := DCQCNHPCC(rate), DCQCNHPCCPaper(rate)
		if p.AlphaIntervalNs != 50_000 || p.DecreaseIntervalNs != 50_000 || p.IncreaseTimerNs != 55_000 {
			t.Errorf("%d b/s: timers %d/%d/%d ns, want 50/50/55 µs", rate, p.AlphaIntervalNs, p.DecreaseIntervalNs, p.IncreaseTimerNs)
		}
		p.AlphaIntervalNs, p.DecreaseIntervalNs, p.IncreaseTimerNs = h.AlphaIntervalNs, h.DecreaseIntervalNs, h.IncreaseTimerNs
		if p != h || p.F != 1 || !p.AlphaPeriodic || p.ClampTargetRate || p.ByteCounter != 0 {
			t.Errorf("%d b/s: %+v differs from dcqcn_hpcc %+v beyond the timers", rate, p, h)
		}
	}
}

// A preset name that was given up is refused, naming its successor, not
// silently taken for another preset; every listed name is accepted.
func TestRenamedPresetsRefused(t *testing.T) {
	for old, why := range RenamedPresets() {
		c := DefaultConfig()
		err := c.SetPreset(old)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("SetPreset(%q) = %v, want a refusal saying %q", old, err, why)
		}
		if slices.Contains(Presets(), old) {
			t.Errorf("%q both renamed and listed", old)
		}
		if !slices.ContainsFunc(Presets(), func(n string) bool { return strings.Contains(why, `"`+n+`"`) }) {
			t.Errorf("%q: %q names no current preset", old, why)
		}
	}
}
