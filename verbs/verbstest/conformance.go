package verbstest

import (
	"fmt"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// runLimit is the virtual time a conformance case may take: far beyond any
// transport's retry schedule (MRC's 70 RTOs, RoCE's 7 × 524 µs).
const runLimit = 2e9

// RunConformance runs the transport conformance suite on pairs newPair
// builds: every case is a subtest, and cases a transport's declared
// capabilities exclude (zero-length Writes, trimming) are not run.
func RunConformance(t *testing.T, newPair NewPairFunc) {
	probe := newPair(t, Config{})
	tr := probe.Transport()
	if tr.MTU <= 0 {
		t.Fatalf("%s: Transport.MTU not set", tr.Name)
	}
	c := &suite{tr: tr, newPair: newPair, mtu: uint64(tr.MTU), win: tr.window()}
	for _, tc := range c.cases() {
		t.Run(tc.name, tc.run)
	}
}

type suite struct {
	tr      Transport
	newPair NewPairFunc
	mtu     uint64
	win     int
}

type testCase struct {
	name string
	run  func(t *testing.T)
}

// pair returns a pair whose regions hold size bytes, A's random, B's zero.
func (s *suite) pair(t *testing.T, size uint64, psnA, psnB uint32) *Pair {
	p := s.newPair(t, Config{Size: int(size), InitialPSN: [2]uint32{psnA, psnB}})
	p.A.Fill(9)
	return p
}

func (s *suite) cases() []testCase {
	var cs []testCase
	add := func(name string, run func(t *testing.T)) { cs = append(cs, testCase{name, run}) }

	// Transfers of every size class.
	var sizes []uint64
	if s.tr.ZeroLength {
		sizes = append(sizes, 0)
	}
	sizes = append(sizes, 1, s.mtu-1, s.mtu, s.mtu+1, 7*s.mtu+13, uint64(3*s.win)*s.mtu+5)
	for _, n := range sizes {
		for _, op := range []verbs.Opcode{verbs.OpWrite, verbs.OpWriteImm} {
			add(fmt.Sprintf("transfer/%s/%d", op, n), func(t *testing.T) { s.transfer(t, op, n) })
		}
	}

	// A loss at each position of the first window.
	for k := 0; k < s.win; k++ {
		add(fmt.Sprintf("loss/data=%d", k), func(t *testing.T) {
			s.lossy(t, uint64(2*s.win)*s.mtu, func(p *Pair) {
				p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == k && pk.Attempt == 0 })
			})
		})
	}
	add("loss/tail", func(t *testing.T) {
		n := 4 * s.mtu
		s.lossy(t, n, func(p *Pair) {
			p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == 3 && pk.Attempt == 0 })
		})
	})
	add("loss/tail-twice", func(t *testing.T) {
		s.lossy(t, 4*s.mtu, func(p *Pair) {
			p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == 3 && pk.Attempt < 2 })
		})
	})
	add("loss/first-feedback", func(t *testing.T) {
		s.lossy(t, 8*s.mtu, func(p *Pair) { p.Drop(func(pk *Packet) bool { return pk.Dir == BtoA && pk.Seq == 0 }) })
	})
	add("loss/all-feedback-once", func(t *testing.T) {
		s.lossy(t, 8*s.mtu, func(p *Pair) { p.Drop(func(pk *Packet) bool { return pk.Dir == BtoA && pk.Seq < 4 }) })
	})
	add("loss/burst", func(t *testing.T) {
		s.lossy(t, uint64(2*s.win)*s.mtu, func(p *Pair) {
			p.Drop(func(pk *Packet) bool {
				return pk.Dir == AtoB && pk.Attempt == 0 && pk.DataSeq >= s.win/4 && pk.DataSeq < s.win/4+4
			})
		})
	})
	add("duplicate/all", func(t *testing.T) {
		s.lossy(t, 9*s.mtu+7, func(p *Pair) { p.Duplicate(func(*Packet) bool { return true }) })
	})
	add("reorder/every-third-data", func(t *testing.T) {
		s.lossy(t, 9*s.mtu+7, func(p *Pair) { p.Reorder(func(pk *Packet) bool { return pk.Data && pk.DataSeq%3 == 1 }) })
	})
	add("delay/first-data", func(t *testing.T) {
		s.lossy(t, 9*s.mtu+7, func(p *Pair) {
			p.Delay(func(pk *Packet) bool { return pk.First() && pk.DataSeq == 0 }, 5000)
		})
	})
	if s.tr.HeaderLen != nil {
		for _, k := range []int{0, 1, s.win / 2, s.win - 1} {
			add(fmt.Sprintf("trim/data=%d", k), func(t *testing.T) {
				p := s.lossy(t, uint64(2*s.win)*s.mtu, func(p *Pair) {
					p.Trim(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == k && pk.Attempt == 0 })
				})
				if p.Wire[AtoB].Trimmed != 1 || p.B.Q.Stats().TrimmedReceived != 1 {
					t.Errorf("trimmed %d on the wire, %d received, want 1 and 1", p.Wire[AtoB].Trimmed, p.B.Q.Stats().TrimmedReceived)
				}
			})
		}
	}

	// PSN wrap: both sides start just below 2^24; a loss on PSN 0.
	add("psn-wrap", func(t *testing.T) {
		n := uint64(2*s.win+3) * s.mtu
		p := s.pair(t, n, 0xFFFFFD, 0xFFFFFF)
		p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.Data && pk.PSN == 0 && pk.Attempt == 0 })
		p.Write(1, verbs.OpWriteImm, 0, n, 0xabc)
		p.RunUntilDone(runLimit)
		p.SameBytes(0, n)
		wantComps(t, p.A.Comps, verbs.Completion{WRID: 1, QPN: p.A.Attrs.QPN, Op: verbs.OpWriteImm, Bytes: n})
		wantComps(t, p.B.Comps, verbs.Completion{QPN: p.B.Attrs.QPN, Op: verbs.OpRecvImm, Bytes: n, Imm: 0xabc})
		if p.Wire[AtoB].Dropped != 1 {
			t.Errorf("dropped %d packets, want 1 (no data packet had PSN 0?)", p.Wire[AtoB].Dropped)
		}
	})

	add("retry-exceeded", s.retryExceeded)
	add("remote-access/bad-rkey", func(t *testing.T) { s.remoteAccess(t, true) })
	add("remote-access/out-of-range", func(t *testing.T) { s.remoteAccess(t, false) })
	add("write-imm-order", func(t *testing.T) { s.writeImmOrder(t, nil) })
	add("write-imm-order/lossy", func(t *testing.T) {
		s.writeImmOrder(t, func(p *Pair) {
			p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq%5 == 1 && pk.Attempt == 0 })
			p.Delay(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == 0 }, 7000)
		})
	})
	add("completion-order", s.completionOrder)
	return cs
}

