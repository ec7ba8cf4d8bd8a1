package mrc

import (
	"strings"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// Responder resources (ResponderConfig) and the responder's ALWAYS_SKIP
// judgement, driven step by step through two hand-wired QPs.

const firstPSN = 1000 // A's InitialPSN in newPair

// holdOnce delivers A's first burst to B with the data packet of psn held
// back one round (reordering across paths), B's answers to A, then the held
// packet to B; the caller lets both sides run on.
func holdOnce(t *testing.T, a, b *end, now int64, psn uint32) int64 {
	t.Helper()
	pa := a.drain(now, 0xffff)
	now += 1000
	var held []pkt
	for _, p := range pa {
		if IsDataOpcode(p.op()) && p.bth(t).PSN == psn {
			held = append(held, p)
			continue
		}
		b.recv(now, p)
	}
	if len(held) != 1 {
		t.Fatalf("PSN %d not in the first burst of %d packets", psn, len(pa))
	}
	pb := b.drain(now, 0xffff)
	now += 1000
	b.recv(now, held...)
	a.recv(now, pb...)
	return now
}

// respCase is one responder bound: how to configure it, what A posts (n
// one-packet WriteImms when imm, else one 64-packet WriteImm), and what
// the held first packet makes the responder NACK.
type respCase struct {
	name  string
	set   func(r *ResponderConfig)
	imm   bool
	code  uint8
	nacks uint64 // NACKs of the first burst: packets beyond the bound
	count func(s ResponderStats) uint64
}

var respCases = []respCase{
	// Bitmap of 8 PSNs from ePSN: with ePSN held at 1000, 1001..1007 fit, 1008..1063 do not.
	{"NO_BITMAP", func(r *ResponderConfig) { r.BitmapPSNs = 8 }, false, NackNoBitmap, 64 - 8,
		func(s ResponderStats) uint64 { return s.NoBitmapNacks }},
	// Four out-of-order packets held: 1001..1004, then 1005..1063 are refused.
	{"NO_PKT_BUFFER", func(r *ResponderConfig) { r.PacketBuffers = 4 }, false, NackNoPktBuffer, 64 - 1 - 4,
		func(s ResponderStats) uint64 { return s.NoPktBufferNacks }},
	// Two immediates held: WriteImms 1 and 2 wait for 0; 3..7 are refused.
	{"NO_RESOURCE", func(r *ResponderConfig) { r.ImmSlots = 2 }, true, NackNoResource, 8 - 1 - 2,
		func(s ResponderStats) uint64 { return s.NoResourceNacks }},
}

func (c respCase) post(a, b *end) (wrs int) {
	if c.imm {
		for i := 0; i < 8; i++ {
			a.write(b, uint64(i), verbs.OpWriteImm, uint64(i)*pmtu, pmtu, uint32(100+i))
		}
		return 8
	}
	a.write(b, 0, verbs.OpWriteImm, 0, 64*pmtu, 100)
	return 1
}

// TestRespResourceNACKs: the responder runs out of its bitmap, packet
// buffers or immediate slots while the packet at ePSN is late, NACKs
// every packet beyond the bound with the spec's code, the requester
// retransmits each (a retry-counted NACK), and the transfer completes with
// every byte and every RecvImm right once the late packet frees them.
func TestRespResourceNACKs(t *testing.T) {
	for _, c := range respCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallCfg()
			c.set(&cfg.Responder)
			a, b := newPair(t, cfg, 1<<20)
			nwr := c.post(a, b)
			now := holdOnce(t, a, b, 0, firstPSN)
			// The NACKs A just got carry c.code and the NACKed packet's EV.
			rs := b.q.ResponderStats()
			if got := c.count(rs); got != c.nacks {
				t.Fatalf("%s NACKs after the first burst: %d, want %d (stats %+v)", c.name, got, c.nacks, rs)
			}
			now = runUntilIdle(a, b, now, nil)
			ca := a.comps()
			if len(ca) != nwr {
				t.Fatalf("requester completions %+v, want %d", ca, nwr)
			}
			for i, x := range ca {
				if x.Status != verbs.StatusOK || x.WRID != uint64(i) {
					t.Fatalf("completion %d: %+v", i, x)
				}
			}
			cb := b.comps()
			if len(cb) != nwr {
				t.Fatalf("responder RecvImms %+v, want %d", cb, nwr)
			}
			for i, x := range cb {
				if x.Op != verbs.OpRecvImm || x.Imm != uint32(100+i) {
					t.Fatalf("RecvImm %d: %+v", i, x)
				}
			}
			n := uint64(64 * pmtu)
			if c.imm {
				n = 8 * pmtu
			}
			sameBytes(t, a, b, 0, n)
			rs, ms := b.q.ResponderStats(), a.q.MRCStats()
			if c.count(rs) != c.nacks || ms.OtherNacksReceived != c.nacks || ms.NackRetransmits != c.nacks {
				t.Fatalf("%s sent %d, requester got %d and retransmitted %d; want %d each",
					c.name, c.count(rs), ms.OtherNacksReceived, ms.NackRetransmits, c.nacks)
			}
			if st := a.q.Stats(); st.Retransmissions < c.nacks || st.NacksReceived < c.nacks {
				t.Fatalf("requester stats %+v", st)
			}
			if rs.ImmHeld != 0 || b.q.rcvAbove != 0 {
				t.Fatalf("responder still holds %d immediates, %d packets", rs.ImmHeld, b.q.rcvAbove)
			}
			t.Logf("%s: %d NACKs, %d retransmissions, done at %d ns", c.name, c.nacks, a.q.Stats().Retransmissions, now)
		})
	}
}

