package experiments

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Band is the range a check's value must fall in for the published claim
// to count as reproduced, and why it is that wide. Min and Max are
// inclusive; a nil side is open (a published "at most 10%" has no Min).
// Values are in Unit as printed ("%", "µs", "×"); Unit "yes/no" marks a
// claim that holds or not (value 1 or 0, see Holds).
type Band struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
	// Above makes Min exclusive: "beats" is a strict ordering, a tie is
	// not a win.
	Above bool   `json:"above,omitempty"`
	Unit  string `json:"unit,omitempty"`
	Why   string `json:"why"`
}

// Between is the band [lo, hi].
func Between(lo, hi float64, unit, why string) *Band {
	return &Band{Min: &lo, Max: &hi, Unit: unit, Why: why}
}

// Around is v ± rel·|v| (rel 0.2 for ±20%).
func Around(v, rel float64, unit, why string) *Band {
	d := math.Abs(v) * rel
	return Between(v-d, v+d, unit, why)
}

// AtLeast is [lo, ∞).
func AtLeast(lo float64, unit, why string) *Band { return &Band{Min: &lo, Unit: unit, Why: why} }

// Above is (lo, ∞): strictly more than lo.
func Above(lo float64, unit, why string) *Band {
	return &Band{Min: &lo, Above: true, Unit: unit, Why: why}
}

// AtMost is (−∞, hi].
func AtMost(hi float64, unit, why string) *Band { return &Band{Max: &hi, Unit: unit, Why: why} }

// unitYesNo is the unit of a claim that holds (1) or not (0).
const unitYesNo = "yes/no"

// Holds is the band of a claim that either holds or not: value 1 when it
// holds, 0 when not; the median of an odd number of seeds is the majority.
func Holds(why string) *Band { return AtLeast(1, unitYesNo, why) }

// Contains reports whether v lies in b (NaN never does).
func (b *Band) Contains(v float64) bool {
	if b == nil || math.IsNaN(v) {
		return false
	}
	return (b.Min == nil || v > *b.Min || !b.Above && v == *b.Min) && (b.Max == nil || v <= *b.Max)
}

// String is the band as a cell: "20–50 %", "≤ 10 %", "≥ 1.00 ×", "holds".
func (b *Band) String() string {
	if b == nil {
		return ""
	}
	if b.Unit == unitYesNo {
		return "holds"
	}
	switch {
	case b.Min != nil && b.Max != nil:
		return fmtVal(*b.Min, "") + "–" + fmtVal(*b.Max, b.Unit)
	case b.Min != nil && b.Above:
		return "> " + fmtVal(*b.Min, b.Unit)
	case b.Min != nil:
		return "≥ " + fmtVal(*b.Min, b.Unit)
	case b.Max != nil:
		return "≤ " + fmtVal(*b.Max, b.Unit)
	}
	return "any"
}

// Format is v in b's unit, as a cell.
func (b *Band) Format(v float64) string {
	if b != nil && b.Unit == unitYesNo {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "n/a"
		}
		switch v {
		case 1:
			return "yes"
		case 0:
			return "no"
		}
		return strconv.FormatFloat(v, 'g', 3, 64) // a median of an even count
	}
	unit := ""
	if b != nil {
		unit = b.Unit
	}
	return fmtVal(v, unit)
}

// fmtVal prints v with three significant digits (at least one decimal
// below 100) and the unit.
func fmtVal(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case a >= 100 || v == math.Trunc(v):
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'g', 3, 64)
	}
	if unit == "" {
		return s
	}
	if unit == "%" || unit == "×" {
		return s + unit
	}
	return s + " " + unit
}

// bandCheck is one run's check of a claim: value v tested against band b,
// detail what this run measured, in words. The seeds' values are merged
// by RunSeeds (median against the band).
func bandCheck(target, claim, expected string, b *Band, v float64, detail string) Check {
	return Check{Target: target, Claim: claim, Expected: expected, Band: b, Value: v, Measured: detail, Pass: b.Contains(v)}
}

// holdsCheck is a yes/no claim: ok for this run.
func holdsCheck(target, claim, expected, why string, ok bool, detail string) Check {
	v := 0.0
	if ok {
		v = 1
	}
	return bandCheck(target, claim, expected, Holds(why), v, detail)
}

// notTestable is a claim this setup cannot test, with the reason.
func notTestable(target, claim, expected, reason string) Check {
	return Check{Target: target, Claim: claim, Expected: expected, NotTestable: reason, Value: math.NaN()}
}

// failing is where an unmeasured value (NaN: a seed whose run could not
// measure it, or that did not state the claim) sorts for band b: on the
// failing side, below an "at least" band's Min, above an "at most" band's
// Max, so a seed never votes for a pass it did not measure.
func (b *Band) failing() float64 {
	if b != nil && b.Min != nil {
		return math.Inf(-1)
	}
	return math.Inf(1)
}

// bandMedian is the median of xs with every NaN counted on b's failing
// side; ±Inf (shown "n/a") when the unmeasured seeds decide it.
func bandMedian(xs []float64, b *Band) float64 {
	s := slices.Clone(xs)
	for i, v := range s {
		if math.IsNaN(v) {
			s[i] = b.failing()
		}
	}
	return median(s)
}

