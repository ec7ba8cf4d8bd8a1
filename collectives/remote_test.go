package collectives

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// pairConnector stands in for a lab's exchange: it makes each pair's
// ends once, both sides with NewEnd, connects each to the other's Attrs
// only (as two processes would after swapping them), and hands each side
// its own.
type pairConnector struct {
	c     *cluster.Cluster
	made  map[[2]int]map[int][]cluster.QPEnd
	calls []string
}

func newPairConnector(c *cluster.Cluster) *pairConnector {
	return &pairConnector{c: c, made: map[[2]int]map[int][]cluster.QPEnd{}}
}

func (pc *pairConnector) Connect(local, remote, n int) ([]cluster.QPEnd, error) {
	pc.calls = append(pc.calls, fmt.Sprintf("%d→%d", local, remote))
	k := [2]int{min(local, remote), max(local, remote)}
	if ends, ok := pc.made[k]; ok {
		return ends[local], nil
	}
	ends := map[int][]cluster.QPEnd{}
	for i := range n {
		a, err := pc.c.NewEnd(local, remote, i)
		if err != nil {
			return nil, err
		}
		b, err := pc.c.NewEnd(remote, local, i)
		if err != nil {
			return nil, err
		}
		if err := pc.c.ConnectEnd(a, b.Attrs()); err != nil {
			return nil, err
		}
		if err := pc.c.ConnectEnd(b, a.Attrs()); err != nil {
			return nil, err
		}
		ends[local] = append(ends[local], a)
		ends[remote] = append(ends[remote], b)
	}
	pc.made[k] = ends
	return ends[local], nil
}

// split is one collective run as one "process" per rank on one
// simulated cluster: a Comm per rank with only that rank's host local.
// Index i of comms and ps is comm rank i.
type split struct {
	c     *cluster.Cluster
	conn  *pairConnector
	comms []*Comm
	ps    []*Prepared
	all   map[int]RankBuffers // every rank's buffers, as the exchange gives them
}

// newSplit runs ranks on the first n hosts (rank i on host i).
func newSplit(t *testing.T, c *cluster.Cluster, n int, a *Algorithm, size uint64, o RunOptions) *split {
	t.Helper()
	return newSplitOn(t, c, firstHosts(n), a, size, o)
}

// newSplitOn runs rank i on hosts[i].
func newSplitOn(t *testing.T, c *cluster.Cluster, hosts []int, a *Algorithm, size uint64, o RunOptions) *split {
	t.Helper()
	s := &split{c: c, conn: newPairConnector(c), all: map[int]RankBuffers{}}
	for _, h := range hosts {
		s.comms = append(s.comms, newComm(t, c, Options{Hosts: hosts, Local: []int{h}, Connector: s.conn}))
	}
	for i, m := range s.comms {
		h := hosts[i]
		p, err := m.Prepare(a, size, o)
		if err != nil {
			t.Fatalf("host %d: Prepare: %v", h, err)
		}
		if r, ok := p.Rank(h); !ok || r != i {
			t.Fatalf("host %d: Rank = %d, %v; want %d", h, r, ok, i)
		}
		loc := p.Local()
		if _, ok := loc[i]; !ok || len(loc) != 1 {
			t.Fatalf("host %d: Local has ranks %v, want its own rank %d only", h, loc, i)
		}
		for r, b := range loc {
			s.all[r] = b
		}
		s.ps = append(s.ps, p)
	}
	return s
}