// transfer moves one message of n bytes and checks bytes and completions.
func (s *suite) transfer(t *testing.T, op verbs.Opcode, n uint64) {
	const off = 3 // not aligned: the payload split must not assume it
	p := s.pair(t, n+2*off, 0, 0)
	p.Write(7, op, off, n, 0x5eed)
	p.RunUntilDone(runLimit)
	p.SameBytes(off, n)
	for _, i := range []uint64{0, 1, n + off, n + off + 1} {
		if p.B.MR.Buf[i] != 0 {
			t.Errorf("B byte %d written outside [%d,%d)", i, off, off+n)
		}
	}
	if t.Failed() {
		return
	}
	wantComps(t, p.A.Comps, verbs.Completion{WRID: 7, QPN: p.A.Attrs.QPN, Op: op, Bytes: n})
	if op == verbs.OpWriteImm {
		wantComps(t, p.B.Comps, verbs.Completion{QPN: p.B.Attrs.QPN, Op: verbs.OpRecvImm, Bytes: n, Imm: 0x5eed})
	} else {
		wantComps(t, p.B.Comps)
	}
	if st := p.B.Q.Stats(); st.BytesPlaced != n {
		t.Errorf("B BytesPlaced %d, want %d", st.BytesPlaced, n)
	}
	if st := p.A.Q.Stats(); st.BytesCompleted != n || st.BytesPosted != n {
		t.Errorf("A BytesPosted %d BytesCompleted %d, want %d", st.BytesPosted, st.BytesCompleted, n)
	}
}

