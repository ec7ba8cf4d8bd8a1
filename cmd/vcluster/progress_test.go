package main

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

type stepWall struct{ now int64 }

func (s *stepWall) Now() int64                            { return s.now }
func (s *stepWall) SleepUntil(d int64, _ <-chan struct{}) { s.now = d }

// The observer's status: point i of n, events from the watched clusters,
// events/s from the wall clock, ETA from the points done.
func TestObserverStatus(t *testing.T) {
	w := &stepWall{}
	var out bytes.Buffer
	o := newObserverClock(&logProgress{w: &out, every: 50 * time.Millisecond}, nil, w)
	o.Begin("exp")
	cfg, err := config.Load("", []string{"fabric.hosts=4", "fabric.hostsPerT0=2"})
	if err != nil {
		t.Fatal(err)
	}
	var events uint64
	for i := range 4 {
		o.Point(i, 4, "cell")
		c, err := cluster.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		o.Watch(c)
		// 100 000 events, each taking 1 µs of wall time: 1 M events/s,
		// 100 ms per point.
		for range 100000 {
			c.Loop.At(0, func() { w.now += int64(time.Microsecond) })
		}
		c.Loop.Run()
		events += c.Loop.Executed()
		c.Close()
	}
	o.End()
	s := o.status()
	if s.events != events || s.i != 3 || s.n != 4 {
		t.Errorf("status = %+v, want %d events, point 3 of 4", s, events)
	}
	got := out.String()
	for _, want := range []string{"[exp] point 1/4 cell (elapsed 0s, ETA ?)", "[exp] point 3/4 cell (elapsed 200ms, ETA 200ms)",
		"[exp] point 4/4 cell (elapsed 300ms, ETA 100ms)", "1.00 M events/s", "[exp] done, 4 points, 400000 events, 400ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if m := regexp.MustCompile(`(\d+\.\d+) M events/s`).FindAllStringSubmatch(got, -1); len(m) < 2 || m[len(m)-1][1] != "1.00" {
		t.Errorf("rates in %q, want 1.00 M events/s", got)
	}
}

// Not a terminal (tests, CI): plain log lines on stderr, one per point.
// --progress bar draws the bar anyway; none prints nothing.
func TestProgressModes(t *testing.T) {
	args := append(append([]string{}, quickExp...), "--out", t.TempDir())
	code, _, errOut := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exited %d: %s", code, errOut)
	}
	for _, want := range []string{"[allreduce-loss] point 1/4 MRC, 1 QP, loss 0% (elapsed", "[allreduce-loss] point 4/4 RoCE, 1 QP, loss 1%",
		"allreduce-loss: RoCE, 1 QP   loss 0.01", "[allreduce-loss] done, 4 points, "} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	code, _, errOut = runCLI(t, append(args, "--progress", "bar")...)
	if code != 0 {
		t.Fatalf("exited %d: %s", code, errOut)
	}
	for _, want := range []string{"allreduce-loss point 4/4 RoCE, 1 QP, loss 1% │ virtual ", "M ev/s", "100% |", "allreduce-loss: done, 4 points"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("bar output lacks %q:\n%q", want, errOut)
		}
	}
	if code, _, errOut := runCLI(t, append(args, "--progress", "none")...); code != 0 || strings.Contains(errOut, "point") {
		t.Errorf("--progress none: exit %d, %q", code, errOut)
	}
	if code, _, _ := runCLI(t, append(args, "--progress", "fancy")...); code != 2 {
		t.Errorf("--progress fancy exited %d, want 2", code)
	}
}

// A run that reports no points gets a spinner; its log lines and the end
// line still come out.
func TestBarWithoutPoints(t *testing.T) {
	var out bytes.Buffer
	b := &barProgress{w: &out}
	b.begin("drill")
	b.update(progressStatus{exp: "drill", virtual: 1500 * time.Microsecond, rate: 2e6, eta: -1})
	b.Write([]byte("a log line\n"))
	b.end(progressStatus{exp: "drill", events: 42, eta: -1})
	s := out.String()
	for _, want := range []string{"drill │ virtual 1.5ms │ 2.00 M ev/s │ ETA ?", "a log line\n", "drill: done, 42 events"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q: %q", want, s)
		}
	}
}

// termLines splits what a bar wrote to a terminal into the lines it
// drew: every \r returns to the start of the line, every \n starts one.
func termLines(out string) []string {
	return strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' })
}

