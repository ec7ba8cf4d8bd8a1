package verbstest

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// End is one side of a Pair: a QP, its host's memory and the completions
// the harness collected from it.
type End struct {
	Q     verbs.Transport
	Mem   *verbs.Memory
	MR    *verbs.MR // the region Config.Size registered (nil when 0)
	Attrs verbs.QPAttrs
	// Comps are the completions collected so far, in PollCompletions order.
	Comps []verbs.Completion

	side        int
	deadline    int64
	hasDeadline bool
	lastTick    int64
	ticked      bool
	posted      []uint64 // IDs posted through Pair.Post and not completed
	// StaleDeadlines counts deadlines at or before the QP's last Tick,
	// which the engine ignores (and so does the harness).
	StaleDeadlines int
}

// Fill fills e's region with bytes drawn from a PCG seeded (seed, seed).
func (e *End) Fill(seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range e.MR.Buf {
		e.MR.Buf[i] = byte(r.Uint32())
	}
}

// Pair is two connected QPs and the wire between them, driven the way the
// NIC's RDMA engine drives a transport (verbs.Transport's contract) on a
// virtual clock the Pair owns. Hooks (Drop, Delay, …) decide what the wire
// does with each packet.
type Pair struct {
	T    testing.TB
	A, B *End
	// Now is the virtual time in ns. Tests may move it forward between
	// steps; it never goes back.
	Now int64
	// FreePlanes is passed to Send: bits 0..Planes-1 by default.
	FreePlanes uint32
	// ReorderHold bounds how long Reorder holds a packet that no other
	// packet follows (default 10 × latency).
	ReorderHold int64
	// OnSend, when set, sees every packet sent, before the hooks.
	OnSend func(*Packet)
	// OnCompletion, when set, sees every completion as it is collected.
	OnCompletion func(e *End, c verbs.Completion)
	// Wire counts packets per direction (index AtoB, BtoA).
	Wire [2]WireStats

	tr       Transport
	latency  int64
	hooks    []hook
	inFlight []flight
	order    uint64
	buf      []byte
	rx       verbs.Rx
	seen     [2]map[uint32]psnSeen
	dataSeq  [2]int
	comps    []verbs.Completion
}

// NewPair returns two QPs of tr connected to each other, A on host 0 and
// B on host 1, at time 0 with an empty wire.
func NewPair(t testing.TB, tr Transport, cfg Config) *Pair {
	t.Helper()
	if tr.New == nil || tr.IsData == nil {
		t.Fatal("verbstest: Transport needs New and IsData")
	}
	qpn := [2]uint32{0x000111, 0x000222}
	seed := [2]uint64{1, 2}
	for i := range 2 {
		if cfg.QPN[i] != 0 {
			qpn[i] = cfg.QPN[i]
		}
		if cfg.Seed[i] != 0 {
			seed[i] = cfg.Seed[i]
		}
	}
	p := newPair(t, tr, cfg.Latency)
	mk := func(side int) *End {
		e := &End{side: side, Mem: &verbs.Memory{}}
		if cfg.Size > 0 {
			e.MR = e.Mem.Register(make([]byte, cfg.Size))
		}
		e.Q = tr.New(e.Mem, qpn[side], seed[side])
		e.Attrs = verbs.QPAttrs{Host: side, QPN: qpn[side], InitialPSN: cfg.InitialPSN[side] & 0xFFFFFF}
		return e
	}
	p.A, p.B = mk(0), mk(1)
	if err := p.A.Q.Connect(p.A.Attrs, p.B.Attrs); err != nil {
		t.Fatalf("%s: connect A: %v", tr.Name, err)
	}
	if err := p.B.Q.Connect(p.B.Attrs, p.A.Attrs); err != nil {
		t.Fatalf("%s: connect B: %v", tr.Name, err)
	}
	if p.A.Q.State() != verbs.QPReady || p.B.Q.State() != verbs.QPReady {
		t.Fatalf("%s: after Connect states %v, %v, want READY", tr.Name, p.A.Q.State(), p.B.Q.State())
	}
	return p
}

// Attach builds a Pair around two QPs the test made and connected itself
// (a.Q to b.Q; Attrs as each was connected with), with an empty wire at
// time 0.
func Attach(t testing.TB, tr Transport, a, b *End, latency int64) *Pair {
	t.Helper()
	p := newPair(t, tr, latency)
	a.side, b.side = 0, 1
	p.A, p.B = a, b
	return p
}

func newPair(t testing.TB, tr Transport, latency int64) *Pair {
	p := &Pair{T: t, tr: tr, latency: latency, buf: make([]byte, verbs.MaxTxBytes)}
	if p.latency <= 0 {
		p.latency = 1000
	}
	p.ReorderHold = 10 * p.latency
	planes := max(tr.Planes, 1)
	p.FreePlanes = uint32(1)<<planes - 1
	p.seen = [2]map[uint32]psnSeen{{}, {}}
	return p
}