// iterate starts one iteration on every process at once and runs the
// loop until every done fired; it returns each process's error, by rank.
func (s *split) iterate(t *testing.T, deadline sim.Time) []error {
	t.Helper()
	errs := make([]error, len(s.ps))
	fired := make([]int, len(s.ps))
	left := len(s.ps)
	for h, p := range s.ps {
		if err := p.Start(s.all, deadline, func(err error) {
			fired[h]++
			errs[h] = err
			left--
		}); err != nil {
			t.Fatalf("rank %d: Start: %v", h, err)
		}
		if !p.Running() {
			t.Fatalf("rank %d: not running after Start", h)
		}
	}
	s.c.Loop.RunWhile(func() bool { return left > 0 })
	for h, n := range fired {
		if n != 1 {
			t.Fatalf("rank %d: done called %d times, want once", h, n)
		}
		if s.ps[h].Running() {
			t.Errorf("rank %d: still running after its done", h)
		}
	}
	return errs
}

// Four processes, each running one rank, give the same checked results as
// one Comm running all four, and a second iteration works.
func TestSplitCommMatchesRun(t *testing.T) {
	for _, tc := range []struct {
		transport, algo string
		size            uint64
		slower, faster  float64 // how much slower, and faster, than in-process it may be (fractions)
	}{
		{"mrc", "allreduce/ring", 4 << 20, 0.01, 0.01}, {"mrc", "alltoall/pairwise", 4 << 20, 0.01, 0.01},
		{"mrc", "allgather/ring", 4 << 20, 0.01, 0.01}, {"mrc", "alltoall/direct", 1 << 20, 0.01, 0.01},
		// RoCE QPs of a split Comm take cluster.RemotePlane's planes, not
		// Connect's round robin: on 4 hosts and 4 planes every host's
		// QPs get planes of their own, where the round robin puts two of
		// host 1's and two of host 2's on plane 0: the split all-to-all
		// is faster.
		{"roce", "allreduce/ring", 4 << 20, 0.05, 0.05}, {"roce", "alltoall/direct", 1 << 20, 0.05, 1},
	} {
		t.Run(tc.transport+"-"+strings.ReplaceAll(tc.algo, "/", "-"), func(t *testing.T) {
			a := mustLookup(t, tc.algo)
			ref, err := newComm(t, newCluster(t, tc.transport, 4), Options{}).Run(a, tc.size, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ref.Check != CheckOK {
				t.Fatalf("in-process run: check %s", ref.Check)
			}
			c := newCluster(t, tc.transport, 4)
			s := newSplit(t, c, 4, a, tc.size, RunOptions{})
			var first []sim.Time
			for it := range 2 {
				t0 := c.Now()
				for h, err := range s.iterate(t, 0) {
					if err != nil {
						t.Fatalf("iteration %d, host %d: %v", it+1, h, err)
					}
				}
				var slowest sim.Time
				for h, p := range s.ps {
					r := p.Result()
					if r.Check != CheckOK || r.Wrong != 0 || r.Iters != it+1 || r.Ranks != 4 || r.Bytes != ref.Bytes || r.Count != ref.Count {
						t.Fatalf("iteration %d, host %d: %+v (in-process %+v)", it+1, h, r, ref)
					}
					if it == 0 {
						first = append(first, r.TimeNs)
						if r.Start != t0 {
							t.Errorf("host %d: timed from %v, the iteration started at %v", h, r.Start, t0)
						}
					}
					slowest = max(slowest, r.TimeNs)
				}
				if it == 0 {
					d := float64(slowest-ref.TimeNs) / float64(ref.TimeNs)
					t.Logf("%s %d B: slowest process %v, in-process Run %v (%+.2f%%); per process %v", tc.algo, ref.Bytes, slowest, ref.TimeNs, 100*d, first)
					if d > tc.slower || -d > tc.faster {
						t.Errorf("split time %v vs in-process %v: %+.1f%%, want within -%.0f%%..+%.0f%%", slowest, ref.TimeNs, 100*d, 100*tc.faster, 100*tc.slower)
					}
				}
			}
			// Every process asked for its connections only, each pair once
			// per side.
			seen := map[string]bool{}
			for _, call := range s.conn.calls {
				if seen[call] {
					t.Errorf("Connector asked for %s twice", call)
				}
				seen[call] = true
			}
		})
	}
}

// A rank whose peers are all elsewhere writes into their buffers by
// descriptor: its own results are the ones an in-process Run checks, and
// the inputs are the same (one process corrupting a peer's output shows
// on that peer only).
func TestSplitCommChecksLocalRanksOnly(t *testing.T) {
	c := newCluster(t, "mrc", 4)
	s := newSplit(t, c, 4, mustLookup(t, "allgather/ring"), 1<<20, RunOptions{})
	for h, err := range s.iterate(t, 0) {
		if err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
	}
	recv := s.comms[2].Buffer(2, Recv).Buf
	recv[0] ^= 0x40 // one wrong element on host 2's rank
	for h, p := range s.ps {
		r := p.Result()
		want := int64(0)
		if h == 2 {
			want = 1
		}
		if r.Wrong != want {
			t.Errorf("host %d: %d wrong elements, want %d (%s)", h, r.Wrong, want, r.Check)
		}
	}
}

// Ranks on hosts in any order (rank i on Hosts[i], as a lab's peer list
// gives them): each process finds its rank by its host, connects by
// hosts, and the results check out.
func TestSplitCommRanksOnChosenHosts(t *testing.T) {
	c := newCluster(t, "mrc", 8)
	hosts := []int{6, 1, 5}
	s := newSplitOn(t, c, hosts, mustLookup(t, "allreduce/ring"), 1<<20, RunOptions{Warmup: 1})
	for it := range 2 {
		for r, err := range s.iterate(t, 0) {
			if err != nil {
				t.Fatalf("iteration %d, rank %d: %v", it+1, r, err)
			}
		}
	}
	for r, p := range s.ps {
		if res := p.Result(); res.Check != CheckOK || res.Wrong != 0 || res.Iters != 1 || res.Ranks != 3 {
			t.Errorf("rank %d on host %d: %+v", r, hosts[r], res)
		}
		if _, ok := p.Rank(0); ok {
			t.Errorf("rank %d: Rank(0) found a rank on a host outside the communicator", r)
		}
	}
	for _, call := range s.conn.calls {
		var a, b int
		fmt.Sscanf(call, "%d→%d", &a, &b)
		if !slices.Contains(hosts, a) || !slices.Contains(hosts, b) {
			t.Errorf("Connector asked for %s: a host outside %v", call, hosts)
		}
	}
}

// One host's links die mid-iteration: every other process's done reports
// an error blaming that host, before the deadline — the QP error of a
// write to it (its retry limit), or, with a deadline shorter than that,
// the deadline naming it as the peer a Wait waits for.
func TestSplitCommBlamesDeadHost(t *testing.T) {
	const dead = 2
	const cut = 20 * sim.Microsecond
	for _, tc := range []struct {
		name       string
		deadline   sim.Time
		byDeadline bool   // the error is the deadline's (else a QP's)
		sets       string // the deadline case: an RTO that makes the retry limit come after it
	}{{"qp-error", 500 * sim.Millisecond, false, "transport.payload=elided"},
		{"deadline", 2 * sim.Millisecond, true, "transport.mrc.rto=10ms"}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, "mrc", 4, "transport.payload=elided", tc.sets)
			s := newSplit(t, c, 4, mustLookup(t, "alltoall/direct"), 16<<20, RunOptions{})
			c.Loop.At(cut, func() {
				for _, p := range c.Topo.HostPorts[dead] {
					p.Tx.SetUp(false)
					p.Peer.Tx.SetUp(false)
				}
			})
			errs := s.iterate(t, tc.deadline)
			if c.Now() > tc.deadline {
				t.Errorf("the last done came at %v, after the deadline %v", c.Now(), tc.deadline)
			}
			for h, err := range errs {
				if h == dead {
					t.Logf("dead host %d: %v", h, err)
					continue
				}
				if err == nil {
					t.Fatalf("host %d: no error with host %d cut off", h, dead)
				}
				t.Logf("host %d (done by %v): %v", h, c.Now(), err)
				if b, ok := BlamedHost(err); !ok || b != dead {
					t.Errorf("host %d: blames host %d (%v), want %d: %v", h, b, ok, dead, err)
				}
				var pe *PeerError
				if !errors.As(err, &pe) || pe.Host != h || pe.Rank != h || pe.PeerRank != dead {
					t.Errorf("host %d: PeerError %+v, want rank %d on host %d blaming rank %d", h, pe, h, h, dead)
				}
				var de *DeadlineError
				if got := errors.As(err, &de); got != tc.byDeadline {
					t.Errorf("host %d: a DeadlineError in the chain: %v, want %v", h, got, tc.byDeadline)
				}
				if r := s.ps[h].Result(); r.Iters != 0 || r.Check != CheckSkipped && r.Check != CheckPending {
					t.Errorf("host %d: after the failure Result is %+v", h, r)
				}
			}
		})
	}
}