// median of xs (the mean of the middle two for an even count); NaN for
// none. NaNs sort last.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.SortFunc(s, func(a, b float64) int {
		switch {
		case math.IsNaN(a) && math.IsNaN(b):
			return 0
		case math.IsNaN(a):
			return 1
		case math.IsNaN(b):
			return -1
		}
		return cmpFloat(a, b)
	})
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// legacyWhy is the reason of the band a check without one gets: a yes/no
// claim that did not say why yes/no is the claim (TestQuickRunsPass
// refuses it).
const legacyWhy = "a yes/no shape"

// mergeChecks folds the checks of every seed's run (runs[k] is seed
// seeds[k]'s) into one table: every claim any seed stated, in the order
// they first appear, with each seed's value (NaN where a seed did not
// state or measure it) and their median judged against the band, the
// unmeasured seeds counted on the failing side (bandMedian). A check
// without a band is a yes/no claim judged per seed (its Pass). A claim is
// not testable only when every seed says so; where seeds disagree, the
// ones that could not test it count as unmeasured. The detail (Measured)
// is the first stating seed's.
func mergeChecks(runs [][]Check, seeds []uint64) []Check {
	type key struct{ target, claim string }
	var order []key
	first := map[key]Check{}
	for _, run := range runs {
		for _, c := range run {
			k := key{c.Target, c.Claim}
			if _, ok := first[k]; !ok {
				order = append(order, k)
				first[k] = c
			}
		}
	}
	out := make([]Check, 0, len(order))
	for _, k := range order {
		m := first[k]
		m.Values, m.Seeds, m.NotTestable = nil, nil, ""
		untestable, reason := 0, ""
		for i, run := range runs {
			v, stated := math.NaN(), false
			for _, o := range run {
				if o.Target != k.target || o.Claim != k.claim {
					continue
				}
				stated = true
				switch {
				case o.NotTestable != "":
					untestable++
					if reason == "" {
						reason = o.NotTestable
					}
				case o.Band == nil:
					v = 0
					if o.Pass {
						v = 1
					}
				default:
					v = o.Value
					if m.Band == nil {
						m.Band = o.Band
					}
				}
				break
			}
			m.Values = append(m.Values, v)
			if stated {
				m.Seeds = append(m.Seeds, seeds[i])
			}
		}
		if untestable == len(runs) {
			m.NotTestable, m.Band, m.Values, m.Median, m.Value, m.Pass = reason, nil, nil, math.NaN(), math.NaN(), false
			out = append(out, m)
			continue
		}
		if m.Band == nil {
			m.Band = Holds(legacyWhy)
		}
		m.Median = bandMedian(m.Values, m.Band)
		m.Value = m.Median
		m.Pass = m.Band.Contains(m.Median)
		out = append(out, m)
	}
	return out
}

// spread is the values' range as a cell: "61–70%" (min–max over seeds).
func (c Check) spread() string {
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, v := range c.Values {
		if !math.IsNaN(v) {
			lo, hi, n = min(lo, v), max(hi, v), n+1
		}
	}
	if n == 0 {
		return "n/a"
	}
	if c.Band != nil && c.Band.Unit == unitYesNo {
		yes := 0
		for _, v := range c.Values {
			if v == 1 {
				yes++
			}
		}
		return fmt.Sprintf("yes on %d of %d", yes, len(c.Values))
	}
	return c.Band.Format(lo) + " – " + c.Band.Format(hi)
}

// perSeed lists the values by seed: "1: 63%, 2: 61%, 3: 70%".
func (c Check) perSeed() string {
	var s []string
	for i, v := range c.Values {
		seed := ""
		if i < len(c.Seeds) {
			seed = strconv.FormatUint(c.Seeds[i], 10) + ": "
		}
		s = append(s, seed+c.Band.Format(v))
	}
	return strings.Join(s, ", ")
}

// checkJSON is Check as JSON: NaN (an unmeasured value) is null, which
// encoding/json cannot write for a float64.
type checkJSON struct {
	checkPlain
	Values []*float64 `json:"values,omitempty"`
	Median *float64   `json:"median"`
}

type checkPlain Check

func nanToNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func nilToNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// MarshalJSON writes c with unmeasured values as null.
func (c Check) MarshalJSON() ([]byte, error) {
	j := checkJSON{checkPlain: checkPlain(c), Median: nanToNil(c.Median)}
	for _, v := range c.Values {
		j.Values = append(j.Values, nanToNil(v))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *Check) UnmarshalJSON(b []byte) error {
	var j checkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Check(j.checkPlain)
	c.Median, c.Value = nilToNaN(j.Median), nilToNaN(j.Median)
	c.Values = nil
	for _, p := range j.Values {
		c.Values = append(c.Values, nilToNaN(p))
	}
	return nil
}

// verdictClass is the verdict as one word, for a report's CSS class.
func (c Check) verdictClass() string {
	if !c.Testable() {
		return "untestable"
	}
	return c.Verdict()
}