// lossy transfers a WriteImm of n bytes under the hooks set and checks it
// arrived whole, once.
func (s *suite) lossy(t *testing.T, n uint64, hooks func(p *Pair)) *Pair {
	p := s.pair(t, n, 100, 200)
	hooks(p)
	p.Write(1, verbs.OpWriteImm, 0, n, 42)
	p.RunUntilDone(runLimit)
	p.SameBytes(0, n)
	wantComps(t, p.A.Comps, verbs.Completion{WRID: 1, QPN: p.A.Attrs.QPN, Op: verbs.OpWriteImm, Bytes: n})
	wantComps(t, p.B.Comps, verbs.Completion{QPN: p.B.Attrs.QPN, Op: verbs.OpRecvImm, Bytes: n, Imm: 42})
	if p.A.Q.State() != verbs.QPReady || p.B.Q.State() != verbs.QPReady {
		t.Errorf("states %v, %v after the transfer, want READY", p.A.Q.State(), p.B.Q.State())
	}
	return p
}

// retryExceeded: nothing reaches B, so A's first WR fails with
// RETRY_EXCEEDED, the QP goes to ERROR, later WRs are flushed and Post is
// refused.
func (s *suite) retryExceeded(t *testing.T) {
	p := s.pair(t, 4*s.mtu, 0, 0)
	p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB })
	p.Write(1, verbs.OpWrite, 0, 2*s.mtu, 0)
	p.Write(2, verbs.OpWriteImm, 2*s.mtu, s.mtu, 5)
	p.RunUntilDone(runLimit)
	wantErrComps(t, p.A.Comps,
		verbs.Completion{WRID: 1, QPN: p.A.Attrs.QPN, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded},
		verbs.Completion{WRID: 2, QPN: p.A.Attrs.QPN, Op: verbs.OpWriteImm, Status: verbs.StatusFlushed})
	if st := p.A.Q.State(); st != verbs.QPError {
		t.Errorf("A in %v after retry exhaustion, want ERROR", st)
	}
	if err := p.Post(p.A, verbs.WorkRequest{ID: 3, LocalKey: p.A.MR.Key, LocalVA: p.A.MR.VA, Length: 1,
		RemoteKey: p.B.MR.Key, RemoteVA: p.B.MR.VA}); err != verbs.ErrQPError {
		t.Errorf("Post on an ERROR QP: %v, want %v", err, verbs.ErrQPError)
	}
	if p.A.Q.Stats().Timeouts == 0 {
		t.Error("no timeouts counted")
	}
	wantComps(t, p.B.Comps)
}

// remoteAccess: B rejects an unknown rkey (or a range outside its region):
// A completes the WR with REMOTE_ACCESS_ERROR and B's memory is untouched.
func (s *suite) remoteAccess(t *testing.T, badKey bool) {
	n := 3 * s.mtu
	p := s.pair(t, n, 0, 0)
	wr := verbs.WorkRequest{ID: 9, Op: verbs.OpWriteImm, LocalKey: p.A.MR.Key, LocalVA: p.A.MR.VA, Length: n,
		RemoteKey: p.B.MR.Key, RemoteVA: p.B.MR.VA, Imm: 1}
	if badKey {
		wr.RemoteKey += 100
	} else {
		wr.RemoteVA += s.mtu // the message runs past the region's end
	}
	if err := p.Post(p.A, wr); err != nil {
		t.Fatal(err)
	}
	p.RunUntilDone(runLimit)
	wantErrComps(t, p.A.Comps, verbs.Completion{WRID: 9, QPN: p.A.Attrs.QPN, Op: verbs.OpWriteImm, Status: verbs.StatusRemoteAccess})
	// With an unknown key no packet may land. A range that runs past the
	// region's end may leave the in-range part written (MRC checks each
	// packet's own range, RoCE the whole message at its first packet; IB
	// leaves the target undefined after an error), so only the key case
	// checks memory.
	if badKey {
		for i, b := range p.B.MR.Buf {
			if b != 0 {
				t.Fatalf("B byte %d written by a Write with an unknown rkey", i)
			}
		}
		if p.B.Q.Stats().BytesPlaced != 0 {
			t.Errorf("B BytesPlaced %d, want 0", p.B.Q.Stats().BytesPlaced)
		}
	}
	for _, c := range p.B.Comps {
		if c.Status == verbs.StatusOK {
			t.Errorf("B completed the rejected WriteImm: %+v", c)
		}
	}
}

