package cluster

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// partResult is everything a partitioned permutation run produces, as text
// so runs compare byte for byte.
type partResult struct {
	flows    string // per flow: start, end, responder WriteImm time, bytes, transport stats
	counters []byte // fabric counters CSV
	events   uint64
	now      int64
	cross    uint64
}

// runPartPerm runs a permutation (every host h sends size bytes to
// perm[h] on one MRC QP) on a cluster cut into parts partitions, on workers
// goroutines, until the cluster is idle.
func runPartPerm(t testing.TB, cfg config.Config, parts, workers int, size uint64) partResult {
	t.Helper()
	c, err := NewPartitioned(cfg, parts, workers)
	if err != nil {
		t.Fatal(err)
	}
	return runPerm(t, c, size)
}

// runPerm runs the permutation on a built cluster (partitioned or not).
func runPerm(t testing.TB, c *Cluster, size uint64) partResult {
	t.Helper()
	defer c.Close()
	trs := startPerm(t, c, size)
	c.Run()
	var r partResult
	var b strings.Builder
	for i, tr := range trs {
		if !tr.Done() || len(tr.Errors) > 0 || tr.Completed != size {
			t.Fatalf("flow %d: done %v, %d errors, %d of %d bytes", i, tr.Done(), len(tr.Errors), tr.Completed, size)
		}
		fmt.Fprintf(&b, "%d→%d %d %d %d %d %+v %+v\n", tr.Pair.A.Host, tr.Pair.B.Host, tr.Start, tr.End, tr.RecvImmAt, tr.Completed,
			tr.Pair.A.T.Stats(), tr.Pair.B.T.Stats())
	}
	r.flows = b.String()
	var csv bytes.Buffer
	if err := c.Topo.WriteCountersCSV(&csv); err != nil {
		t.Fatal(err)
	}
	r.counters = csv.Bytes()
	r.events, r.now = c.Executed(), int64(c.Now())
	if pt := c.Partitioning(); pt != nil {
		r.cross = pt.CrossFrames()
		if pt.Live() != 0 {
			t.Fatalf("%d packets leaked", pt.Live())
		}
	}
	return r
}

// startPerm starts the permutation: every host h sends size bytes to
// perm[h] on one QP, in work requests of size/2.
func startPerm(t testing.TB, c *Cluster, size uint64) []*Transfer {
	t.Helper()
	var trs []*Transfer
	for a, b := range Derangement(c.Config.Seed, len(c.Hosts)) {
		ps, err := c.Connect(a, b)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := c.StartTransfer(ps[0], c.Region(a, size, nil), c.Region(b, size, nil), size, size/2)
		if err != nil {
			t.Fatal(err)
		}
		trs = append(trs, tr)
	}
	return trs
}