// Transport returns the adapter the pair was built from.
func (p *Pair) Transport() Transport { return p.tr }

func (p *Pair) end(side int) *End {
	if side == 0 {
		return p.A
	}
	return p.B
}

func (p *Pair) peer(e *End) *End { return p.end(1 - e.side) }

// Post posts wr on e at Now and lets e send, as the engine does.
func (p *Pair) Post(e *End, wr verbs.WorkRequest) error {
	if err := e.Q.Post(p.Now, wr); err != nil {
		return err
	}
	e.posted = append(e.posted, wr.ID)
	p.pump(e)
	return nil
}

// Write posts an op (OpWrite or OpWriteImm) of n bytes from offset off of
// A's region to the same offset of B's, failing the test on an error.
func (p *Pair) Write(id uint64, op verbs.Opcode, off, n uint64, imm uint32) {
	p.T.Helper()
	a, b := p.A, p.B
	err := p.Post(a, verbs.WorkRequest{ID: id, Op: op, LocalKey: a.MR.Key, LocalVA: a.MR.VA + off, Length: n,
		RemoteKey: b.MR.Key, RemoteVA: b.MR.VA + off, Imm: imm})
	if err != nil {
		p.T.Fatalf("%s: post WR %d: %v", p.tr.Name, id, err)
	}
}

// Pump runs on e what the engine runs after a Post, Receive or Tick: for
// tests that call e.Q directly and then hand the pair back to the
// harness.
func (p *Pair) Pump(e *End) {
	p.T.Helper()
	p.pump(e)
}

// pump follows the engine after a Post, Receive or Tick on e: Send until it
// reports nothing, then read Deadline, then drain PollCompletions.
func (p *Pair) pump(e *End) {
	t := p.T
	t.Helper()
	peer := p.peer(e)
	for n := 0; ; n++ {
		if n > 1<<20 {
			t.Fatalf("%s: Send keeps returning packets at t=%d", p.tr.Name, p.Now)
		}
		tx, ok := e.Q.Send(p.Now, p.FreePlanes, p.buf)
		if !ok {
			break
		}
		switch {
		case tx.Len <= 0 || tx.Len > len(p.buf):
			t.Fatalf("%s: Send returned Len %d (buffer %d)", p.tr.Name, tx.Len, len(p.buf))
		case tx.WireLen < tx.Len:
			t.Fatalf("%s: Send returned WireLen %d < Len %d", p.tr.Name, tx.WireLen, tx.Len)
		case tx.DstHost != peer.Attrs.Host:
			t.Fatalf("%s: packet to host %d, peer is host %d", p.tr.Name, tx.DstHost, peer.Attrs.Host)
		}
		if qpn, ok := verbs.DestQP(p.buf[:tx.Len]); !ok || qpn != peer.Attrs.QPN {
			t.Fatalf("%s: packet to QP %#x, peer is %#x", p.tr.Name, qpn, peer.Attrs.QPN)
		}
		p.transmit(e.side, tx, p.buf)
	}
	e.deadline, e.hasDeadline = e.Q.Deadline()
	if e.hasDeadline && e.ticked && e.deadline <= e.lastTick {
		e.StaleDeadlines++
		e.hasDeadline = false
	}
	p.collect(e)
}

func (p *Pair) collect(e *End) {
	p.comps = e.Q.PollCompletions(p.comps[:0])
	for _, c := range p.comps {
		if c.QPN != e.Attrs.QPN {
			p.T.Errorf("%s: completion %+v carries QPN %#x, want %#x", p.tr.Name, c, c.QPN, e.Attrs.QPN)
		}
		if c.Op != verbs.OpRecvImm {
			if i := indexOf(e.posted, c.WRID); i >= 0 {
				e.posted = append(e.posted[:i], e.posted[i+1:]...)
			}
		}
		e.Comps = append(e.Comps, c)
		if p.OnCompletion != nil {
			p.OnCompletion(e, c)
		}
	}
}

func indexOf(s []uint64, v uint64) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// Outstanding returns how many work requests posted on e through Post have
// not completed.
func (e *End) Outstanding() int { return len(e.posted) }

// InFlight returns how many packets are on the wire.
func (p *Pair) InFlight() int { return len(p.inFlight) }

// next returns the time of the next event and whether there is one.
func (p *Pair) next() (int64, bool) {
	at, ok := int64(0), false
	if len(p.inFlight) > 0 {
		at, ok = p.inFlight[0].at, true
	}
	for _, e := range [2]*End{p.A, p.B} {
		if e.hasDeadline && (!ok || max(e.deadline, p.Now) < at) {
			at, ok = max(e.deadline, p.Now), true
		}
	}
	return at, ok
}

