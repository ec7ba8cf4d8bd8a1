package experiments

// Cell formatting the experiments share: percentages, times and
// fractions as table cells, titles and prose.

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pct(f float64) string { return pctNum(f) + "%" }

// pctNum is f in percent, as short as it is exact (0.1 for 0.001): a
// tick or a cell under a "(%)" header.
func pctNum(f float64) string { return strconv.FormatFloat(100*f, 'g', -1, 64) }

func pctOrNA(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return pctCell(f) + "%"
}

// pctCell is fraction f as a table cell under a "(%)" header: percent
// with one decimal, "n/a" for NaN.
func pctCell(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64)
}

// lossAxis and lossTicks are the x axis of a plot against the loss rates
// of a grid: one category per rate, in percent.
const lossAxis = "Bernoulli loss rate on every link (%)"

func lossTicks(losses []float64) []string {
	var t []string
	for _, l := range losses {
		t = append(t, pctNum(l))
	}
	return t
}

// durText is d for titles and prose: a number, a space, a unit (2 ms,
// 768.084 µs), not time.Duration's "768.084µs" beside "23.0 µs".
func durText(d time.Duration) string {
	units := []struct {
		name string
		d    time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"µs", time.Microsecond}}
	for _, u := range units {
		if d >= u.d || d <= -u.d {
			return strconv.FormatFloat(float64(d)/float64(u.d), 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + " ns"
}

// usCell is a time in ns as a table cell under a "(µs)" header: one
// decimal, or "never" for a negative time (an event that did not happen).
func usCell(ns int64) string {
	if ns < 0 {
		return "never"
	}
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64)
}

func f4(f float64) string {
	if math.IsNaN(f) {
		return ""
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func usOrNever(ns int64) string {
	if ns < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f µs", float64(ns)/1e3)
}