// TestRespResourceNeverFrees: the packet at ePSN never arrives, so the
// resource never frees; each retransmission of a refused packet draws the
// NACK again, and the requester reaches its retry limit: QP ERROR,
// RETRY_EXCEEDED.
func TestRespResourceNeverFrees(t *testing.T) {
	for _, c := range respCases {
		t.Run(c.name, func(t *testing.T) {
			cfg := smallCfg()
			c.set(&cfg.Responder)
			a, b := newPair(t, cfg, 1<<20)
			c.post(a, b)
			drop := func(p pkt) bool {
				return IsDataOpcode(p.op()) && getPSN(p.data[9:]) == firstPSN
			}
			runUntilIdle(a, b, 0, drop)
			if a.q.State() != verbs.QPError {
				t.Fatalf("QP %v, want ERROR", a.q.State())
			}
			exceeded := false
			for _, x := range a.comps() {
				if x.Status == verbs.StatusRetryExceeded {
					exceeded = true
				}
			}
			if !exceeded || a.q.Err() == nil || !strings.Contains(a.q.Err().Error(), "retry") {
				t.Fatalf("no RETRY_EXCEEDED completion; Err %v", a.q.Err())
			}
			if got := c.count(b.q.ResponderStats()); got < c.nacks {
				t.Fatalf("%d %s NACKs, want at least %d: the packets beyond the resource were not refused", got, c.name, c.nacks)
			}
		})
	}
}

// TestRespBoundsAllowInOrder: in-order arrivals need no resource, so even
// the tightest bounds never NACK a transfer that is not reordered.
func TestRespBoundsAllowInOrder(t *testing.T) {
	cfg := smallCfg()
	cfg.Responder = ResponderConfig{BitmapPSNs: 1, PacketBuffers: 1, ImmSlots: 1}
	a, b := newPair(t, cfg, 1<<20)
	for i := 0; i < 8; i++ {
		a.write(b, uint64(i), verbs.OpWriteImm, uint64(i)*8*pmtu, 8*pmtu, uint32(i))
	}
	runUntilIdle(a, b, 0, nil)
	if n := len(a.comps()); n != 8 {
		t.Fatalf("%d completions", n)
	}
	sameBytes(t, a, b, 0, 64*pmtu)
	if rs := b.q.ResponderStats(); rs != (ResponderStats{}) || b.q.MRCStats().NACKsSent != 0 {
		t.Fatalf("in-order transfer drew NACKs: %+v", rs)
	}
}

func TestResponderConfigValidate(t *testing.T) {
	for _, c := range []struct {
		r     ResponderConfig
		field string
	}{
		{ResponderConfig{BitmapPSNs: -1}, "Responder.BitmapPSNs"},
		{ResponderConfig{BitmapPSNs: 255*128 + 1}, "Responder.BitmapPSNs"},
		{ResponderConfig{PacketBuffers: -1}, "Responder.PacketBuffers"},
		{ResponderConfig{PacketBuffers: 1 << 20}, "Responder.PacketBuffers"},
		{ResponderConfig{ImmSlots: -1}, "Responder.ImmSlots"},
		{ResponderConfig{ImmSlots: 1<<16 + 1}, "Responder.ImmSlots"},
		{ResponderConfig{AlwaysSkipCEStreak: -1}, "Responder.AlwaysSkipCEStreak"},
		{ResponderConfig{AlwaysSkipCEStreak: 256}, "Responder.AlwaysSkipCEStreak"},
	} {
		cfg := DefaultConfig()
		cfg.Responder = c.r
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "..") {
			t.Errorf("%+v: %v, want an error naming %s and its range", c.r, err, c.field)
		}
	}
	cfg := DefaultConfig()
	cfg.Responder = ResponderConfig{BitmapPSNs: 255 * 128, PacketBuffers: 1, ImmSlots: 1 << 16, AlwaysSkipCEStreak: 255}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// alwaysSkipRun delivers A's first 20 packets to B clean (on their own
