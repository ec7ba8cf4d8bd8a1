package mrc

import (
	"bytes"
	"testing"

	"github.com/vcluster/vcluster/verbs"
	"github.com/vcluster/vcluster/verbs/verbstest"
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

// end is one side of a connection verbstest wires: the QP itself, for the
// tests that step it by hand, and the harness side for those that let
// verbstest pump packets.
type end struct {
	t    testing.TB
	q    *QP
	mem  *verbs.Memory
	mr   *verbs.MR
	buf  []byte
	pair *verbstest.Pair
	side *verbstest.End
}

const (
	qpnA = 0x000111
	qpnB = 0x000222
)

// harness describes MRC to verbstest (see conformance_test.go for the
// exported-API twin the conformance suite runs).
func harness(cfg Config) verbstest.Transport {
	return verbstest.Transport{
		Name:   "mrc",
		New:    func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport { return New(cfg, mem, qpn, seed) },
		IsData: func(b []byte) bool { return len(b) > 0 && IsDataOpcode(b[0]) },
		MTU:    cfg.PMTU,
		Planes: cfg.Planes,
	}
}

// newPair returns two connected QPs, each with a real region of size bytes
// (A's filled with random bytes, B's zero).
func newPair(t testing.TB, cfg Config, size int) (a, b *end) {
	p := harness(cfg).NewPair(t, verbstest.Config{Size: size, QPN: [2]uint32{qpnA, qpnB},
		InitialPSN: [2]uint32{1000, 5000}, Seed: [2]uint64{1, 2}})
	p.A.Fill(9)
	mk := func(s *verbstest.End) *end {
		return &end{t: t, q: s.Q.(*QP), mem: s.Mem, mr: s.MR, buf: make([]byte, verbs.MaxTxBytes), pair: p, side: s}
	}
	return mk(p.A), mk(p.B)
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

// comps returns the completions verbstest collected while it pumped, then
// those still in the QP.
func (e *end) comps() []verbs.Completion {
	if e.side == nil {
		return e.q.PollCompletions(nil)
	}
	c := append(e.side.Comps, e.q.PollCompletions(nil)...)
	e.side.Comps = nil
	return c
}

// hand gives a and b, stepped by hand so far, to verbstest at now, with
// drop (nil: none) as its only hook.
func hand(a, b *end, now int64, drop func(p pkt) bool) *verbstest.Pair {
	if a.pair == nil { // ends built by hand: hosts 0 and 1
		x := &verbstest.End{Q: a.q, Mem: a.mem, MR: a.mr, Attrs: verbs.QPAttrs{Host: 0, QPN: a.q.QPN()}}
		y := &verbstest.End{Q: b.q, Mem: b.mem, MR: b.mr, Attrs: verbs.QPAttrs{Host: 1, QPN: b.q.QPN()}}
		a.pair = verbstest.Attach(a.t, harness(a.q.Config()), x, y, 0)
		a.side, b.pair, b.side = x, a.pair, y
	}
	p := a.pair
	p.Now = max(p.Now, now)
	p.ClearHooks()
	if drop != nil {
		p.Drop(func(pk *verbstest.Packet) bool { return drop(pkt{tx: pk.Tx, data: pk.Bytes}) })
	}
	p.Pump(p.A)
	p.Pump(p.B)
	return p
}

// deliverAll delivers every packet both ways until the wire is quiet,
// without running timers, dropping those drop selects; it returns the
// final time.
func deliverAll(a, b *end, now int64, drop func(p pkt) bool) int64 {
	return hand(a, b, now, drop).DeliverAll()
}

// runUntilIdle delivers and fires timers until nothing is pending.
func runUntilIdle(a, b *end, now int64, drop func(p pkt) bool) int64 {
	return hand(a, b, now, drop).RunUntilIdle(1e9)
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