func fatTreeCfg(t testing.TB, k int) config.Config {
	t.Helper()
	cfg, err := HtsimFatTreeConfig(k, 11)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func closCfg(t testing.TB) config.Config {
	t.Helper()
	cfg, err := config.Load("", []string{"fabric.topology=clos", "fabric.planes=2", "fabric.hostsPerT0=2", "fabric.t0PerPlane=4",
		"fabric.t1PerPlane=2", "fabric.hosts=8", "fabric.forwarding=usid", "transport.kind=mrc", "transport.payload=elided",
		"transport.mrc.nscc=true", "host.netstack=false", "seed=5"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sameResult(t *testing.T, name string, got, want partResult) {
	t.Helper()
	if got.flows != want.flows {
		t.Errorf("%s: flows differ:\n%s\nwant\n%s", name, got.flows, want.flows)
	}
	if !bytes.Equal(got.counters, want.counters) {
		t.Errorf("%s: counters CSV differs", name)
	}
	if got.events != want.events || got.now != want.now {
		t.Errorf("%s: %d events to %d ns, want %d to %d", name, got.events, got.now, want.events, want.now)
	}
}

// TestPartitionedFatTreePermutation: an MRC permutation on a k=4 fat-tree
// (htsim's scenario, small) gives byte-identical flow completion times,
// transport statistics and fabric counters on one loop and cut into 2 and
// 4 partitions on 1, 2 and 4 workers.
func TestPartitionedFatTreePermutation(t *testing.T) {
	cfg := fatTreeCfg(t, 4)
	const size = 400_000
	ref := runPartPerm(t, cfg, 1, 1, size)
	if !strings.Contains(string(ref.counters), "\n") || ref.events < 10_000 {
		t.Fatalf("reference too small: %d events", ref.events)
	}
	for _, parts := range []int{2, 4} {
		for _, w := range []int{1, 2, 4} {
			r := runPartPerm(t, cfg, parts, w, size)
			if r.cross == 0 {
				t.Fatalf("parts %d: nothing crossed partitions", parts)
			}
			if w == 1 {
				t.Logf("parts %d: %d events, %d frames crossed, idle at %d ns", parts, r.events, r.cross, r.now)
			}
			sameResult(t, fmt.Sprintf("parts %d workers %d", parts, w), r, ref)
		}
	}
}

// TestPartitionedMatchesClassicLoop: the partitioned model is the classic
// cluster (New, one sim.Loop run to idle): its links are ranked from the
// start, so equal-time arrivals order the same way on both.
func TestPartitionedMatchesClassicLoop(t *testing.T) {
	cfg := fatTreeCfg(t, 4)
	ref := runPartPerm(t, cfg, 2, 2, 400_000)
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameResult(t, "classic loop", runPerm(t, c, 400_000), ref)
}

// TestPartitionedClosPermutation: the same on a 2-plane Clos (uSID, MRC
// spraying over both planes), cut by T0 index.
func TestPartitionedClosPermutation(t *testing.T) {
	cfg := closCfg(t)
	ref := runPartPerm(t, cfg, 1, 1, 300_000)
	for _, parts := range []int{2, 4} {
		for _, w := range []int{1, 2} {
			sameResult(t, fmt.Sprintf("parts %d workers %d", parts, w), runPartPerm(t, cfg, parts, w, 300_000), ref)
		}
	}
}

// TestPartitionedRoCEPFC: RoCE (DCQCN) over a lossless class on a k=4
// fat-tree with ECMP, PFC pauses crossing partitions, is identical too.
func TestPartitionedRoCEPFC(t *testing.T) {
	cfg, err := config.Load("", []string{"fabric.topology=fattree", "fabric.k=4", "fabric.forwarding=ecmp",
		"fabric.queue.pfc.enabled=true", "fabric.queue.pfc.xoffBytes=20000", "fabric.queue.pfc.xonBytes=10000",
		"transport.kind=roce", "transport.payload=elided", "transport.qpsPerConnection=1", "host.netstack=false", "seed=9"})
	if err != nil {
		t.Fatal(err)
	}
	ref := runPartPerm(t, cfg, 1, 1, 300_000)
	pauses := 0
	lines := strings.Split(string(ref.counters), "\n")
	col := slices.Index(strings.Split(lines[0], ","), "pause_tx") // by name: drop reasons come before it
	for _, l := range lines[1:] {
		if f := strings.Split(l, ","); col >= 0 && len(f) > col && f[col] != "0" {
			pauses++
		}
	}
	if pauses == 0 {
		t.Fatal("no PFC pause sent: the test does not exercise PFC")
	}
	for _, pw := range [][2]int{{2, 2}, {4, 2}} {
		sameResult(t, fmt.Sprintf("parts %d workers %d", pw[0], pw[1]), runPartPerm(t, cfg, pw[0], pw[1], 300_000), ref)
	}
}

// TestPartitionedRunWhileStopsAtWindow: RunWhile stops at the same window
// boundary whatever the partitioning, so even a cut-short run compares
// byte for byte.
func TestPartitionedRunWhileStopsAtWindow(t *testing.T) {
	cfg := fatTreeCfg(t, 4)
	var ref []byte
	for _, pw := range [][2]int{{1, 1}, {2, 2}, {4, 2}} {
		c, err := NewPartitioned(cfg, pw[0], pw[1])
		if err != nil {
			t.Fatal(err)
		}
		perm := Derangement(3, len(c.Hosts))
		var trs []*Transfer
		for a, b := range perm {
			ps, err := c.Connect(a, b)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := c.StartTransfer(ps[0], c.Region(a, 1<<20, nil), c.Region(b, 1<<20, nil), 1<<20, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			trs = append(trs, tr)
		}
		if !c.RunWhile(func() bool { return !trs[0].Done() }) || !trs[0].Done() {
			t.Fatal("RunWhile did not stop when flow 0 completed")
		}
		if c.Parallel().Pending() == 0 {
			t.Fatal("nothing left to run: the condition did not cut the run short")
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "%d %d %d\n", c.Executed(), c.Now(), trs[0].End)
		if err := c.Topo.WriteCountersCSV(&b); err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = b.Bytes()
		} else if !bytes.Equal(ref, b.Bytes()) {
			t.Errorf("parts %d workers %d: state at the stop differs", pw[0], pw[1])
		}
		c.Close()
	}
}

// TestPartitionedRejects: configurations a partitioned run cannot honour
// are refused with the reason.
func TestPartitionedRejects(t *testing.T) {
	cfg := fatTreeCfg(t, 4)
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"run.pacing=realtime"}, "run.pacing=realtime"},
		{[]string{"output.pcap=h0/p0"}, "output.pcap"},
		{[]string{"host.tcp=true", "host.netstack=true"}, "host.tcp"},
	} {
		c, err := config.Load("", append(HtsimFatTreeSets(4), tc.set...))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewPartitioned(c, 2, 2); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %s", tc.set, err, tc.want)
		}
	}
	if _, err := NewPartitioned(cfg, 5, 1); err == nil {
		t.Error("5 partitions of a k=4 fat-tree accepted")
	}
}

