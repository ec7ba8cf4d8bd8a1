package roce

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// steady is a pair with a huge virtual write in progress: every Send
// produces a data packet and every Receive places (counts) it.
type steady struct {
	p      *pair
	rx     verbs.Rx
	buf    []byte
	ackBuf []byte
	now    int64
	n      int
}

func newSteady(tb testing.TB, cfg Config) *steady {
	cfg.AckEvery = 1 << 20 // ACKs are exercised separately
	p := newPair(tb, cfg)
	src := p.ma.RegisterVirtual(1 << 40)
	dst := p.mb.RegisterVirtual(1 << 40)
	// 512 writes of 2 GiB fill the 1 TiB region: 2^28 packets, more than
	// any benchmark run sends.
	for i := range uint64(512) {
		off := i << 31
		if err := p.a.Post(0, verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA + off, Length: 1 << 31, RemoteKey: dst.Key, RemoteVA: dst.VA + off}); err != nil {
			tb.Fatal(err)
		}
	}
	return &steady{p: p, buf: make([]byte, verbs.MaxTxBytes), ackBuf: make([]byte, verbs.MaxTxBytes)}
}

// step sends and receives one data packet (advancing time by the packet's
// serialization at line rate) and, every 32 packets, takes the
// responder's ACK back to the requester.
func (s *steady) step(tb testing.TB) {
	tx, ok := s.p.a.Send(s.now, 1, s.buf)
	if !ok {
		tb.Fatalf("no packet: n=%d now=%d paceWait=%v paceAt=%d una=%d max=%d nextSeq=%d state=%v b=%+v", s.n, s.now, s.p.a.paceWait, s.p.a.paceAt, s.p.a.sndUna, s.p.a.sndMax, s.p.a.nextSeq, s.p.a.state, s.p.b.Stats())
	}
	s.rx = verbs.Rx{Data: s.buf[:tx.Len], WireLen: tx.WireLen, SrcHost: 0}
	s.p.b.Receive(s.now, &s.rx)
	s.n++
	if s.n&31 == 0 {
		s.p.b.ackDue = true
		atx, ok := s.p.b.Send(s.now, 1, s.ackBuf)
		if !ok {
			tb.Fatal("no ACK")
		}
		s.rx = verbs.Rx{Data: s.ackBuf[:atx.Len], WireLen: atx.WireLen, SrcHost: 1}
		s.p.a.Receive(s.now, &s.rx)
	}
	s.now += 400 // ≥ 4218 B at 100 Gb/s
}

func TestZeroAllocsPerPacket(t *testing.T) {
	for _, name := range []string{"gbn/dcqcn", "irn/dcqcn", "gbn/timely", "irn/none"} {
		c := DefaultConfig()
		switch name {
		case "irn/dcqcn":
			c.Reliability = IRN
		case "gbn/timely":
			c.SetPreset("timely_hpcc")
		case "irn/none":
			c.Reliability, c.CC = IRN, CCNone
		}
		s := newSteady(t, c)
		for range 10_000 { // warm up: rings grow to their steady size
			s.step(t)
		}
		if a := testing.AllocsPerRun(10_000, func() { s.step(t) }); a != 0 {
			t.Errorf("%s: %.3f allocations per packet", name, a)
		}
		// CE marks, CNPs and the rate changes they cause do not allocate
		// either.
		if a := testing.AllocsPerRun(2000, func() {
			s.rx.CE = true
			s.p.b.Receive(s.now, &s.rx) // a duplicate, CE-marked
			s.p.b.ackDue = true
			for {
				tx, ok := s.p.b.Send(s.now, 1, s.ackBuf)
				if !ok {
					break
				}
				s.p.a.Receive(s.now, &verbs.Rx{Data: s.ackBuf[:tx.Len], WireLen: tx.WireLen})
			}
			var tx verbs.Tx
			for i := 0; ; i++ {
				var ok bool
				if tx, ok = s.p.a.Send(s.now, 1, s.buf); ok {
					break
				}
				if i > 1000 {
					t.Fatal("requester stuck")
				}
				s.now += 100
			}
			s.rx = verbs.Rx{Data: s.buf[:tx.Len], WireLen: tx.WireLen}
			s.p.b.Receive(s.now, &s.rx)
			s.now += 1000
		}); a != 0 {
			t.Errorf("%s: %.3f allocations per packet with CE", name, a)
		}
		if st := s.p.a.Stats(); c.CC == CCDCQCN && (st.CNPsReceived == 0 || st.RateBps == c.LineRateBps) || s.p.a.State() != verbs.QPReady {
			t.Errorf("%s: no CNP exercised: %+v", name, st)
		}
	}
}

// BenchmarkRoCEPacket: Send + Receive of one 4 KB data packet (payload
// elided via virtual regions), with an ACK every 32 packets.
func BenchmarkRoCEPacket(b *testing.B) {
	for _, name := range []string{"gbn-dcqcn", "irn-dcqcn", "gbn-none"} {
		b.Run(name, func(b *testing.B) {
			c := DefaultConfig()
			switch name {
			case "irn-dcqcn":
				c.Reliability = IRN
			case "gbn-none":
				c.CC = CCNone
			}
			s := newSteady(b, c)
			for range 10_000 {
				s.step(b)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				s.step(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
		})
	}
}
