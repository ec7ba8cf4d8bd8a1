package mrc

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// pkt is one packet a QP produced, with its bytes copied.
type pkt struct {
	tx   verbs.Tx
	data []byte
}

func (p pkt) bth(t testing.TB) BTH {
	h, err := DecodeBTH(p.data)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (p pkt) op() uint8 { return p.data[0] }

// rx turns p into what the peer receives.
func (p pkt) rx() *verbs.Rx {
	return &verbs.Rx{Data: p.data, WireLen: p.tx.WireLen, SrcHost: 0, Plane: evPlane(p.tx.EV), EV: p.tx.EV}
}

// end is one side of a hand-wired connection.
type end struct {
	t   testing.TB
	q   *QP
	mem *verbs.Memory
	mr  *verbs.MR
	buf []byte
}

const (
	qpnA = 0x000111
	qpnB = 0x000222
)

// newPair returns two connected QPs, each with a real region of size bytes
// (A's filled with random bytes, B's zero).
func newPair(t testing.TB, cfg Config, size int) (a, b *end) {
	mk := func(qpn uint32, seed uint64) *end {
		e := &end{t: t, mem: &verbs.Memory{}, buf: make([]byte, verbs.MaxTxBytes)}
		e.mr = e.mem.Register(make([]byte, size))
		e.q = New(cfg, e.mem, qpn, seed)
		return e
	}
	a, b = mk(qpnA, 1), mk(qpnB, 2)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range a.mr.Buf {
		a.mr.Buf[i] = byte(r.Uint32())
	}
	aa := verbs.QPAttrs{Host: 0, QPN: qpnA, InitialPSN: 1000}
	ba := verbs.QPAttrs{Host: 1, QPN: qpnB, InitialPSN: 5000}
	if err := a.q.Connect(aa, ba); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Connect(ba, aa); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// write posts a Write of n bytes from offset off of A's region to the same
// offset of B's.
func (e *end) write(peer *end, id uint64, op verbs.Opcode, off, n uint64, imm uint32) {
	e.t.Helper()
	err := e.q.Post(0, verbs.WorkRequest{ID: id, Op: op, LocalKey: e.mr.Key, LocalVA: e.mr.VA + off, Length: n,
		RemoteKey: peer.mr.Key, RemoteVA: peer.mr.VA + off, Imm: imm})
	if err != nil {
		e.t.Fatal(err)
	}
}

// drain calls Send until it reports nothing.
func (e *end) drain(now int64, free uint32) []pkt {
	var out []pkt
	for {
		tx, ok := e.q.Send(now, free, e.buf)
		if !ok {
			return out
		}
		out = append(out, pkt{tx: tx, data: bytes.Clone(e.buf[:tx.Len])})
	}
}

func (e *end) recv(now int64, ps ...pkt) {
	for _, p := range ps {
		e.q.Receive(now, p.rx())
	}
}

func (e *end) comps() []verbs.Completion { return e.q.PollCompletions(nil) }

// deliverAll delivers every packet both ways until both QPs are quiet,
// dropping those drop selects; it returns the final time.
func deliverAll(a, b *end, now int64, drop func(p pkt) bool) int64 {
	for i := 0; i < 1000; i++ {
		pa := a.drain(now, 0xffff)
		pb := b.drain(now, 0xffff)
		if len(pa)+len(pb) == 0 {
			return now
		}
		now += 1000
		for _, p := range pa {
			if drop == nil || !drop(p) {
				b.recv(now, p)
			}
		}
		for _, p := range pb {
			if drop == nil || !drop(p) {
				a.recv(now, p)
			}
		}
	}
	return now
}

// runUntilIdle delivers and fires timers until nothing is pending.
func runUntilIdle(a, b *end, now int64, drop func(p pkt) bool) int64 {
	for i := 0; i < 1000; i++ {
		now = deliverAll(a, b, now, drop)
		da, oka := a.q.Deadline()
		db, okb := b.q.Deadline()
		if !oka && !okb {
			return now
		}
		next := int64(1 << 62)
		if oka {
			next = da
		}
		if okb && db < next {
			next = db
		}
		if next > now {
			now = next
		}
		a.q.Tick(now)
		b.q.Tick(now)
	}
	return now
}

func sameBytes(t testing.TB, a, b *end, off, n uint64) {
	t.Helper()
	if !bytes.Equal(a.mr.Buf[off:off+n], b.mr.Buf[off:off+n]) {
		for i := off; i < off+n; i++ {
			if a.mr.Buf[i] != b.mr.Buf[i] {
				t.Fatalf("byte %d differs (first of [%d,%d))", i, off, off+n)
			}
		}
	}
}

func wantComps(t testing.TB, got []verbs.Completion, want ...verbs.Completion) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("completions %+v, want %+v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("completion %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// smallCfg is the default configuration with maxwnd pinned (MaxCwnd 2 MiB):
// hand-wired tests deliver packets after a few µs at most, and NSCC would
// otherwise shrink maxwnd to 1.5 BDP of that tiny measured RTT.
func smallCfg() Config {
	c := DefaultConfig()
	c.NSCC.MaxCwnd = 2 << 20
	return c
}
