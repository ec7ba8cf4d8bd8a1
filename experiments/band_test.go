package experiments

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestBandContainsAndString(t *testing.T) {
	for _, c := range []struct {
		b    *Band
		v    float64
		in   bool
		text string
	}{
		{Between(20, 50, "%", ""), 33, true, "20–50%"},
		{Between(20, 50, "%", ""), 19.9, false, "20–50%"},
		{Between(20, 50, "%", ""), 50, true, "20–50%"},
		{AtMost(10, "%", ""), 10.5, false, "≤ 10%"},
		{AtMost(10, "%", ""), -3, true, "≤ 10%"},
		{AtLeast(1, "×", ""), 1.02, true, "≥ 1×"}, {AtLeast(1, "×", ""), 1, true, "≥ 1×"},
		{Above(1, "×", ""), 1, false, "> 1×"}, {Above(1, "×", ""), 1.001, true, "> 1×"}, {Between(6, 14, "flows", ""), 8, true, "6–14 flows"},
		{Around(5.09, 0.2, "µs", ""), 6.2, false, "4.07–6.11 µs"},
		{Holds(""), 1, true, "holds"},
		{Holds(""), 0, false, "holds"},
		{Between(0, 1, "", ""), math.NaN(), false, "0–1"},
	} {
		if got := c.b.Contains(c.v); got != c.in {
			t.Errorf("%s contains %v = %v, want %v", c.b, c.v, got, c.in)
		}
		if got := c.b.String(); got != c.text {
			t.Errorf("band string %q, want %q", got, c.text)
		}
	}
}

func TestMedian(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 2, 3}, 2.5},
		{[]float64{5}, 5},
		{[]float64{1, nan, 9}, 9}, // NaN sorts last; bandMedian places it
	} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
	if !math.IsNaN(median(nil)) || !math.IsNaN(median([]float64{nan})) {
		t.Error("median of nothing measured must be NaN")
	}
}

// The median decides, not the first seed, and the band is where it must
// lie; a yes/no claim is the majority; a claim one seed cannot test is
// not testable; a seed that did not state a claim counts as unmeasured.
func TestMergeChecks(t *testing.T) {
	band := Between(20, 50, "%", "why")
	run := func(v float64, ok bool, nt string) []Check {
		cs := []Check{bandCheck("T3", "keeps a third", "≈ 1/3", band, v, "detail"),
			{Target: "T9", Claim: "no QP fails", Pass: ok}}
		if nt != "" {
			cs = append(cs, notTestable("T7", "reconverges", "x", nt))
		}
		return cs
	}
	got := mergeChecks([][]Check{run(10, true, "no BGP"), run(30, false, "no BGP"), run(40, true, "no BGP")}, []uint64{1, 2, 3})
	if len(got) != 3 {
		t.Fatalf("%d checks, want 3", len(got))
	}
	if c := got[0]; !c.Pass || c.Median != 30 || len(c.Values) != 3 || c.Values[0] != 10 || c.Measured != "detail" {
		t.Errorf("band check merged to %+v; want pass at median 30 although seed 1 (10%%) is outside", c)
	}
	if c := got[1]; !c.Pass || c.Median != 1 || c.Band == nil || c.spread() != "yes on 2 of 3" {
		t.Errorf("yes/no check merged to %+v (spread %q), want the majority (2 of 3) to pass", c, c.spread())
	}
	if c := got[2]; c.Testable() || c.Pass || !strings.HasPrefix(c.Verdict(), "not testable here: no BGP") {
		t.Errorf("untestable check merged to %+v", c)
	}
	// Seed 3 does not state the claims: it counts as unmeasured, on the
	// failing side of each band — {10, 30, unmeasured} in 20–50 has median
	// 10 (differs), and a yes/no claim that fails on seed 1, holds on seed
	// 2 and is unstated on seed 3 differs: an unmeasured seed never votes
	// for a pass.
	got = mergeChecks([][]Check{run(10, false, ""), run(30, true, ""), {}}, []uint64{1, 2, 3})
	if c := got[0]; c.Pass || c.Median != 10 || !math.IsNaN(c.Values[2]) || len(c.Seeds) != 2 {
		t.Errorf("missing seed merged to %+v", c)
	}
	if c := got[1]; c.Pass {
		t.Errorf("yes/no with an unstated seed merged to %+v, want differs", c)
	}
	// An "at most" band: the unmeasured seed sorts above Max.
	atMost := func(v float64) []Check {
		return []Check{bandCheck("T3", "unusable", "≤ 10%", AtMost(10, "%", ""), v, "")}
	}
	if c := mergeChecks([][]Check{atMost(5), atMost(math.NaN()), atMost(math.NaN())}, []uint64{1, 2, 3})[0]; c.Pass || !math.IsInf(c.Median, 1) || c.Band.Format(c.Median) != "n/a" {
		t.Errorf("at-most band with two unmeasured seeds merged to %+v, want differs at n/a", c)
	}
	// Seeds that disagree on testability: the untestable one is unmeasured;
	// a claim only a later seed states is kept.
	got = mergeChecks([][]Check{{notTestable("T7", "c", "e", "why")}, {holdsCheck("T7", "c", "e", "w", true, "")}, {holdsCheck("T7", "c", "e", "w", true, ""), holdsCheck("T9", "late", "e", "w", true, "")}}, []uint64{1, 2, 3})
	if len(got) != 2 || !got[0].Testable() || !got[0].Pass || got[1].Claim != "late" || got[1].Pass {
		t.Errorf("disagreeing / late claims merged to %+v", got)
	}
	got = mergeChecks([][]Check{run(10, true, ""), run(15, true, ""), run(60, true, "")}, []uint64{1, 2, 3})
	if c := got[0]; c.Pass || c.Verdict() != "differs" {
		t.Errorf("median 15 outside 20–50 merged to %+v", c)
	}
	r := &Results{Checks: []Check{notTestable("T7", "c", "e", "why")}}
	if ok, _ := r.Passed(); ok {
		t.Error("a table of untestable claims only must not count as passed")
	}
}

// NaN (an unmeasured value) goes through results.json as null and back.
func TestCheckJSONRoundTrip(t *testing.T) {
	cs := mergeChecks([][]Check{{bandCheck("T1", "c", "e", AtMost(10, "%", "w"), math.NaN(), "d")}}, []uint64{7})
	b, err := json.Marshal(cs)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"median":null`) || !strings.Contains(string(b), `"values":[null]`) {
		t.Errorf("JSON %s: want null median and values", b)
	}
	var back []Check
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 1 || !math.IsNaN(back[0].Median) || back[0].Band == nil || *back[0].Band.Max != 10 || back[0].Seeds[0] != 7 {
		t.Errorf("round trip: %+v", back)
	}
}
