package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/internal/clustertest"
	"github.com/vcluster/vcluster/sim"
)

// recordUI keeps every status the observer shows from inside the loop
// (got), at each point or step (points) and at each phase's end (ends),
// and the log lines of a logProgress.
type recordUI struct {
	logProgress
	got, points, ends []progressStatus
}

func (r *recordUI) update(s progressStatus) { r.got = append(r.got, s) }
func (r *recordUI) interval() time.Duration { return 0 }
func (r *recordUI) point(s progressStatus) {
	r.points = append(r.points, s)
	r.logProgress.point(s)
}
func (r *recordUI) end(s progressStatus) {
	r.ends = append(r.ends, s)
	r.logProgress.end(s)
}

func newRecordUI() *recordUI { return &recordUI{logProgress: logProgress{w: io.Discard}} }

// smallCluster is a 4-host cluster.
func smallCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	return testCluster(t, "fabric.hosts=4", "fabric.hostsPerT0=2")
}

// testCluster is a cluster of the default config with sets, closed when
// the test ends.
func testCluster(t *testing.T, sets ...string) *cluster.Cluster {
	t.Helper()
	return clustertest.New(t, sets...)
}

// runEvents runs n events on c, 1 µs of virtual time apart.
func runEvents(c *cluster.Cluster, n int) {
	at := c.Now()
	for k := range n {
		c.Loop.At(at+sim.Time(k+1)*sim.Microsecond, func() {})
	}
	c.Loop.Run()
}

// The share of a point shown done: in the first point from the virtual
// time (guessFirstPoint, or against the experiment's expectation), then
// from the events of the points done — exactly as documented, never going
// down, never reaching 1 even when a point takes far longer than the mean.
func TestObserverShare(t *testing.T) {
	rec := newRecordUI()
	o := newObserverClock(rec, nil, &stepWall{})
	o.Begin("exp")
	sizes := []int{200000, 100000, 400000}
	var done []uint64 // events of each point
	for i, n := range sizes {
		rec.got = rec.got[:0]
		o.Point(i, len(sizes), "p")
		before := o.totalEvents()
		c := smallCluster(t)
		o.Watch(c)
		runEvents(c, n)
		if len(rec.got) < 3 {
			t.Fatalf("point %d: %d updates", i, len(rec.got))
		}
		var mean float64
		for _, d := range done {
			mean += float64(d)
		}
		mean /= float64(max(len(done), 1))
		prev := 0.0
		for _, s := range rec.got {
			var want float64
			if i == 0 {
				want = guessFirstPoint(sim.Time(s.virtual))
			} else {
				want = ease(float64(s.events-before) / mean)
			}
			if math.Abs(s.share-want) > 1e-12 || s.share < prev || s.share >= 1 || s.share <= 0 {
				t.Errorf("point %d at %v, %d events: share %g, want %g (before %g)", i, s.virtual, s.events, s.share, want, prev)
			}
			prev = s.share
		}
		t.Logf("point %d: %d events, shares %.3f … %.3f", i, c.Executed(), rec.got[0].share, prev)
		if i == 2 && (prev <= 0.9 || prev >= 0.99) {
			t.Errorf("point 2 (2.7× the mean): share %g, want in (0.9, 0.99)", prev)
		}
		done = append(done, c.Executed())
	}
	o.End()

	// With an expectation: the first point against it.
	rec.got = rec.got[:0]
	o.Begin("expected")
	o.expectVirtual(100 * time.Millisecond)
	o.Point(0, 2, "p")
	c := smallCluster(t)
	o.Watch(c)
	runEvents(c, 150000) // 150 ms of virtual time: more than expected
	for _, s := range rec.got {
		if want := ease(float64(s.virtual) / float64(100*time.Millisecond)); math.Abs(s.share-want) > 1e-12 {
			t.Errorf("at %v: share %g, want %g", s.virtual, s.share, want)
		}
	}
	if last := rec.got[len(rec.got)-1].share; last <= 0.9 || last >= 0.99 {
		t.Errorf("past the expectation: share %g", last)
	}
	// A second cluster of the same point starts again at virtual time 0:
	// the share stays where it was.
	top := rec.got[len(rec.got)-1].share
	rec.got = rec.got[:0]
	c2 := smallCluster(t)
	o.Watch(c2)
	runEvents(c2, 70000)
	for _, s := range rec.got {
		if s.share < top {
			t.Errorf("second cluster at %v: share %g went below %g", s.virtual, s.share, top)
		}
	}
	o.End()
}