// Every invalid setting or call is refused, naming what is wrong.
func TestSplitCommRefuses(t *testing.T) {
	c := newCluster(t, "mrc", 4)
	conn := newPairConnector(c)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Local: []int{}, Connector: conn}, "Options.Local is empty"},
		{Options{Local: []int{7}, Connector: conn}, "Local[0]: host 7 has no rank"},
		{Options{Local: []int{1, 1}, Connector: conn}, "Local[1]: host 1 listed twice"},
		{Options{Local: []int{1}}, "Options.Connector is required"},
		{Options{Connector: conn}, "Connector is set without Options.Local"},
		{Options{Hosts: []int{0, 1}, Local: []int{2}, Connector: conn}, "host 2 has no rank"},
	} {
		if _, err := New(c, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error saying %q", tc.o, err, tc.want)
		}
	}
	a := mustLookup(t, "allreduce/ring")
	m := newComm(t, c, Options{Local: []int{0}, Connector: conn})
	if _, err := m.Run(a, 1<<20, RunOptions{}); err == nil || !strings.Contains(err.Error(), "use Prepare and Start") {
		t.Errorf("Run of a split Comm: %v", err)
	}
	if _, err := m.Prepare(a, 1<<20, RunOptions{Root: 4}); err == nil || !strings.Contains(err.Error(), "root 4 outside 0..3") {
		t.Errorf("Prepare with root 4: %v", err)
	}
	p, err := m.Prepare(a, 1<<20, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full := map[int]RankBuffers{}
	for r := 1; r < 4; r++ {
		var rb RankBuffers
		for b := range rb {
			rb[b] = BufferInfo{VA: 1 << 20, Key: 1, Len: p.Need()[b]}
		}
		full[r] = rb
	}
	nop := func(error) {}
	missing := map[int]RankBuffers{1: full[1], 2: full[2]}
	small := map[int]RankBuffers{1: full[1], 2: full[2], 3: full[3]}
	small[3] = RankBuffers{full[3][0], {VA: 1, Key: 2, Len: p.Need()[Recv] - 4}, full[3][2]}
	nokey := map[int]RankBuffers{1: full[1], 2: full[2], 3: {full[3][0], full[3][1], {VA: 1, Len: 4}}}
	for _, tc := range []struct {
		remote   map[int]RankBuffers
		deadline sim.Time
		done     func(error)
		want     string
	}{
		{missing, 0, nop, "no buffers given for remote rank 3 (host 3)"},
		{small, 0, nop, fmt.Sprintf("remote rank 3 (host 3): recv buffer of %d bytes, want ≥ %d", p.Need()[Recv]-4, p.Need()[Recv])},
		{nokey, 0, nop, "remote rank 3 (host 3): scratch buffer with key 0"},
		{full, 0, nil, "needs a done callback"},
	} {
		if err := p.Start(tc.remote, tc.deadline, tc.done); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start: %v, want an error saying %q", err, tc.want)
		}
		if p.Running() {
			t.Fatal("a refused Start left the collective running")
		}
	}
	c.Loop.RunUntil(sim.Millisecond)
	var de *DeadlineError
	if err := p.Start(full, sim.Millisecond, nop); !errors.As(err, &de) || !de.NotStarted {
		t.Errorf("Start with a deadline already passed: %v, want a DeadlineError (not started)", err)
	}
	if err := p.Start(full, 0, nop); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(full, 0, nop); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("a second Start while running: %v", err)
	}
	if _, err := m.Prepare(a, 1<<20, RunOptions{}); err == nil || !strings.Contains(err.Error(), "while an iteration") {
		t.Errorf("Prepare while running: %v", err)
	}
	if r := p.Result(); r.Check != CheckPending || r.Wrong != -1 {
		t.Errorf("Result while running: %+v", r)
	}
}

