package mrc

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// steady is a requester/responder pair exchanging packets without a
// network: each step sends one data packet, delivers it and every control
// packet back.
type steady struct {
	a, b       *QP
	bufA, bufB []byte
	now        int64
	comps      []verbs.Completion
	rx         verbs.Rx
}

func newSteady(tb testing.TB, real bool) *steady {
	var ma, mb verbs.Memory
	var src, dst *verbs.MR
	if real {
		src = ma.Register(make([]byte, 64<<20))
		dst = mb.Register(make([]byte, 64<<20))
	} else {
		src = ma.RegisterVirtual(1 << 50)
		dst = mb.RegisterVirtual(1 << 50)
	}
	cfg := DefaultConfig()
	s := &steady{a: New(cfg, &ma, 1, 1), b: New(cfg, &mb, 2, 2),
		bufA: make([]byte, verbs.MaxTxBytes), bufB: make([]byte, verbs.MaxTxBytes),
		comps: make([]verbs.Completion, 0, 64)}
	aa := verbs.QPAttrs{QPN: 1}
	ba := verbs.QPAttrs{Host: 1, QPN: 2}
	s.a.Connect(aa, ba)
	s.b.Connect(ba, aa)
	// Many 1 MiB writes over the same region: the requester always has data.
	for i := 0; i < 1<<14; i++ {
		off := uint64(i%32) << 20
		if err := s.a.Post(0, verbs.WorkRequest{ID: uint64(i), Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA + off,
			Length: 1 << 20, RemoteKey: dst.Key, RemoteVA: dst.VA + off}); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// step sends and delivers one data packet and the control packets it
// causes. The network delay is 10 µs in the requester's view: send times
// advance 80 ns per packet and acks are processed right away, which keeps
// the window open.
func (s *steady) step() {
	s.now += 80
	tx, ok := s.a.Send(s.now, 0xf, s.bufA)
	if ok {
		s.rx = verbs.Rx{Data: s.bufA[:tx.Len], WireLen: tx.WireLen, EV: tx.EV}
		s.b.Receive(s.now, &s.rx)
	}
	for {
		tx, ok := s.b.Send(s.now, 0xf, s.bufB)
		if !ok {
			break
		}
		s.rx = verbs.Rx{Data: s.bufB[:tx.Len], WireLen: tx.WireLen, EV: tx.EV}
		s.a.Receive(s.now+10_000, &s.rx)
	}
	s.a.Deadline()
	s.comps = s.a.PollCompletions(s.comps[:0])
	s.comps = s.b.PollCompletions(s.comps[:0])
}

func TestZeroAllocsPerPacket(t *testing.T) {
	for _, real := range []bool{false, true} {
		s := newSteady(t, real)
		for i := 0; i < 20000; i++ {
			s.step()
		}
		before := s.a.Stats().DataPacketsSent
		allocs := testing.AllocsPerRun(5000, s.step)
		sent := s.a.Stats().DataPacketsSent - before
		if sent < 5000 {
			t.Fatalf("real=%v: only %d data packets in 5000 steps", real, sent)
		}
		if allocs != 0 {
			t.Fatalf("real=%v: %.2f allocations per packet", real, allocs)
		}
	}
}

// BenchmarkMRCPacket: one data packet per op (Send at the requester,
// Receive at the responder, plus the SACKs it causes both ways), payload
// elided via virtual regions.
func BenchmarkMRCPacket(b *testing.B) {
	s := newSteady(b, false)
	for i := 0; i < 10000; i++ {
		s.step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.step()
	}
	b.StopTimer()
	if s.a.State() != verbs.QPReady {
		b.Fatal("QP failed")
	}
}

// BenchmarkMRCPacketReal is the same with 4 KiB payloads copied in and out
// of real memory.
func BenchmarkMRCPacketReal(b *testing.B) {
	s := newSteady(b, true)
	for i := 0; i < 10000; i++ {
		s.step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.step()
	}
}