// Watchers are called on every Watch, in the order they were added, with
// the point (from 0) and label current then, and on End after the last
// cluster was folded.
func TestObserverWatchers(t *testing.T) {
	o := newObserverClock(noProgress{}, nil, &stepWall{})
	var calls []string
	names := map[*cluster.Cluster]string{}
	for _, w := range []string{"a", "b"} {
		o.addWatcher(func(c *cluster.Cluster, point int, label string) {
			calls = append(calls, fmt.Sprintf("%s watch %s point %d %q", w, names[c], point, label))
		}, func() {
			calls = append(calls, fmt.Sprintf("%s end, folded %v", w, o.cur == nil))
		})
	}
	o.addWatcher(nil, func() { calls = append(calls, "c end") })
	watch := func(name string) {
		c := smallCluster(t)
		names[c] = name
		o.Watch(c)
	}
	o.Begin("exp")
	o.Point(0, 2, "x")
	watch("c1")
	o.Point(1, 2, "y, z")
	watch("c2")
	watch("c3")
	o.End()
	want := []string{
		`a watch c1 point 0 "x"`, `b watch c1 point 0 "x"`,
		`a watch c2 point 1 "y, z"`, `b watch c2 point 1 "y, z"`,
		`a watch c3 point 1 "y, z"`, `b watch c3 point 1 "y, z"`,
		"a end, folded true", "b end, folded true", "c end",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	// A removed watcher is called no more; the others still are.
	calls = nil
	remove := o.addWatcher(func(*cluster.Cluster, int, string) { calls = append(calls, "d watch") }, nil)
	remove()
	o.Begin("next")
	watch("c4")
	if slices.Contains(calls, "d watch") || len(calls) != 2 {
		t.Errorf("after remove: calls %q, want a's and b's watch only", calls)
	}
}

// A phase that reports no points but builds several clusters (collateral)
// counts its clusters: a log line per cluster from the second on, and the
// count in its last line.
func TestObserverClustersWithoutPoints(t *testing.T) {
	var out strings.Builder
	o := newObserverClock(&logProgress{w: &out, every: time.Hour}, nil, &stepWall{})
	o.Begin("collateral")
	for range 3 {
		c := smallCluster(t)
		o.Watch(c)
		runEvents(c, 10)
	}
	o.End()
	got := out.String()
	for _, want := range []string{"[collateral] cluster 2 (elapsed", "[collateral] cluster 3 (elapsed", "[collateral] done, 3 clusters, 30 events"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "cluster 1") {
		t.Errorf("a line for the first cluster:\n%s", got)
	}
}

// transferCluster builds a 16-host MRC cluster with Bernoulli loss on
// every link.
func transferCluster(t *testing.T, seed int64, loss float64) *cluster.Cluster {
	t.Helper()
	c := testCluster(t, "fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc", "transport.payload=elided",
		"host.netstack=false", fmt.Sprintf("seed=%d", seed))
	if loss > 0 {
		for _, l := range c.Topo.Links {
			l.Loss = fabric.NewBernoulli(loss, c.Config.Seed, l.Name)
		}
	}
	return c
}

// runTransfer runs a 1 MiB transfer 4 → 0 on c until until (0: until it
// is done) and returns the fabric's accounting then.
func runTransfer(t *testing.T, c *cluster.Cluster, until sim.Time) fabric.Conservation {
	t.Helper()
	tr, _ := clustertest.Transfer(t, c, 4, 0, 1<<20, 256<<10)
	if until > 0 {
		c.Loop.RunUntil(until)
	} else {
		c.Loop.RunWhile(func() bool { return !tr.Done() })
	}
	cons := c.Topo.Conservation()
	if err := cons.Check(); err != nil {
		t.Fatal(err)
	}
	return cons
}

// csvBlock is one cluster's rows of counters.csv, summed per column.
type csvBlock struct {
	point, label, cluster string
	rows                  int
	sum                   map[string]uint64
}

// readCountersCSV reads an observer's counters.csv into its blocks, in
// file order.
func readCountersCSV(t *testing.T, path string) []*csvBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatalf("%s is empty", path)
	}
	head := recs[0]
	if want := "point,label,cluster," + fabric.CountersCSVHeader(); strings.Join(head, ",") != want {
		t.Fatalf("header %q, want %q", strings.Join(head, ","), want)
	}
	var blocks []*csvBlock
	for _, r := range recs[1:] {
		var b *csvBlock
		if n := len(blocks); n > 0 && blocks[n-1].point == r[0] && blocks[n-1].label == r[1] && blocks[n-1].cluster == r[2] {
			b = blocks[n-1]
		} else {
			b = &csvBlock{point: r[0], label: r[1], cluster: r[2], sum: map[string]uint64{}}
			blocks = append(blocks, b)
		}
		b.rows++
		for i := 4; i < len(head); i++ {
			v, err := strconv.ParseUint(r[i], 10, 64)
			if err != nil {
				t.Fatalf("%s %v: %v", head[i], r[:4], err)
			}
			if head[i] == "max_queue_bytes" {
				continue // not a count
			}
			b.sum[head[i]] += v
		}
	}
	return blocks
}

// conservation is a block's fabric accounting, from its column sums.
func (b *csvBlock) conservation() fabric.Conservation {
	c := fabric.Conservation{Sent: b.sum["sent"], Delivered: b.sum["delivered"], BlackHoled: b.sum["black_holed"], Lost: b.sum["link_lost"],
		Corrupted: b.sum["link_corrupted"], LinkDown: b.sum["link_down_drops"], OnLinks: b.sum["link_in_flight"], InQueues: b.sum["queued_frames"]}
	for i, r := range fabric.DropReasonNames {
		c.Dropped[i] = b.sum["drop_"+r]
	}
	return c
}

