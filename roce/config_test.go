package roce

import (
	"math/big"
	"testing"
)

// sweepRates are the NIC port rates the presets are checked at: 25G (the
// DCQCN model's reference), every fabric preset's speed (100G, 200G,
// 400G) and the faster ports the config accepts (800G, 1.6T, its maximum).
var sweepRates = []int64{25e9, 100e9, 200e9, 400e9, 800e9, 1600e9}

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
		if k := rate / 25e9; h.RAIBps != k*5e6 || h.RHAIBps != k*50e6 {
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