// writeImmOrder: WriteImms of mixed sizes produce RECV_IMM completions at B
// in posting order, with their Imm and length, each after its data is in
// B's memory; A completes them in posting order too.
func (s *suite) writeImmOrder(t *testing.T, hooks func(p *Pair)) {
	lens := []uint64{3 * s.mtu, 1, s.mtu, 2*s.mtu + 5, 17, 5 * s.mtu, s.mtu - 1, 2}
	offs, total := offsets(lens)
	p := s.pair(t, total, 0, 0)
	if hooks != nil {
		hooks(p)
	}
	next := 0
	p.OnCompletion = func(e *End, c verbs.Completion) {
		if e != p.B {
			return
		}
		if next >= len(lens) {
			t.Errorf("extra completion at B: %+v", c)
			return
		}
		want := verbs.Completion{QPN: p.B.Attrs.QPN, Op: verbs.OpRecvImm, Bytes: lens[next], Imm: 0x100 + uint32(next)}
		if c != want {
			t.Errorf("B completion %d: %+v, want %+v", next, c, want)
		}
		if !p.SameBytes(offs[next], lens[next]) {
			t.Errorf("B completion %d (Imm %#x) before its data was placed", next, c.Imm)
		}
		next++
	}
	for i, n := range lens {
		p.Write(uint64(i+1), verbs.OpWriteImm, offs[i], n, 0x100+uint32(i))
	}
	p.RunUntilDone(runLimit)
	if next != len(lens) {
		t.Errorf("B completed %d WriteImms, want %d", next, len(lens))
	}
	want := make([]verbs.Completion, len(lens))
	for i, n := range lens {
		want[i] = verbs.Completion{WRID: uint64(i + 1), QPN: p.A.Attrs.QPN, Op: verbs.OpWriteImm, Bytes: n}
	}
	wantComps(t, p.A.Comps, want...)
}

// completionOrder: a long Write whose first packet is lost, then short
// ones that get through at once: A still completes them in posting order.
func (s *suite) completionOrder(t *testing.T) {
	lens := []uint64{6 * s.mtu, 1, s.mtu, 10, 2 * s.mtu}
	ops := []verbs.Opcode{verbs.OpWrite, verbs.OpWriteImm, verbs.OpWrite, verbs.OpWrite, verbs.OpWriteImm}
	offs, total := offsets(lens)
	p := s.pair(t, total, 0, 0)
	p.Drop(func(pk *Packet) bool { return pk.Dir == AtoB && pk.DataSeq == 0 && pk.Attempt == 0 })
	for i, n := range lens {
		p.Write(uint64(10+i), ops[i], offs[i], n, uint32(i))
	}
	p.RunUntilDone(runLimit)
	p.SameBytes(0, total)
	want := make([]verbs.Completion, len(lens))
	for i, n := range lens {
		want[i] = verbs.Completion{WRID: uint64(10 + i), QPN: p.A.Attrs.QPN, Op: ops[i], Bytes: n}
	}
	wantComps(t, p.A.Comps, want...)
}

// wantErrComps compares error completions without Bytes, which verbs
// leaves to the transport on error (IB: undefined).
func wantErrComps(t *testing.T, got []verbs.Completion, want ...verbs.Completion) {
	t.Helper()
	g := make([]verbs.Completion, len(got))
	for i, c := range got {
		c.Bytes = 0
		g[i] = c
	}
	wantComps(t, g, want...)
}

func wantComps(t *testing.T, got []verbs.Completion, want ...verbs.Completion) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("completions %+v, want %+v", got, want)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("completion %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// offsets lays messages of lengths lens end to end: each one's offset, and
// the total.
func offsets(lens []uint64) (offs []uint64, total uint64) {
	offs = make([]uint64, len(lens))
	for i, n := range lens {
		offs[i] = total
		total += n
	}
	return offs, total
}
