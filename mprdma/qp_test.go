package mprdma

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/vcluster/vcluster/internal/rng"
	"github.com/vcluster/vcluster/verbs"
)

// pathWire is a two-QP wire with paths, for whole-transfer tests of the
// QP: a data packet crosses the path its Tx.DstPath names and arrives with
// Rx.DstPath set, an ACK comes back over the path its Tx.SrcPath names
// with Rx.SrcPath set (docs/addressing.md), each path with its own delay.
// Packets are serialized at rate on the sender's port, dropped with
// probability loss (both directions), or everything on a cut path after
// cutAt. It drives the QPs the way the NIC's engine does.
type pathWire struct {
	t     testing.TB
	q     [2]*QP
	mem   [2]*verbs.Memory
	mr    [2]*verbs.MR
	now   int64
	delay []int64 // per path, one way
	loss  float64
	cut   int // path cut at cutAt (−1: none)
	cutAt int64
	rnd   rng.Fast
	psPer int64 // ps per byte on the wire
	busy  [2]int64
	queue []wirePkt
	order uint64
	comps [2][]verbs.Completion
	buf   []byte
	lost  int
}

type wirePkt struct {
	at    int64
	order uint64
	to    int
	rx    verbs.Rx
}

func newPathWire(t testing.TB, cfg Config, size int, delay []int64) *pathWire {
	w := &pathWire{t: t, delay: delay, cut: -1, rnd: rng.NewFast(7), psPer: 80, buf: make([]byte, verbs.MaxTxBytes)}
	for i := range 2 {
		w.mem[i] = &verbs.Memory{}
		w.mr[i] = w.mem[i].Register(make([]byte, size))
		w.q[i] = New(cfg, w.mem[i], uint32(0x100+i), uint64(i+1))
	}
	for i := range w.mr[0].Buf {
		w.mr[0].Buf[i] = byte(i*131 + i>>9)
	}
	at := func(i int) verbs.QPAttrs {
		return verbs.QPAttrs{Host: i, QPN: uint32(0x100 + i), InitialPSN: uint32(0xFFFF00 + 0x40*i)}
	}
	for i := range 2 {
		if err := w.q[i].Connect(at(i), at(1-i)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *pathWire) post(id uint64, off, n uint64, imm bool) {
	op := verbs.OpWrite
	if imm {
		op = verbs.OpWriteImm
	}
	if err := w.q[0].Post(w.now, verbs.WorkRequest{ID: id, Op: op, LocalKey: w.mr[0].Key, LocalVA: w.mr[0].VA + off,
		Length: n, RemoteKey: w.mr[1].Key, RemoteVA: w.mr[1].VA + off, Imm: uint32(id)}); err != nil {
		w.t.Fatal(err)
	}
	w.pump(0)
}

// pump sends what side i will send, then collects its completions.
func (w *pathWire) pump(i int) {
	for {
		tx, ok := w.q[i].Send(w.now, ^uint32(0), w.buf)
		if !ok {
			break
		}
		path := int(tx.DstPath) - 1
		if i == 1 {
			path = int(tx.SrcPath) - 1
		}
		start := max(w.now, w.busy[i])
		w.busy[i] = start + int64(tx.WireLen)*w.psPer/1000
		d := int64(1000)
		if path >= 0 && path < len(w.delay) {
			d += w.delay[path]
		}
		if w.rnd.Float64() < w.loss || (path == w.cut && w.now >= w.cutAt) {
			w.lost++
			continue
		}
		rx := verbs.Rx{Data: slices.Clone(w.buf[:tx.Len]), WireLen: tx.WireLen, SrcHost: i, EV: tx.EV, DstPath: tx.DstPath, SrcPath: tx.SrcPath}
		w.order++
		p := wirePkt{at: w.busy[i] + d, order: w.order, to: 1 - i, rx: rx}
		k, _ := slices.BinarySearchFunc(w.queue, p, func(a, b wirePkt) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return int(a.order - b.order)
		})
		w.queue = slices.Insert(w.queue, k, p)
	}
	w.comps[i] = w.q[i].PollCompletions(w.comps[i])
}

// run steps until A has n completions (failing after limit ns).
func (w *pathWire) run(n int, limit int64) {
	w.t.Helper()
	for len(w.comps[0]) < n {
		next, ok := int64(0), false
		if len(w.queue) > 0 {
			next, ok = w.queue[0].at, true
		}
		side := -1
		for i := range 2 {
			if at, aok := w.q[i].Deadline(); aok && (!ok || at < next) {
				next, ok, side = at, true, i
			}
		}
		if !ok {
			w.t.Fatalf("idle at %d with %d of %d completions", w.now, len(w.comps[0]), n)
		}
		if next > limit {
			w.t.Fatalf("not done by %d ns: %d of %d completions; A %+v %+v", limit, len(w.comps[0]), n, w.q[0].Stats(), w.q[0].MPStats())
		}
		w.now = max(w.now, next)
		if side >= 0 {
			w.q[side].Tick(w.now)
			w.pump(side)
			continue
		}
		p := w.queue[0]
		w.queue = w.queue[1:]
		w.q[p.to].Receive(w.now, &p.rx)
		w.pump(p.to)
	}
}

// transfer posts 12 WriteImms of mixed sizes filling size bytes and runs
// them to completion, checking bytes and completions.
func (w *pathWire) transfer(size uint64, limit int64) {
	w.t.Helper()
	var offs []uint64
	for off, i := uint64(0), uint64(0); off < size; i++ {
		n := min(size-off, (i%5+1)*size/20+i*37)
		offs = append(offs, off)
		w.post(i+1, off, n, true)
		off += n
	}
	w.run(len(offs), limit)
	for i, c := range w.comps[0] {
		if c.WRID != uint64(i+1) || c.Status != verbs.StatusOK {
			w.t.Fatalf("A completion %d: %+v", i, c)
		}
	}
	w.pump(1)
	if got := len(w.comps[1]); got != len(offs) {
		w.t.Errorf("B completed %d WriteImms, want %d", got, len(offs))
	}
	if !bytes.Equal(w.mr[0].Buf[:size], w.mr[1].Buf[:size]) {
		w.t.Errorf("B's memory differs from A's")
	}
	for i := range 2 {
		if w.q[i].State() != verbs.QPReady {
			w.t.Errorf("QP %d in %v", i, w.q[i].State())
		}
	}
}

func wireConfig(s Scheme) Config {
	c := DefaultConfig()
	c.Scheme, c.Paths, c.PMTU = s, 4, 1024
	c.BDPPackets = 16
	c.RTO = 50_000
	c.BaseRTT = 2000
	return c
}

// Every scheme moves 1 MB byte for byte over 4 paths of different delays
// under 1% loss in both directions, and under a path cut mid-transfer.
func TestQPIntegrityUnderLoss(t *testing.T) {
	for _, s := range []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE} {
		for _, cut := range []bool{false, true} {
			name := fmt.Sprintf("%v/loss", s)
			if cut {
				name = fmt.Sprintf("%v/cut", s)
			}
			t.Run(name, func(t *testing.T) {
				w := newPathWire(t, wireConfig(s), 1<<20, []int64{0, 300, 700, 1500})
				if cut {
					// Path 0, the fastest, carries most packets by then.
					w.cut, w.cutAt = 0, 20_000
				} else {
					w.loss = 0.01
				}
				w.transfer(1<<20, 5e9)
				if w.lost == 0 {
					t.Error("nothing was lost")
				}
				a := w.q[0].Stats()
				if a.Retransmissions == 0 || a.BytesCompleted != 1<<20 {
					t.Errorf("A stats %+v", a)
				}
				t.Logf("%s: %d lost, A %+v, MP %+v, done at %d ns", name, w.lost, a, w.q[0].MPStats(), w.now)
			})
		}
	}
}