// Idle reports whether no packet is on the wire and neither QP has a timer
// armed.
func (p *Pair) Idle() bool { return len(p.inFlight) == 0 && !p.A.hasDeadline && !p.B.hasDeadline }

// Step runs the next event — a packet's arrival, or a QP's timer — moving
// Now to its time; it reports false, doing nothing, when the pair is idle.
// Arrivals go before timers due at the same time, A's timer before B's.
func (p *Pair) Step() bool {
	p.T.Helper()
	at, ok := p.next()
	if !ok {
		return false
	}
	if at > p.Now {
		p.Now = at
	}
	if len(p.inFlight) > 0 && p.inFlight[0].at <= p.Now {
		p.arrive()
		return true
	}
	for _, e := range [2]*End{p.A, p.B} {
		if e.hasDeadline && e.deadline <= p.Now {
			e.lastTick, e.ticked = p.Now, true
			e.hasDeadline = false
			e.Q.Tick(p.Now)
			p.pump(e)
			return true
		}
	}
	return true
}

// arrive delivers the first packet on the wire (due at or before Now).
func (p *Pair) arrive() {
	f := p.inFlight[0]
	p.inFlight = append(p.inFlight[:0], p.inFlight[1:]...)
	to := p.end(f.to)
	p.Wire[1-f.to].Delivered++
	p.rx = verbs.Rx{Data: f.data, WireLen: f.wireLen, SrcHost: 1 - f.to, Plane: int(f.tx.EV & 0xf),
		EV: f.tx.EV, Trimmed: f.trimmed, DstPath: f.tx.DstPath, SrcPath: f.tx.SrcPath}
	to.Q.Receive(p.Now, &p.rx)
	p.rx.Data = nil
	p.pump(to)
}

// DeliverAll delivers every packet on the wire, and every packet those
// cause, without running timers; it returns Now.
func (p *Pair) DeliverAll() int64 {
	p.T.Helper()
	for n := 0; len(p.inFlight) > 0; n++ {
		if n > 1<<24 {
			p.T.Fatalf("%s: the wire never empties (t=%d)", p.tr.Name, p.Now)
		}
		p.Now = max(p.Now, p.inFlight[0].at)
		p.arrive()
	}
	return p.Now
}

// RunUntilIdle steps until the pair is idle (no packet in flight, no timer
// armed) and returns Now; it fails the test if that takes more than limit
// ns of virtual time.
func (p *Pair) RunUntilIdle(limit int64) int64 {
	p.T.Helper()
	return p.RunUntil(p.Idle, limit, "idle")
}

// RunUntilDone steps until every work request posted through Post has
// completed and the wire is empty (timers may stay armed), failing the
// test after limit ns.
func (p *Pair) RunUntilDone(limit int64) int64 {
	p.T.Helper()
	done := func() bool { return len(p.inFlight) == 0 && len(p.A.posted) == 0 && len(p.B.posted) == 0 }
	return p.RunUntil(done, limit, "done")
}

// RunUntil steps until cond holds, failing the test (naming what) if it
// does not within limit ns of virtual time, or if the pair goes idle first.
func (p *Pair) RunUntil(cond func() bool, limit int64, what string) int64 {
	p.T.Helper()
	end := p.Now + limit
	for !cond() {
		if p.Now > end {
			p.T.Fatalf("%s: not %s after %d ns (t=%d): %d packets in flight, %d+%d WRs outstanding, A %v deadline %v@%d, B %v deadline %v@%d",
				p.tr.Name, what, limit, p.Now, len(p.inFlight), len(p.A.posted), len(p.B.posted),
				p.A.Q.State(), p.A.hasDeadline, p.A.deadline, p.B.Q.State(), p.B.hasDeadline, p.B.deadline)
		}
		if !p.Step() {
			p.T.Fatalf("%s: idle at t=%d before %s: %d+%d WRs outstanding", p.tr.Name, p.Now, what, len(p.A.posted), len(p.B.posted))
		}
	}
	return p.Now
}

// SameBytes reports (as a test error) the first byte of [off, off+n) where
// A's and B's regions differ.
func (p *Pair) SameBytes(off, n uint64) bool {
	p.T.Helper()
	a, b := p.A.MR.Buf[off:off+n], p.B.MR.Buf[off:off+n]
	if bytes.Equal(a, b) {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			p.T.Errorf("%s: byte %d differs (first of [%d,%d)): A %#x, B %#x", p.tr.Name, off+uint64(i), off, off+n, a[i], b[i])
			break
		}
	}
	return false
}