// EVs), then the next streak packets CE-marked as if all had come on EV
// target, and returns B's SACK path feedback for each marked one and all
// of B's answers.
func alwaysSkipRun(t *testing.T, streak int, allMarked bool) (a, b *end, target uint32, ms []uint8) {
	cfg := smallCfg()
	cfg.Responder.AlwaysSkipCEStreak = streak
	a, b = newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 64*pmtu, 0)
	pa := a.drain(0, 0xffff)
	target = pa[0].tx.EV
	now := int64(1000)
	var ctrl []pkt
	for _, p := range pa[:20] {
		rx := p.rx()
		rx.CE = allMarked
		b.q.Receive(now, rx)
	}
	ctrl = append(ctrl, b.drain(now, 0xffff)...)
	for _, p := range pa[20 : 20+streak] {
		rx := p.rx()
		rx.EV, rx.CE = target, true
		b.q.Receive(now, rx)
		out := b.drain(now, 0xffff)
		if len(out) == 0 {
			t.Fatal("a CE arrival drew no SACK")
		}
		_, s, _, err := DecodeSACK(out[len(out)-1].data)
		if err != nil || s.EV != target {
			t.Fatalf("SACK %+v, %v", s, err)
		}
		ms = append(ms, s.M)
		ctrl = append(ctrl, out...)
	}
	a.recv(now+1000, ctrl...)
	return a, b, target, ms
}

// TestRespAlwaysSkipJudgement: with AlwaysSkipCEStreak 3, the third
// CE-marked arrival in a row on one EV, while the QP's other arrivals are
// clean, is answered with M = ALWAYS_SKIP (the first two with SKIP_ONCE),
// and the requester takes the EV to ASSUMED_BAD.
func TestRespAlwaysSkipJudgement(t *testing.T) {
	a, b, ev, ms := alwaysSkipRun(t, 3, false)
	if ms[0] != PathSkipOnce || ms[1] != PathSkipOnce || ms[2] != PathAlwaysSkip {
		t.Fatalf("SACK M values %v, want [SKIP_ONCE SKIP_ONCE ALWAYS_SKIP]", ms)
	}
	if n := b.q.ResponderStats().AlwaysSkips; n != 1 {
		t.Fatalf("AlwaysSkips %d", n)
	}
	if st, _ := a.q.EVState(ev); st != EVAssumedBad {
		t.Fatalf("requester EV after ALWAYS_SKIP: %v", st)
	}
}

// TestRespAlwaysSkipNotWhenAllMarked: when (nearly) every arrival of the
// QP is marked, the destination rather than one path is congested: no EV
// is judged bad.
func TestRespAlwaysSkipNotWhenAllMarked(t *testing.T) {
	a, b, ev, ms := alwaysSkipRun(t, 3, true)
	for _, m := range ms {
		if m != PathSkipOnce {
			t.Fatalf("SACK M values %v, want SKIP_ONCE only", ms)
		}
	}
	if n := b.q.ResponderStats().AlwaysSkips; n != 0 {
		t.Fatalf("AlwaysSkips %d", n)
	}
	if st, _ := a.q.EVState(ev); st == EVAssumedBad {
		t.Fatal("EV ASSUMED_BAD without a judgement")
	}
}

// TestRespAlwaysSkipOffByDefault: the default responder never judges.
func TestRespAlwaysSkipOffByDefault(t *testing.T) {
	if DefaultConfig().Responder.AlwaysSkipCEStreak != 0 {
		t.Fatal("ALWAYS_SKIP judgement on by default")
	}
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 64*pmtu, 0)
	pa := a.drain(0, 0xffff)
	for _, p := range pa {
		rx := p.rx()
		rx.EV, rx.CE = pa[0].tx.EV, true
		b.q.Receive(1000, rx)
		for _, c := range b.drain(1000, 0xffff) {
			if _, s, _, err := DecodeSACK(c.data); err == nil && s.M == PathAlwaysSkip {
				t.Fatal("default responder sent ALWAYS_SKIP")
			}
		}
	}
}