// A path much slower than the others falls behind by more than Δ: its
// ACKs stop clocking it, and it carries far fewer packets. (This wire has
// no queues on the paths, so a fast path never slows down and keeps what
// it wins; in a fabric its queue grows until it lags too.)
func TestQPSlowPathLeftByACKClocking(t *testing.T) {
	c := wireConfig(SchemeMPRDMA)
	// No overflow and no reordering taken for loss: only the path choice
	// is measured.
	c.BitmapEntries, c.LossThreshold, c.SlowPathLag = 1024, 500, 4
	w := newPathWire(t, c, 1<<20, []int64{0, 0, 0, 20_000})
	w.transfer(1<<20, 5e9)
	mp := w.q[0].MPStats()
	if mp.SlowPathAcks == 0 {
		t.Error("no ACK judged slow")
	}
	if mp.PathSends[3]*4 > mp.PathSends[0] {
		t.Errorf("slow path 3 carried %d packets, path 0 %d: want far fewer", mp.PathSends[3], mp.PathSends[0])
	}
	// With equal paths nothing is judged slow and the paths share evenly.
	w = newPathWire(t, c, 1<<20, []int64{0, 0, 0, 0})
	w.transfer(1<<20, 5e9)
	mp = w.q[0].MPStats()
	lo, hi := slices.Min(mp.PathSends[:4]), slices.Max(mp.PathSends[:4])
	if mp.SlowPathAcks != 0 || hi > lo*12/10 {
		t.Errorf("equal paths: SlowPathAcks %d, PathSends %v", mp.SlowPathAcks, mp.PathSends[:4])
	}
}

// The QP refuses work and configuration it cannot run.
func TestQPConnectAndPost(t *testing.T) {
	q := New(DefaultConfig(), &verbs.Memory{}, 5, 1)
	if err := q.Post(0, verbs.WorkRequest{}); err != verbs.ErrNotReady {
		t.Errorf("Post in RESET: %v", err)
	}
	if _, ok := q.Send(0, 1, make([]byte, verbs.MaxTxBytes)); ok {
		t.Error("RESET QP sent")
	}
	if err := q.Connect(verbs.QPAttrs{QPN: 6}, verbs.QPAttrs{}); err != ErrQPN {
		t.Errorf("Connect with another QPN: %v", err)
	}
	if err := q.Connect(verbs.QPAttrs{QPN: 5}, verbs.QPAttrs{Host: 1}); err != nil || q.State() != verbs.QPReady {
		t.Fatalf("Connect: %v, %v", err, q.State())
	}
	if err := q.Connect(verbs.QPAttrs{QPN: 5}, verbs.QPAttrs{}); err != ErrState {
		t.Errorf("second Connect: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("New accepted Paths 0")
		}
	}()
	c := DefaultConfig()
	c.Paths = 0
	New(c, &verbs.Memory{}, 1, 1)
}

// Same config and seed, same packets: two runs under loss end at the same
// instant with the same counters.
func TestQPDeterministic(t *testing.T) {
	var ends []string
	for range 2 {
		w := newPathWire(t, wireConfig(SchemeOrderRE), 256<<10, []int64{0, 300, 700, 1500})
		w.loss = 0.02
		w.transfer(256<<10, 5e9)
		ends = append(ends, fmt.Sprintf("%d %+v %+v", w.now, w.q[0].Stats(), w.q[0].MPStats()))
	}
	if ends[0] != ends[1] {
		t.Errorf("two runs differ:\n%s\n%s", ends[0], ends[1])
	}
}