// BenchmarkPartitionedPerm measures htsim's permutation scenario (k=8 by
// default; VCLUSTER_PAR_K=16 for the full 1024 hosts, VCLUSTER_PAR_BYTES
// for the flow size) on the classic loop and partitioned on 1 and 2
// workers, cut in 2 and in k partitions (one per pod); the build is not
// timed. Parallel efficiency is the 1-worker time over twice the 2-worker
// time.
func BenchmarkPartitionedPerm(b *testing.B) {
	k, size := 8, uint64(HtsimFlowBytes)
	if v, err := strconv.Atoi(os.Getenv("VCLUSTER_PAR_K")); err == nil {
		k = v
	}
	if v, err := strconv.ParseUint(os.Getenv("VCLUSTER_PAR_BYTES"), 10, 64); err == nil {
		size = v
	}
	cfg := fatTreeCfg(b, k)
	for _, pw := range [][2]int{{0, 0}, {1, 1}, {2, 1}, {2, 2}, {k, 1}, {k, 2}, {k / 2, 1}, {k / 2, 2}} {
		name := fmt.Sprintf("k%d/parts%d-workers%d", k, pw[0], pw[1])
		if pw[0] == 0 {
			name = fmt.Sprintf("k%d/classic", k)
		}
		b.Run(name, func(b *testing.B) {
			var events uint64
			var mean time.Duration
			var balance float64
			var windows, cross uint64
			for range b.N {
				b.StopTimer()
				var c *Cluster
				var err error
				if pw[0] == 0 {
					c, err = New(cfg, nil)
				} else {
					c, err = NewPartitioned(cfg, pw[0], pw[1])
				}
				if err != nil {
					b.Fatal(err)
				}
				perm := Derangement(cfg.Seed, len(c.Hosts))
				var trs []*Transfer
				for a, d := range perm {
					ps, err := c.Connect(a, d)
					if err != nil {
						b.Fatal(err)
					}
					tr, err := c.StartTransfer(ps[0], c.Region(a, size, nil), c.Region(d, size, nil), size, size)
					if err != nil {
						b.Fatal(err)
					}
					trs = append(trs, tr)
				}
				runtime.GC()
				b.StartTimer()
				c.Run()
				b.StopTimer()
				events = c.Executed()
				if par := c.Parallel(); par != nil {
					balance, windows = par.Balance(events), par.Stats.Windows
					cross = c.Partitioning().CrossFrames()
				}
				var sum time.Duration
				for _, tr := range trs {
					if !tr.Done() {
						b.Fatal("flow did not complete")
					}
					sum += time.Duration(tr.End - tr.Start)
				}
				mean = sum / time.Duration(len(trs))
				c.Close()
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mevents/s")
			b.ReportMetric(float64(events), "events")
			b.ReportMetric(float64(mean.Microseconds()), "meanFCT-µs")
			if balance > 0 {
				b.ReportMetric(balance, "balance")
				b.ReportMetric(float64(windows), "windows")
				b.ReportMetric(float64(cross), "crossframes")
			}
		})
	}
}

// TestPartitionedSync: after a run cut short, every partition's loop
// stands at its own latest event; Sync brings them all to the cluster's
// Now (running nothing), so work started from outside the loop — here a
// second wave of transfers — starts at the same time on every host and
// the rest of the run is identical for every partitioning.
func TestPartitionedSync(t *testing.T) {
	cfg := fatTreeCfg(t, 4)
	var ref []byte
	for _, pw := range [][2]int{{1, 1}, {2, 2}, {4, 1}, {4, 4}} {
		c, err := NewPartitioned(cfg, pw[0], pw[1])
		if err != nil {
			t.Fatal(err)
		}
		start := func(seed uint64) []*Transfer {
			var trs []*Transfer
			for a, b := range Derangement(seed, len(c.Hosts)) {
				ps, err := c.Connect(a, b)
				if err != nil {
					t.Fatal(err)
				}
				tr, err := c.StartTransfer(ps[0], c.Region(a, 1<<20, nil), c.Region(b, 1<<20, nil), 1<<20, 256<<10)
				if err != nil {
					t.Fatal(err)
				}
				trs = append(trs, tr)
			}
			return trs
		}
		first := start(3)
		c.RunWhile(func() bool { return !first[0].Done() })
		now, executed, pending := c.Now(), c.Executed(), c.Parallel().Pending()
		if got := c.Sync(); got != now || c.Executed() != executed || c.Parallel().Pending() != pending {
			t.Fatalf("Sync returned %d (Now %d), ran %d events", got, now, c.Executed()-executed)
		}
		for p, l := range c.Partitioning().Loops {
			if l.Now() != now {
				t.Fatalf("partition %d at %d after Sync, want %d", p, l.Now(), now)
			}
		}
		second := start(5)
		for _, tr := range second {
			if tr.Start != now {
				t.Fatalf("a transfer started after Sync at %d, want %d", tr.Start, now)
			}
		}
		c.Run()
		var b bytes.Buffer
		fmt.Fprintf(&b, "%d %d\n", c.Executed(), c.Now())
		for _, tr := range append(first, second...) {
			if !tr.Done() || len(tr.Errors) > 0 {
				t.Fatalf("transfer incomplete: %d errors", len(tr.Errors))
			}
			fmt.Fprintf(&b, "%d %d %d\n", tr.Start, tr.End, tr.RecvImmAt)
		}
		if err := c.Topo.WriteCountersCSV(&b); err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = b.Bytes()
		} else if !bytes.Equal(ref, b.Bytes()) {
			t.Errorf("parts %d workers %d: run after Sync differs", pw[0], pw[1])
		}
		c.Close()
	}
}