// stepWall is a wall clock for real-time pacing that reads no real clock:
// every reading moves it on by step (so the loop's WallTime runs ahead of
// its idle Now, as a real one does), a sleep to a deadline jumps to it,
// and a sleep with no deadline waits for the loop's wake-up (Inject).
type stepWall struct {
	mu   sync.Mutex
	now  int64
	step int64
}

func (w *stepWall) Now() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now += w.step
	return w.now
}

func (w *stepWall) SleepUntil(deadline int64, wake <-chan struct{}) {
	if deadline == math.MaxInt64 {
		<-wake
		return
	}
	w.mu.Lock()
	w.now = max(w.now, deadline)
	w.mu.Unlock()
}

// In real-time pacing, as a lab host runs it: the first iteration is
// started between RunWhile calls, the second by an injection from another
// goroutine while RunWhile waits; each launches at the loop's WallTime
// (ahead of its idle Now), and both check out.
func TestSplitCommRealtime(t *testing.T) {
	cfg, err := config.Load("", []string{"fabric.preset=C", "fabric.hosts=4", "transport.kind=mrc", "run.pacing=realtime"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(cfg, &stepWall{step: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := newSplit(t, c, 4, mustLookup(t, "allreduce/ring"), 1<<20, RunOptions{})
	var left atomic.Int32
	errs := make([]error, 4)
	start := func(h int) error {
		return s.ps[h].Start(s.all, 0, func(err error) { errs[h] = err; left.Add(-1) })
	}
	idle := c.Loop.Now()
	wt := c.Loop.WallTime()
	if wt <= idle {
		t.Fatalf("WallTime %v not ahead of the idle loop's Now %v: the test's clock does not exercise the sync", wt, idle)
	}
	left.Store(4)
	for h := range 4 {
		if err := start(h); err != nil {
			t.Fatal(err)
		}
	}
	c.Loop.RunWhile(func() bool { return left.Load() > 0 })
	for h := range 4 {
		if errs[h] != nil {
			t.Fatalf("host %d: %v", h, errs[h])
		}
		if r := s.ps[h].Result(); r.Start < wt || r.Check != CheckOK || r.TimeNs <= 0 {
			t.Fatalf("host %d: %+v; want a checked iteration launched at or after WallTime %v", h, r, wt)
		}
	}
	// The second iteration, injected from elsewhere while the loop waits.
	left.Store(4)
	startErr := make(chan error, 4)
	go c.Loop.Inject(func() {
		for h := range 4 {
			startErr <- start(h)
		}
	})
	c.Loop.RunWhile(func() bool { return left.Load() > 0 })
	for h := range 4 {
		if err := <-startErr; err != nil {
			t.Fatalf("host %d: Start: %v", h, err)
		}
		r := s.ps[h].Result()
		if errs[h] != nil || r.Iters != 2 || r.Check != CheckOK || r.Wrong != 0 {
			t.Fatalf("host %d: second iteration: %v, %+v", h, errs[h], r)
		}
	}
}

// Whatever descriptors a peer publishes (the lab exchange decodes them
// from JSON), Start refuses them or the iteration ends — with an error
// naming a peer, or by the deadline — and done is called once: never a
// panic, never a write outside the registered buffers counted as data.
func FuzzSplitStartDescriptors(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint64(0), uint32(1), uint64(1<<20))
	f.Add(uint8(2), uint8(0), uint64(1<<40), uint32(3), uint64(1<<30))
	f.Add(uint8(3), uint8(2), ^uint64(0)-8, uint32(2), uint64(64))
	f.Add(uint8(1), uint8(1), uint64(4096), uint32(99), uint64(1<<21))
	f.Add(uint8(2), uint8(1), uint64(0), uint32(0), uint64(0))
	f.Add(uint8(0), uint8(1), uint64(1<<20), uint32(77), uint64(1<<20)) // a key not registered there
	f.Add(uint8(0), uint8(1), uint64(1<<40), uint32(2), uint64(1<<20))  // an address outside the region
	f.Add(uint8(7), uint8(0), uint64(0), uint32(1), uint64(4))          // rank 3's send buffer too small
	f.Fuzz(func(t *testing.T, rank, buf uint8, va uint64, key uint32, n uint64) {
		c := newCluster(t, "mrc", 4, "transport.mrc.rto=100us")
		s := newSplit(t, c, 4, mustLookup(t, "allgather/ring"), 256<<10, RunOptions{})
		mine := map[int]RankBuffers{}
		for r, b := range s.all {
			mine[r] = b
		}
		// Rank 1 is the one host 0 writes to (ring all-gather), into its
		// recv buffer; the others' descriptors only need to be long enough.
		r := 1
		if rank%4 == 3 {
			r = 2 + int(rank/4)%2
		}
		b := mine[r]
		b[int(buf)%len(b)] = BufferInfo{VA: va, Key: key, Len: n}
		mine[r] = b
		fired := make([]int, 4)
		errs := make([]error, 4)
		left := 4
		deadline := c.Now() + 5*sim.Millisecond
		for h, p := range s.ps {
			bufs := s.all
			if h == 0 {
				bufs = mine
			}
			if err := p.Start(bufs, deadline, func(err error) { fired[h]++; errs[h] = err; left-- }); err != nil {
				if h != 0 {
					t.Fatalf("host %d refused the true descriptors: %v", h, err)
				}
				left--
				fired[h]++ // refused: no done to wait for
				if p.Running() {
					t.Fatal("refused, yet running")
				}
			}
		}
		c.Loop.RunWhile(func() bool { return left > 0 })
		for h, k := range fired {
			if k != 1 {
				t.Fatalf("host %d: done %d times", h, k)
			}
			if errs[h] != nil {
				if _, ok := BlamedHost(errs[h]); !ok && !strings.Contains(errs[h].Error(), "deadline") {
					t.Errorf("host %d: error blames nobody: %v", h, errs[h])
				}
			}
		}
		if c.Now() > deadline {
			t.Errorf("ended at %v, after the deadline %v", c.Now(), deadline)
		}
	})
}

// ExchangeConnector, as a lab host uses it: host 0 makes its ends and
// swaps attributes through an exchange; the peers' processes (here the
// exchange itself, then their own Comms) make theirs the same way. The
// collective runs and checks out on RoCE, whose two ends must agree on
// each QP's plane, with two QPs per connection.
func TestExchangeConnector(t *testing.T) {
	c := newCluster(t, "roce", 4, "transport.qpsPerConnection=2")
	peers := newPairConnector(c) // the other processes' side
	var swaps []string
	x := func(local, remote int, mine []verbs.QPAttrs) ([]verbs.QPAttrs, error) {
		swaps = append(swaps, fmt.Sprintf("%d→%d", local, remote))
		var theirs []verbs.QPAttrs
		var ends []cluster.QPEnd
		for i, a := range mine {
			if a.Host != local {
				t.Errorf("published QP %d as host %d's, want %d", i, a.Host, local)
			}
			e, err := c.NewEnd(remote, local, i)
			if err != nil {
				return nil, err
			}
			if err := c.ConnectEnd(e, a); err != nil {
				return nil, err
			}
			ends = append(ends, e)
			theirs = append(theirs, e.Attrs())
		}
		peers.made[[2]int{min(local, remote), max(local, remote)}] = map[int][]cluster.QPEnd{remote: ends}
		return theirs, nil
	}
	a := mustLookup(t, "alltoall/direct")
	s := &split{c: c, conn: peers, all: map[int]RankBuffers{}}
	for h := range 4 {
		var conn Connector = peers
		if h == 0 {
			conn = ExchangeConnector(c, x)
		}
		m := newComm(t, c, Options{Local: []int{h}, Connector: conn})
		p, err := m.Prepare(a, 1<<20, RunOptions{})
		if err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
		for r, b := range p.Local() {
			s.all[r] = b
		}
		s.comms, s.ps = append(s.comms, m), append(s.ps, p)
	}
	if want := []string{"0→1", "0→2", "0→3"}; !slices.Equal(swaps, want) {
		t.Errorf("exchanges %v, want %v (in pair order)", swaps, want)
	}
	for h, err := range s.iterate(t, 0) {
		if err != nil {
			t.Fatalf("host %d: %v", h, err)
		}
		if r := s.ps[h].Result(); r.Check != CheckOK || r.Wrong != 0 {
			t.Errorf("host %d: %+v", h, r)
		}
	}
	// A peer that publishes the wrong number of QPs, or another host's.
	for _, tc := range []struct {
		x    Exchange
		want string
	}{
		{func(_, _ int, mine []verbs.QPAttrs) ([]verbs.QPAttrs, error) { return mine[:1], nil }, "published 1 QP(s) for the connection, want 2"},
		{func(_, _ int, mine []verbs.QPAttrs) ([]verbs.QPAttrs, error) { return mine, nil }, "published QP 0 as host 0's"},
		{func(_, _ int, _ []verbs.QPAttrs) ([]verbs.QPAttrs, error) { return nil, errors.New("peer gone") }, "exchanging QPs with host 1: peer gone"},
	} {
		m := newComm(t, c, Options{Local: []int{0}, Connector: ExchangeConnector(c, tc.x)})
		if _, err := m.Prepare(a, 1<<20, RunOptions{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Prepare: %v, want an error saying %q", err, tc.want)
		}
	}
}

// A Comm with every rank local runs through Prepare and Start as well:
// iterations chained from done (warmup first) time and check as Run's.
func TestPreparedAllLocalChained(t *testing.T) {
	a := mustLookup(t, "allreduce/ring")
	o := RunOptions{Warmup: 1, Iters: 2}
	ref, err := newComm(t, newCluster(t, "mrc", 8), Options{Hosts: firstHosts(4)}).Run(a, 2<<20, o)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "mrc", 8)
	m := newComm(t, c, Options{Hosts: firstHosts(4)})
	p, err := m.Prepare(a, 2<<20, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Local()) != 4 {
		t.Fatalf("Local has %d ranks, want all 4", len(p.Local()))
	}
	var errs []error
	var done func(error)
	done = func(err error) {
		errs = append(errs, err)
		if err == nil && len(errs) < o.Warmup+o.Iters {
			if err := p.Start(nil, 0, done); err != nil {
				t.Errorf("Start from done: %v", err)
			}
		}
	}
	if err := p.Start(nil, 0, done); err != nil {
		t.Fatal(err)
	}
	c.Loop.Run()
	if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("iterations ended with %v, want 3 without errors", errs)
	}
	r := p.Result()
	if r.Iters != 2 || r.Check != CheckOK || r.Wrong != 0 || r.TimeNs != ref.TimeNs || r.Start != ref.Start {
		t.Errorf("Prepared: %+v\nRun:      %+v", r, ref)
	}
}
