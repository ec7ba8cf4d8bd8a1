package experiments

// Time series the experiments share: rate samplers on the loop, means
// and minima over windows of samples, plot series.

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/sim"
)

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

func slicesMax(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// sampleRate samples a cumulative counter every interval of virtual time
// from now until until; the result's i-th value is the counter's increase
// over the i-th interval, times scale per nanosecond (scale 8 on a byte
// counter gives Gb/s). The slice fills as the loop runs. It samples on
// c.Scheduler(): on a partitioned cluster every sample is a global event,
// read with every partition stopped.
func sampleRate(c *cluster.Cluster, interval time.Duration, until sim.Time, scale float64, read func() uint64) *[]float64 {
	out := new([]float64)
	sched := c.Scheduler()
	start, last := sched.Now(), read()
	var tick func()
	tick = func() {
		v := read()
		if sched.Now() > start {
			*out = append(*out, float64(v-last)*scale/float64(interval.Nanoseconds()))
		}
		last = v
		if next := sched.Now() + sim.Time(interval); next <= until {
			sched.At(next, tick)
		}
	}
	sched.At(start, tick)
	return out
}

// sampleRx is host h's NIC receive rate in Gb/s per interval (all planes,
// every frame including retransmissions).
func sampleRx(c *cluster.Cluster, h int, interval time.Duration, until sim.Time) *[]float64 {
	return sampleRate(c, interval, until, 8, func() uint64 {
		var rx uint64
		for _, p := range c.Topo.HostPorts[h] {
			rx += p.Counters.RxBytes
		}
		return rx
	})
}

// binned is a plot series of at most maxPoints points: consecutive samples
// (sample i at x0 + (i+1)·dx) averaged in equal bins.
func binned(name string, y []float64, x0, dx float64, maxPoints int) Series {
	s := Series{Name: name}
	k := max(1, (len(y)+maxPoints-1)/maxPoints)
	for i := 0; i < len(y); i += k {
		var sum float64
		n := min(k, len(y)-i)
		for _, v := range y[i : i+n] {
			sum += v
		}
		s.X = append(s.X, x0+float64(i+n)*dx)
		s.Y = append(s.Y, sum/float64(n))
	}
	return s
}

// sortMarks orders a plot's marks by x (stable: equal times keep the
// order they were added in).
func sortMarks(m []Mark) {
	slices.SortStableFunc(m, func(a, b Mark) int { return cmp.Compare(a.X, b.X) })
}

// meanRate is the mean of the samples whose interval lies in [from, to]
// (samples of interval d; sample i covers (i·d, (i+1)·d]); NaN if none.
func meanRate(g []float64, d time.Duration, from, to sim.Time) float64 {
	var sum float64
	var k int
	for i, v := range g {
		a, b := sim.Time(int64(i)*d.Nanoseconds()), sim.Time(int64(i+1)*d.Nanoseconds())
		if a >= from && b <= to {
			sum += v
			k++
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return sum / float64(k)
}

// minWindow is the lowest mean over consecutive whole windows of length w
// (a multiple of the sample interval d) from from to to; NaN if none fits.
func minWindow(g []float64, d, w time.Duration, from, to sim.Time) float64 {
	m := math.NaN()
	for a := from; a+sim.Time(w) <= to; a += sim.Time(w) {
		if v := meanRate(g, d, a, a+sim.Time(w)); !math.IsNaN(v) && (math.IsNaN(m) || v < m) {
			m = v
		}
	}
	return m
}

// minRate is the lowest sample whose interval lies in [from, to]; NaN if none.
func minRate(g []float64, d time.Duration, from, to sim.Time) float64 {
	m := math.NaN()
	for i, v := range g {
		a, b := sim.Time(int64(i)*d.Nanoseconds()), sim.Time(int64(i+1)*d.Nanoseconds())
		if a >= from && b <= to && (math.IsNaN(m) || v < m) {
			m = v
		}
	}
	return m
}
