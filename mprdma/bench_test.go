package mprdma

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// steadyPair is two QPs with a huge virtual write in progress, wired back
// to back over 4 paths: every step sends one data packet from A, hands it
// to B, and takes B's ACK for it (one per data packet: ACK clocking) back
// to A. It is the per-packet cost of both ends of a connection.
type steadyPair struct {
	a, b     *QP
	buf, ack []byte
	rx       verbs.Rx
	now      int64
}

func newSteadyPair(tb testing.TB, s Scheme) *steadyPair {
	cfg := DefaultConfig()
	cfg.Scheme, cfg.Paths, cfg.BDPPackets, cfg.BitmapEntries = s, 4, 32, 256
	ma, mb := &verbs.Memory{}, &verbs.Memory{}
	src, dst := ma.RegisterVirtual(1<<40), mb.RegisterVirtual(1<<40)
	p := &steadyPair{a: New(cfg, ma, 0x111, 1), b: New(cfg, mb, 0x222, 2),
		buf: make([]byte, verbs.MaxTxBytes), ack: make([]byte, verbs.MaxTxBytes)}
	la := verbs.QPAttrs{Host: 0, QPN: 0x111, InitialPSN: 100}
	lb := verbs.QPAttrs{Host: 1, QPN: 0x222, InitialPSN: 200}
	if p.a.Connect(la, lb) != nil || p.b.Connect(lb, la) != nil {
		tb.Fatal("connect")
	}
	// 512 writes of 2 GiB: 2^28 packets, more than any run sends.
	for i := range uint64(512) {
		off := i << 31
		if err := p.a.Post(0, verbs.WorkRequest{ID: i, Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA + off,
			Length: 1 << 31, RemoteKey: dst.Key, RemoteVA: dst.VA + off}); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

func (p *steadyPair) step(tb testing.TB) {
	tx, ok := p.a.Send(p.now, 1, p.buf)
	if !ok {
		tb.Fatalf("no data packet at %d: %+v", p.now, p.a.MPStats())
	}
	p.rx = verbs.Rx{Data: p.buf[:tx.Len], WireLen: tx.WireLen, SrcHost: 0, EV: tx.EV, DstPath: tx.DstPath}
	p.b.Receive(p.now, &p.rx)
	atx, ok := p.b.Send(p.now, 1, p.ack)
	if !ok {
		tb.Fatal("no ACK")
	}
	p.rx = verbs.Rx{Data: p.ack[:atx.Len], WireLen: atx.WireLen, SrcHost: 1, EV: atx.EV, SrcPath: atx.SrcPath}
	p.a.Receive(p.now, &p.rx)
	p.now += 400 // ≥ one 4 KiB packet at 100 Gb/s
}

var benchSchemes = []Scheme{SchemeMPRDMA, SchemeRandom, SchemeOrderRE}

// TestQPZeroAllocsPerPacket: the steady state of every scheme allocates
// nothing per packet (data, its ACK, both QPs).
func TestQPZeroAllocsPerPacket(t *testing.T) {
	for _, s := range benchSchemes {
		p := newSteadyPair(t, s)
		for range 5000 {
			p.step(t)
		}
		if a := testing.AllocsPerRun(5000, func() { p.step(t) }); a != 0 {
			t.Errorf("%v: %.3f allocations per packet", s, a)
		}
		if st := p.b.MPStats(); st.BitmapOverflows != 0 || st.LossesDetected != 0 {
			t.Errorf("%v: a loss-free back-to-back run detected losses: %+v", s, st)
		}
	}
}

// BenchmarkMPRDMAPacket: one data packet and its ACK through both QPs
// (payload elided via virtual regions). RoCE's BenchmarkRoCEPacket sends
// one ACK per 32 packets; these schemes ACK every packet.
func BenchmarkMPRDMAPacket(b *testing.B) {
	for _, s := range benchSchemes {
		b.Run(s.String(), func(b *testing.B) {
			// The package's tests check every invariant after every
			// input (helpers_test.go); a benchmark measures the QP alone.
			defer func(on bool) { debugInvariants = on }(debugInvariants)
			debugInvariants = false
			p := newSteadyPair(b, s)
			for range 10_000 {
				p.step(b)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.step(b)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/packet")
		})
	}
}
