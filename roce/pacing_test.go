package roce

import (
	"math"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

func TestPacing(t *testing.T) {
	c := noCC()
	c.LineRateBps = 10_000_000_000
	p := newPair(t, c)
	src := p.ma.RegisterVirtual(1 << 20)
	dst := p.mb.RegisterVirtual(1 << 20)
	p.a.Post(0, verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 1 << 20, RemoteKey: dst.Key, RemoteVA: dst.VA})
	buf := make([]byte, verbs.MaxTxBytes)
	tx, ok := p.a.Send(100, 1, buf)
	if !ok {
		t.Fatal("first packet")
	}
	if _, ok := p.a.Send(100, 1, buf); ok {
		t.Fatal("second packet not paced")
	}
	gap := int64(tx.WireLen+c.WireOverhead) * 8 * 1e9 / c.LineRateBps // 3.4 µs at 10 Gb/s
	dl, ok := p.a.Deadline()
	if !ok || dl < 100+gap || dl > 100+gap+1 {
		t.Fatalf("deadline %d, want %d", dl, 100+gap)
	}
	if _, ok := p.a.Send(dl-1, 1, buf); ok {
		t.Fatal("sent before the deadline")
	}
	if _, ok := p.a.Send(dl, 1, buf); !ok {
		t.Fatal("not sent at the deadline")
	}
	// No room on the plane: no data, no pacing deadline.
	if _, ok := p.a.Send(1<<40, 0, buf); ok {
		t.Fatal("sent without room")
	}
	if _, ok := p.a.Send(1<<40, 1<<5, buf); ok {
		t.Fatal("sent on another plane's room")
	}
}

// One QP with nothing in its way sends at its line rate: the pacing gap
// of a packet is rarely a whole number of nanoseconds, and rounding every
// deadline up to the next ns (and restarting from there) lost the
// fraction on every packet — 99.72% of 400G, 96.32% of 1.6T with PMTU 4096
// and the uSID overhead, 93.8% with PMTU 1024. The QP is asked at each
// deadline (the engine's contract), for CC none and for DCQCN before any
// CNP (which sends at line rate), over the wire overheads of the fabric's
// modes: 86 B (Ethernet, IPv6, UDP, FCS, preamble and IFG) and 126 B (uSID
// forwarding's outer IPv6 header too).
func TestPacingReachesLineRate(t *testing.T) {
	worst := 0.0
	defer func() { t.Logf("largest deviation from line rate: %.4f%%", 100*worst) }()
	for _, rate := range []int64{400e9, 800e9, 1600e9, 3200e9} {
		for _, pmtu := range []int{4096, 1024} {
			for _, ovh := range []int{86, 126} {
				for _, cc := range []string{CCNone, CCDCQCN} {
					c := DefaultConfig()
					c.LineRateBps, c.PMTU, c.WireOverhead = rate, pmtu, ovh
					c.DCQCN = DCQCNHPCC(rate)
					c.CC = cc
					got := pacedRate(t, c, 20_000)
					worst = max(worst, math.Abs(got/float64(rate)-1))
					if d := got/float64(rate) - 1; d < -0.0005 || d > 0.0005 {
						t.Errorf("%d b/s, PMTU %d, overhead %d, %s: %.4f%% of line rate", rate, pmtu, ovh, cc, 100*got/float64(rate))
					}
				}
			}
		}
	}
}

// pacedRate sends n packets from one QP, asking it at every deadline, and
// returns the wire rate from the first packet's start to the end of the
// last one's frame.
func pacedRate(t *testing.T, c Config, n int) float64 {
	t.Helper()
	c.TimeoutNs = 1e12 // no ACKs come back: keep the timer out of the way
	p := newPair(t, c)
	l := uint64(n * c.PMTU)
	src, dst := p.ma.RegisterVirtual(l), p.mb.RegisterVirtual(l)
	if err := p.a.Post(0, verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: l, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != nil {
		t.Fatal(err)
	}
	var bits, first, last int64
	for i := range n {
		tx, ok := p.a.Send(p.now, ^uint32(0), p.buf)
		for !ok {
			dl, pending := p.a.Deadline()
			if !pending || !p.a.paceWait || dl <= p.now {
				t.Fatalf("packet %d: no pacing deadline after now %d (deadline %d, %v)", i, p.now, dl, pending)
			}
			p.now = dl
			tx, ok = p.a.Send(p.now, ^uint32(0), p.buf)
		}
		if i == 0 {
			first = p.now
		}
		last = p.now
		bits += int64(tx.WireLen+c.WireOverhead) * 8
	}
	// The last frame ends its serialization at last + its time on the wire.
	lastBits := float64(int64(p.a.lastBits))
	return float64(bits) / ((float64(last-first) + lastBits*1e9/float64(c.LineRateBps)) / 1e9)
}