// TestPartitionedScheduler: actions on the whole cluster scheduled through
// Scheduler (on a partitioned cluster, global events between windows) —
// a T0–T1 cable going down and back up mid-permutation, and a sampler of
// every host port's received bytes — give the same flows, counters and
// samples on 1, 2 and 4 partitions and any number of workers; RunUntil
// leaves every partition's clock at its time.
func TestPartitionedScheduler(t *testing.T) {
	cfg := closCfg(t)
	run := func(parts, workers int) (partResult, string) {
		c, err := NewPartitioned(cfg, parts, workers)
		if err != nil {
			t.Fatal(err)
		}
		s := c.Scheduler()
		if _, ok := s.(*sim.Parallel); !ok {
			t.Fatalf("partitioned Scheduler is %T", s)
		}
		port := c.Topo.Port("p0.t0.0/2") // T0 0 – T1 0 in plane 0: a cut link for ≥ 2 partitions
		var samples strings.Builder
		var tick func()
		tick = func() {
			var rx uint64
			for _, hp := range c.Topo.HostPorts {
				for _, p := range hp {
					rx += p.Counters.RxBytes
				}
			}
			fmt.Fprintf(&samples, "%d:%d:%v ", s.Now(), rx, port.Tx.Up())
			if s.Now() < 200*sim.Microsecond {
				s.AfterFunc(5*time.Microsecond, tick)
			}
		}
		s.At(0, tick)
		s.At(20*sim.Microsecond, func() { port.Tx.SetUp(false); port.Peer.Tx.SetUp(false) })
		s.At(60*sim.Microsecond, func() { port.Tx.SetUp(true); port.Peer.Tx.SetUp(true) })
		c.RunUntil(1 * sim.Microsecond)
		for _, l := range c.Partitioning().Loops {
			if l.Now() != sim.Microsecond {
				t.Fatalf("%d partitions: RunUntil(1µs) left a clock at %v", parts, l.Now())
			}
		}
		return runPerm(t, c, 1<<20), samples.String()
	}
	want, wantS := run(1, 1)
	if !strings.Contains(wantS, ":false ") || !strings.Contains(wantS, "200000:") {
		t.Fatalf("the cable never went down, or sampling stopped early: %s", wantS)
	}
	if want.now < int64(60*sim.Microsecond) {
		t.Fatalf("the permutation ended at %d ns, before the cable came back", want.now)
	}
	for _, pw := range [][2]int{{2, 1}, {2, 2}, {4, 2}, {4, 4}} {
		got, gotS := run(pw[0], pw[1])
		sameResult(t, fmt.Sprintf("%d partitions, %d workers", pw[0], pw[1]), got, want)
		if gotS != wantS {
			t.Errorf("%d partitions, %d workers: samples differ:\n%s\nwant\n%s", pw[0], pw[1], gotS, wantS)
		}
	}
}