// On a terminal of 80, 100 or 120 columns every line the bar draws fits
// (none wraps, so each can be redrawn in place) and still shows the ETA,
// with a long experiment label, for a bar and for a spinner.
func TestBarFitsTerminal(t *testing.T) {
	for _, width := range []int{80, 100, 120} {
		var out bytes.Buffer
		b := &barProgress{w: &out, cols: width}
		b.begin("allreduce-loss")
		st := progressStatus{exp: "allreduce-loss", i: 3, n: 9, label: "RoCE+DCQCN, 16 QPs, loss 0.1%, a long label", virtual: 1234567 * time.Nanosecond,
			rate: 12.345e6, eta: 83 * time.Second}
		b.point(st)
		for _, sh := range []float64{0.2, 0.5, 0.8} {
			st.share = sh
			b.update(st)
		}
		b.end(st)
		b.begin("drill")
		b.update(progressStatus{exp: "drill a rather long phase name for a spinner of its own", virtual: time.Millisecond, rate: 1e6, eta: 75 * time.Second})
		b.end(progressStatus{exp: "drill", events: 7, eta: -1})
		lines := termLines(out.String())
		bars, spinners, example := 0, 0, ""
		for _, l := range lines {
			if n := cols(l); n >= width {
				t.Errorf("%d columns: a %d-column line: %q", width, n, l)
			}
			switch {
			case strings.Contains(l, "% |"):
				bars++
				example = l
				if !strings.Contains(l, "ETA 1m23s") || !strings.Contains(l, "point 4/9") {
					t.Errorf("%d columns: bar line without its ETA or point: %q", width, l)
				}
			case strings.Contains(l, "drill a rather"):
				spinners++
				if !strings.Contains(l, "ETA 1m15s") {
					t.Errorf("%d columns: spinner line without its ETA: %q", width, l)
				}
			}
		}
		if bars < 4 || spinners < 1 {
			t.Errorf("%d columns: %d bar lines, %d spinner lines in %q", width, bars, spinners, out.String())
		}
		t.Logf("%d columns: %q", width, example)
	}
	// The narrowest cuts: a label goes entirely before the ETA does, then
	// the experiment's name is cut, not the point count.
	for budget, want := range map[int]string{
		36: "allreduce-loss point 4/9 │ ETA 1m0s",
		30: "allreduc… point 4/9 │ ETA 1m0s",
		12: "ETA 1m0s",
	} {
		if d := fitDescription(progressStatus{exp: "allreduce-loss", i: 3, n: 9, label: "RoCE, 16 QPs", eta: time.Minute}, budget); d != want {
			t.Errorf("fitDescription in %d columns = %q, want %q", budget, d, want)
		}
	}
}

// barPercents are the percentages a bar drew, in order.
func barPercents(t *testing.T, out string) []int {
	t.Helper()
	var ps []int
	for _, m := range regexp.MustCompile(`(\d+)% \|`).FindAllStringSubmatch(out, -1) {
		p, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// The bar moves within a point by the observer's share done and never
// goes back (a share lower than before, a new cluster of the same point);
// it shows 100% only at the end, and an interrupted run leaves it where
// it stopped.
func TestBarMovesWithinPoint(t *testing.T) {
	var out bytes.Buffer
	b := &barProgress{w: &out, cols: 120}
	b.begin("exp")
	st := progressStatus{exp: "exp", n: 2, eta: -1}
	b.point(st)
	for _, sh := range []float64{0.1, 0.3, 0.2, 0.999999} {
		st.share = sh
		b.update(st)
	}
	st.i, st.share = 1, 0
	b.point(st)
	st.share = 0.5
	b.update(st)
	before := barPercents(t, out.String())
	b.end(st)
	ps := barPercents(t, out.String())
	t.Logf("percentages: %v", ps)
	want := []int{5, 15, 49, 50, 75}
	got := slices.Compact(slices.Clone(before))
	got = slices.DeleteFunc(got, func(p int) bool { return p == 0 })
	if !slices.Equal(got, want) {
		t.Errorf("percentages within the points %v (compacted %v), want %v", before, got, want)
	}
	if ps[len(ps)-1] != 100 || slices.Contains(before, 100) {
		t.Errorf("percentages %v: want 100 only at the end", ps)
	}

	out.Reset()
	b.begin("exp")
	st = progressStatus{exp: "exp", i: 1, n: 4, share: 0.5, eta: -1}
	b.point(st)
	st.interrupted = true
	b.end(st)
	if ps := barPercents(t, out.String()); len(ps) == 0 || slices.Max(ps) != 37 || !strings.Contains(out.String(), "interrupted at point 2/4") {
		t.Errorf("interrupted: percentages %v in %q", ps, out.String())
	}
}

// tickWall advances 1 ms on every reading.
type tickWall struct{ now int64 }

func (s *tickWall) Now() int64                            { s.now += int64(time.Millisecond); return s.now }
func (s *tickWall) SleepUntil(d int64, _ <-chan struct{}) { s.now = d }

// A partitioned cluster reports progress between windows
// (sim.Parallel.OnBarrier): updates with the virtual time come during the
// run, not only at its points.
func TestObserverPartitionedProgress(t *testing.T) {
	var out bytes.Buffer
	w := &tickWall{}
	o := newObserverClock(&logProgress{w: &out, every: time.Millisecond}, nil, w)
	o.Begin("exp")
	cfg, err := cluster.HtsimFatTreeConfig(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.NewPartitioned(cfg, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o.Point(0, 1, "perm")
	o.Watch(c)
	if _, err := c.RunPermutation(c.SpreadPermutation(1, 1), 32<<20); err != nil {
		t.Fatal(err)
	}
	o.End()
	got := out.String()
	n := strings.Count(got, ": virtual ")
	if min := int(c.Executed()/progressEvery) / 2; n < max(min, 2) {
		t.Fatalf("%d progress updates for %d events:\n%s", n, c.Executed(), got)
	}
	if o.status().events != c.Executed() {
		t.Errorf("status has %d events, the run %d", o.status().events, c.Executed())
	}
}