// counters.csv gets one block per folded cluster — the preflight's as
// point "preflight", then each point's, with the label the experiment gave
// (quoted: it has commas and a quote) and the cluster within the point —
// and each block's column sums are that cluster's fabric accounting
// (Topology.Conservation) read when it was folded, even mid-flight.
func TestObserverCountersCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), countersFile)
	w, err := createCountersCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	o := newObserverClock(noProgress{}, nil, &stepWall{})
	o.setCountersCSV(w)
	var want []fabric.Conservation
	var ports []int
	run := func(seed int64, loss float64, until sim.Time) {
		c := transferCluster(t, seed, loss)
		o.Watch(c)
		want = append(want, runTransfer(t, c, until))
		n := 0
		for _, s := range c.Topo.Switches {
			n += len(s.Ports)
		}
		for _, hp := range c.Topo.HostPorts {
			n += len(hp)
		}
		ports = append(ports, n)
	}
	o.Begin("preflight")
	run(1, 0, 0)
	o.End()
	o.Begin("exp")
	lossy := `MRC, loss 1%, "mid-flight"`
	o.Point(0, 2, lossy)
	run(2, 0.01, 30*sim.Microsecond)
	o.Point(1, 2, "clean")
	run(3, 0, 0)
	run(4, 0, 0)
	o.End()
	o.setCountersCSV(nil)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	blocks := readCountersCSV(t, path)
	keys := [][3]string{{"preflight", "", "1"}, {"1", lossy, "1"}, {"2", "clean", "1"}, {"2", "clean", "2"}}
	if len(blocks) != len(keys) {
		t.Fatalf("%d blocks, want %d", len(blocks), len(keys))
	}
	for i, b := range blocks {
		if [3]string{b.point, b.label, b.cluster} != keys[i] || b.rows != ports[i] {
			t.Errorf("block %d: point %q label %q cluster %q, %d rows; want %q, %d rows", i, b.point, b.label, b.cluster, b.rows, keys[i], ports[i])
		}
		if got := b.conservation(); got != want[i] || got.Sent == 0 {
			t.Errorf("block %d (%s): sums %+v, the fabric said %+v", i, b.label, got, want[i])
		}
	}
	if c := blocks[1].conservation(); c.Lost == 0 || c.OnLinks+c.InQueues == 0 {
		t.Errorf("the lossy point stopped mid-flight: %+v", c)
	}
	if blocks[2].sum["link_lost"] != 0 {
		t.Errorf("the clean point lost %d frames", blocks[2].sum["link_lost"])
	}
	t.Logf("blocks: %d rows each; lossy point: sent %d, lost %d, in flight %d+%d", blocks[0].rows, want[1].Sent, want[1].Lost, want[1].OnLinks, want[1].InQueues)
}

// Each phase (an experiment of `experiment all`) shows its own events, not
// the run's running total.
func TestObserverEventsPerPhase(t *testing.T) {
	ui := newRecordUI()
	o := newObserverClock(ui, nil, &stepWall{})
	var want []uint64
	for _, n := range []int{3000, 5000} {
		o.Begin("exp")
		c := smallCluster(t)
		o.Watch(c)
		runEvents(c, n)
		want = append(want, c.Executed())
		o.End()
	}
	if len(ui.ends) != 2 || ui.ends[0].events != want[0] || ui.ends[1].events != want[1] {
		t.Fatalf("phase ends %+v, want events %v", ui.ends, want)
	}
	if got := o.totalEvents(); got != want[0]+want[1] {
		t.Errorf("run total %d, want %d (metrics count every phase)", got, want[0]+want[1])
	}
}

// Steps of one cluster (a collective's sizes) show as i of n with their
// label and an ETA from the second on, while the cluster's counters stay
// one block filed under the phase, not under a step.
func TestObserverSteps(t *testing.T) {
	ui := newRecordUI()
	o := newObserverClock(ui, nil, &stepWall{})
	path := filepath.Join(t.TempDir(), "counters.csv")
	w, err := createCountersCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	o.setCountersCSV(w)
	o.Begin("collective")
	c := smallCluster(t)
	o.Watch(c)
	for i, size := range []string{"64K", "256K", "1M"} {
		o.Step(i, 3, size)
		runEvents(c, 1000)
	}
	o.End()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ui.points) != 3 {
		t.Fatalf("%d point displays, want 3", len(ui.points))
	}
	for i, s := range ui.points {
		if s.i != i || s.n != 3 || s.label != []string{"64K", "256K", "1M"}[i] || (i > 0) != (s.eta >= 0) {
			t.Errorf("step %d shown as %+v", i, s)
		}
	}
	b, _ := os.ReadFile(path)
	blocks := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
		pt, _, _ := strings.Cut(line, ",")
		blocks[pt]++
	}
	if len(blocks) != 1 || blocks["collective"] == 0 {
		t.Errorf("counters.csv blocks by point %v, want one block under \"collective\"", blocks)
	}
}