// classicScenario is a lossy, drill-like run driven the way the commands
// drive one: every link loses 0.5% of its frames; through Scheduler a
// T0–T1 cable goes down at 30 µs and up at 80 µs and a sampler reads every
// host port's received bytes each 10 µs; a first wave of transfers runs
// until its first flow completes (RunWhile), a second wave starts at the
// time that leaves (Sync), and the rest runs to idle. It returns
// everything the run produced, as text.
func classicScenario(t *testing.T, c *Cluster) string {
	t.Helper()
	defer c.Close()
	for _, l := range c.Topo.Links {
		l.Loss = fabric.NewBernoulli(0.005, c.Config.Seed, l.Name)
	}
	s := c.Scheduler()
	port := c.Topo.Port("p0.t0.0/2")
	var b strings.Builder
	var tick func()
	tick = func() {
		var rx uint64
		for _, hp := range c.Topo.HostPorts {
			for _, p := range hp {
				rx += p.Counters.RxBytes
			}
		}
		fmt.Fprintf(&b, "%d:%d ", s.Now(), rx)
		if s.Now() < 300*sim.Microsecond {
			s.AfterFunc(10*time.Microsecond, tick)
		}
	}
	s.At(0, tick)
	s.At(30*sim.Microsecond, func() { port.Tx.SetUp(false); port.Peer.Tx.SetUp(false) })
	s.At(80*sim.Microsecond, func() { port.Tx.SetUp(true); port.Peer.Tx.SetUp(true) })
	start := func(seed uint64, size uint64) []*Transfer {
		var trs []*Transfer
		for a, d := range Derangement(seed, len(c.Hosts)) {
			ps, err := c.Connect(a, d)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := c.StartTransfer(ps[0], c.Region(a, size, nil), c.Region(d, size, nil), size, size/4)
			if err != nil {
				t.Fatal(err)
			}
			trs = append(trs, tr)
		}
		return trs
	}
	first := start(3, 512<<10)
	c.RunWhile(func() bool { return !first[0].Done() })
	fmt.Fprintf(&b, "\nstop %d %d\n", c.Now(), c.Executed())
	c.Sync()
	second := start(5, 256<<10)
	c.Run()
	var lost uint64
	for _, l := range c.Topo.Links {
		lost += l.Counters.Lost
	}
	fmt.Fprintf(&b, "idle %d %d, %d frames lost\n", c.Now(), c.Executed(), lost)
	for i, tr := range append(first, second...) {
		if !tr.Done() || len(tr.Errors) > 0 {
			t.Fatalf("transfer %d: done %v, errors %v", i, tr.Done(), tr.Errors)
		}
		fmt.Fprintf(&b, "%d→%d %d %d %d %+v %+v\n", tr.Pair.A.Host, tr.Pair.B.Host, tr.Start, tr.End, tr.RecvImmAt,
			tr.Pair.A.T.Stats(), tr.Pair.B.T.Stats())
	}
	if err := c.Topo.WriteCountersCSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestClassicMatchesPartitioned: the classic loop (NewForWorkers(c, 0),
// what --parallel 0 builds) and the partitioned loop on any number of
// workers and partitions give byte-identical results for a lossy run with
// faults, a sampler, a run cut short and a second wave: one tie-break
// (ranked link arrivals; global events before everything else of their
// time) and one stop rule (window boundaries) for every mode. Before, the
// classic loop broke equal-time ties by scheduling order and stopped
// RunWhile at the very event, and differed.
func TestClassicMatchesPartitioned(t *testing.T) {
	cfg := closCfg(t)
	build := func(workers int) *Cluster {
		c, err := NewForWorkers(cfg, workers)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	classic := build(0)
	if classic.Partitioning() != nil || classic.Loop == nil || classic.Parallel() == nil || len(classic.Parallel().Loops) != 1 {
		t.Fatalf("NewForWorkers(c, 0): want the classic loop, not cut, run in windows by a one-loop Parallel")
	}
	ref := classicScenario(t, classic)
	if strings.Count(ref, "→") != 2*cfg.Fabric.Hosts || strings.Contains(ref, " 0 frames lost") {
		t.Fatalf("scenario incomplete or loss-free:\n%s", ref)
	}
	for _, w := range []int{1, 2} {
		if got := classicScenario(t, build(w)); got != ref {
			t.Errorf("--parallel %d differs from the classic loop: %s", w, firstDiff(got, ref))
		}
	}
	c, err := NewPartitioned(cfg, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := classicScenario(t, c); got != ref {
		t.Errorf("2 partitions differ from the classic loop: %s", firstDiff(got, ref))
	}
}

// firstDiff describes the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d:\n%.400s\nwant\n%.400s", i+1, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}
