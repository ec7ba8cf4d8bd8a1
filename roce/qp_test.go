package roce

import (
	"bytes"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// setupWrite registers n bytes of source (random) and destination memory
// and posts one write of them from a to b.
func (p *pair) setupWrite(n int, op verbs.Opcode, imm uint32) (src, dst []byte) {
	src = make([]byte, n)
	fill(src, 3)
	dst = make([]byte, n)
	sm := p.ma.Register(src)
	dm := p.mb.Register(dst)
	if err := p.a.Post(p.now, verbs.WorkRequest{ID: 42, Op: op, LocalKey: sm.Key, LocalVA: sm.VA, Length: uint64(n), RemoteKey: dm.Key, RemoteVA: dm.VA, Imm: imm}); err != nil {
		p.t.Fatal(err)
	}
	return src, dst
}

func TestInOrderTransfer(t *testing.T) {
	for _, rel := range []string{GoBackN, IRN} {
		t.Run(rel, func(t *testing.T) {
			c := noCC()
			c.Reliability = rel
			p := newPair(t, c)
			const n = 10*4096 + 123
			src, dst := p.setupWrite(n, verbs.OpWriteImm, 0xfeed)
			data := p.drain(p.a)
			if len(data) != 11 {
				t.Fatalf("%d packets", len(data))
			}
			ops := []uint8{}
			for _, w := range data {
				h := w.hdr(t, c.Reliability == IRN)
				ops = append(ops, h.Opcode)
				if w.tx.DSCP != verbs.DSCPRoCE || !w.tx.ECT || w.tx.DstHost != 1 || w.tx.EV != p.a.EV() {
					t.Fatalf("tx %+v", w.tx)
				}
				if h.DestQP != qpnB {
					t.Fatalf("dest QP %#x", h.DestQP)
				}
			}
			if ops[0] != OpWriteFirst || ops[5] != OpWriteMiddle || ops[10] != OpWriteLastImm {
				t.Fatalf("opcodes % x", ops)
			}
			var acks []wirePkt
			for _, w := range data {
				p.deliver(p.b, w, false)
				acks = append(acks, p.drain(p.b)...)
			}
			if !bytes.Equal(src, dst) {
				t.Fatal("data differs")
			}
			rc := p.b.PollCompletions(nil)
			if len(rc) != 1 || rc[0].Op != verbs.OpRecvImm || rc[0].Imm != 0xfeed || rc[0].Bytes != n || rc[0].QPN != qpnB {
				t.Fatalf("responder completions %+v", rc)
			}
			// AckEvery 4 over 11 packets, AckReq on the last: ACKs after 4, 8, 11.
			if len(acks) != 3 {
				t.Fatalf("%d ACKs", len(acks))
			}
			for _, w := range acks {
				if w.tx.DSCP != verbs.DSCPControl || w.tx.ECT || w.tx.WireLen != 20 {
					t.Fatalf("ack tx %+v", w.tx)
				}
			}
			p.deliverAll(p.a, acks)
			cc := p.a.PollCompletions(nil)
			if len(cc) != 1 || cc[0].WRID != 42 || cc[0].Status != verbs.StatusOK || cc[0].Bytes != n || cc[0].Op != verbs.OpWriteImm {
				t.Fatalf("requester completions %+v", cc)
			}
			if _, armed := p.a.Deadline(); armed {
				t.Fatal("timer armed with nothing outstanding")
			}
			s := p.b.Stats()
			if s.BytesPlaced != n || p.a.Stats().BytesCompleted != n || p.a.Stats().DataPacketsSent != 11 {
				t.Fatalf("stats %+v / %+v", s, p.a.Stats())
			}
		})
	}
}

func TestAckCoalescing(t *testing.T) {
	for _, every := range []int{1, 3, 8} {
		c := noCC()
		c.AckEvery = every
		p := newPair(t, c)
		p.setupWrite(20*4096, verbs.OpWrite, 0)
		data := p.drain(p.a)
		var acks []wirePkt
		for _, w := range data {
			p.deliver(p.b, w, false)
			acks = append(acks, p.drain(p.b)...)
		}
		want := (20 + every - 1) / every
		if len(acks) != want {
			t.Errorf("AckEvery %d: %d ACKs, want %d", every, len(acks), want)
		}
		last := acks[len(acks)-1].hdr(t, false)
		if last.PSN != (0xFFFFF0+19)&PSNMask || !last.AETH.IsACK() || last.AETH.MSN != 1 {
			t.Errorf("last ACK %+v", last.Header)
		}
	}
}

// dropOne sends a 10-packet message, drops packet k and delivers the rest
// one by one, returning the responder's control packets.
func dropOne(t *testing.T, p *pair, k int) (data, ctrl []wirePkt) {
	p.setupWrite(10*4096, verbs.OpWrite, 0)
	data = p.drain(p.a)
	for i, w := range data {
		if i == k {
			continue
		}
		p.deliver(p.b, w, false)
		ctrl = append(ctrl, p.drain(p.b)...)
	}
	return data, ctrl
}

func TestGBNDropRetransmitsFromPSN(t *testing.T) {
	p := newPair(t, noCC())
	data, ctrl := dropOne(t, p, 3)
	lost := data[3].hdr(t, false).PSN
	var naks int
	for _, w := range ctrl {
		h := w.hdr(t, false)
		if h.AETH.IsNAK() {
			naks++
			if h.AETH.Code() != NakPSNSeqError || h.PSN != lost {
				t.Fatalf("NAK %+v", h)
			}
		}
	}
	if naks != 1 {
		t.Fatalf("%d NAKs for one gap, want 1", naks)
	}
	p.deliverAll(p.a, ctrl)
	re := p.drain(p.a)
	got := psns(t, re, false)
	if len(got) != 7 || got[0] != lost || got[6] != data[9].hdr(t, false).PSN {
		t.Fatalf("retransmitted PSNs %x (lost %x)", got, lost)
	}
	if s := p.a.Stats(); s.Retransmissions != 7 || s.NacksReceived != 1 {
		t.Fatalf("stats %+v", s)
	}
	p.deliverAll(p.b, re)
	p.deliverAll(p.a, p.drain(p.b))
	if cc := p.a.PollCompletions(nil); len(cc) != 1 || cc[0].Status != verbs.StatusOK {
		t.Fatalf("completions %+v", cc)
	}
}

func TestIRNDropRetransmitsOnlyLost(t *testing.T) {
	p := newPair(t, irnCfg())
	src, dst := p.setupWrite(10*4096, verbs.OpWriteImm, 9)
	data := p.drain(p.a)
	var ctrl []wirePkt
	for i, w := range data {
		if i == 3 {
			continue
		}
		p.deliver(p.b, w, false)
		ctrl = append(ctrl, p.drain(p.b)...)
	}
	lost := data[3].hdr(t, true).PSN
	// ACK after 3 in-order packets? AckEvery 4: none; then one NACK per
	// out-of-order packet, each carrying cumulative ack = lost and its PSN.
	if len(ctrl) != 6 {
		t.Fatalf("%d control packets, want 6 NACKs", len(ctrl))
	}
	for i, w := range ctrl {
		h := w.hdr(t, true)
		if !h.AETH.IsNAK() || h.AETH.Code() != NakPSNSeqError || h.PSN != lost || h.AETH.MSN != data[4+i].hdr(t, true).PSN {
			t.Fatalf("NACK %d: %+v", i, h)
		}
	}
	if len(p.b.PollCompletions(nil)) != 0 {
		t.Fatal("WriteImm completed with a hole")
	}
	p.deliverAll(p.a, ctrl)
	re := p.drain(p.a)
	if got := psns(t, re, true); len(got) != 1 || got[0] != lost {
		t.Fatalf("retransmitted %x, want only %x", got, lost)
	}
	p.deliverAll(p.b, re)
	if !bytes.Equal(src, dst) {
		t.Fatal("data differs")
	}
	if rc := p.b.PollCompletions(nil); len(rc) != 1 || rc[0].Imm != 9 || rc[0].Bytes != 10*4096 {
		t.Fatalf("responder completions %+v", rc)
	}
	acks := p.drain(p.b)
	if len(acks) != 1 || !acks[0].hdr(t, true).AETH.IsACK() || acks[0].hdr(t, true).PSN != data[9].hdr(t, true).PSN {
		t.Fatalf("final ACK %+v", acks)
	}
	p.deliverAll(p.a, acks)
	if cc := p.a.PollCompletions(nil); len(cc) != 1 || cc[0].Status != verbs.StatusOK {
		t.Fatalf("completions %+v", cc)
	}
	if p.a.rel.(*irn).recovery {
		t.Fatal("still in recovery")
	}
	if s := p.a.Stats(); s.Retransmissions != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestIRNLostRetransmission: a lost retransmission is resent once a later
// first transmission is SACKed.
func TestIRNLostRetransmission(t *testing.T) {
	p := newPair(t, irnCfg())
	p.setupWrite(6*4096, verbs.OpWrite, 0)
	p.setupWrite(4*4096, verbs.OpWrite, 0) // second WR, posted before any send
	// Send the first 3 packets; drop packet 1.
	var first []wirePkt
	for range 3 {
		w, _ := p.sendOne(p.a)
		first = append(first, w)
	}
	p.deliver(p.b, first[0], false)
	p.deliver(p.b, first[2], false)
	p.deliverAll(p.a, p.drain(p.b)) // NACK(cum=1, sack=2)
	re, _ := p.sendOne(p.a)
	if re.hdr(t, true).PSN != first[1].hdr(t, true).PSN {
		t.Fatalf("retransmitted %x", re.hdr(t, true).PSN)
	}
	// The retransmission is lost too; the next new packet gets through.
	nw, _ := p.sendOne(p.a)
	p.deliver(p.b, nw, false)
	p.deliverAll(p.a, p.drain(p.b))
	re2, _ := p.sendOne(p.a)
	if re2.hdr(t, true).PSN != first[1].hdr(t, true).PSN {
		t.Fatalf("second retransmission %x", re2.hdr(t, true).PSN)
	}
	if p.a.Stats().Retransmissions != 2 || p.a.Stats().Timeouts != 0 {
		t.Fatalf("stats %+v", p.a.Stats())
	}
}

func TestTimeoutRetransmission(t *testing.T) {
	for _, rel := range []string{GoBackN, IRN} {
		t.Run(rel, func(t *testing.T) {
			c := noCC()
			c.Reliability = rel
			p := newPair(t, c)
			p.setupWrite(5*4096, verbs.OpWrite, 0)
			data := p.drain(p.a)
			dl, ok := p.a.Deadline()
			wantRTO := c.TimeoutNs
			if rel == IRN {
				wantRTO = c.IRN.RTOHighNs // 5 packets in flight > 3
			}
			if !ok || dl != data[0].txTime(p)+wantRTO {
				t.Fatalf("deadline %d %v", dl, ok)
			}
			p.a.Tick(dl - 1)
			if len(p.drain(p.a)) != 0 {
				t.Fatal("retransmitted before the timeout")
			}
			p.now = dl
			p.a.Tick(dl)
			re := p.drain(p.a)
			if got := psns(t, re, rel == IRN); len(got) != 5 || got[0] != data[0].hdr(t, rel == IRN).PSN {
				t.Fatalf("retransmitted %x", got)
			}
			if s := p.a.Stats(); s.Timeouts != 1 || s.Retransmissions != 5 {
				t.Fatalf("stats %+v", s)
			}
			p.deliverAll(p.b, re)
			p.deliverAll(p.a, p.drain(p.b))
			if cc := p.a.PollCompletions(nil); len(cc) != 1 || cc[0].Status != verbs.StatusOK {
				t.Fatalf("completions %+v", cc)
			}
		})
	}
}

// txTime is when the test sent w: the pair's clock starts at 0 and the
// first packet of a burst goes at once.
func (w wirePkt) txTime(p *pair) int64 { return 0 }

func TestIRNRTOLow(t *testing.T) {
	p := newPair(t, irnCfg())
	p.setupWrite(2*4096, verbs.OpWrite, 0)
	p.drain(p.a)
	if dl, _ := p.a.Deadline(); dl != p.a.cfg.IRN.RTOLowNs {
		t.Fatalf("deadline %d, want RTO_low", dl)
	}
}

func TestRetryExhaustion(t *testing.T) {
	c := noCC()
	c.RetryCount = 3
	p := newPair(t, c)
	p.setupWrite(4096, verbs.OpWrite, 0)
	p.setupWrite(4096, verbs.OpWrite, 0)
	p.drain(p.a)
	for i := 0; ; i++ {
		dl, ok := p.a.Deadline()
		if !ok {
			break
		}
		if i > 10 {
			t.Fatal("never gave up")
		}
		p.now = dl
		p.a.Tick(dl)
		p.drain(p.a)
	}
	if p.a.State() != verbs.QPError || p.a.Stats().Timeouts != 4 {
		t.Fatalf("state %v stats %+v", p.a.State(), p.a.Stats())
	}
	cc := p.a.PollCompletions(nil)
	if len(cc) != 2 || cc[0].Status != verbs.StatusRetryExceeded || cc[1].Status != verbs.StatusFlushed {
		t.Fatalf("completions %+v", cc)
	}
	if err := p.a.Post(p.now, verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: 1, LocalVA: 0x10000, Length: 1}); err != verbs.ErrQPError {
		t.Fatalf("Post in error: %v", err)
	}
}

func TestBadRemoteKey(t *testing.T) {
	for _, rel := range []string{GoBackN, IRN} {
		for _, badKey := range []bool{true, false} {
			c := noCC()
			c.Reliability = rel
			p := newPair(t, c)
			src := p.ma.Register(make([]byte, 3*4096))
			dst := p.mb.Register(make([]byte, 4096))
			// A good write first, then a bad one (key 99 or past the region end), then one more.
			wrs := []verbs.WorkRequest{
				{ID: 1, Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 4096, RemoteKey: dst.Key, RemoteVA: dst.VA},
				{ID: 2, Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 2 * 4096, RemoteKey: dst.Key, RemoteVA: dst.VA},
				{ID: 3, Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 10, RemoteKey: dst.Key, RemoteVA: dst.VA},
			}
			if badKey {
				wrs[1].RemoteKey = 99
			}
			for _, wr := range wrs {
				if err := p.a.Post(0, wr); err != nil {
					t.Fatal(err)
				}
			}
			p.deliverAll(p.b, p.drain(p.a))
			if p.b.State() != verbs.QPError {
				t.Fatalf("%s: responder state %v", rel, p.b.State())
			}
			ctrl := p.drain(p.b)
			var nak Packet
			for _, w := range ctrl {
				if h := w.hdr(t, rel == IRN); h.AETH.IsNAK() {
					nak = h
				}
			}
			if nak.AETH.Code() != NakRemoteAccess {
				t.Fatalf("%s: control %+v", rel, nak.Header)
			}
			p.deliverAll(p.a, ctrl)
			cc := p.a.PollCompletions(nil)
			if len(cc) != 3 || cc[0].Status != verbs.StatusOK || cc[1].Status != verbs.StatusRemoteAccess || cc[2].Status != verbs.StatusFlushed {
				t.Fatalf("%s bad key %v: completions %+v", rel, badKey, cc)
			}
			if p.a.State() != verbs.QPError {
				t.Fatal("requester not in error")
			}
		}
	}
}

func TestPostErrors(t *testing.T) {
	p := newPair(t, noCC())
	q := New(noCC(), p.ma, 5, 0)
	if err := q.Post(0, verbs.WorkRequest{}); err != verbs.ErrNotReady {
		t.Fatalf("unconnected: %v", err)
	}
	m := p.ma.Register(make([]byte, 100))
	cases := []struct {
		wr  verbs.WorkRequest
		err error
	}{
		{verbs.WorkRequest{Op: verbs.OpRecvImm, LocalKey: m.Key, LocalVA: m.VA, Length: 1}, verbs.ErrBadOpcode},
		{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: 77, LocalVA: m.VA, Length: 1}, verbs.ErrBadKey},
		{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: m.Key, LocalVA: m.VA, Length: 101}, verbs.ErrOutOfBounds},
		{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: m.Key, LocalVA: m.VA, Length: 1<<31 + 1}, verbs.ErrTooLong},
	}
	for _, c := range cases {
		if err := p.a.Post(0, c.wr); err != c.err {
			t.Errorf("%+v: %v, want %v", c.wr, err, c.err)
		}
	}
	if err := p.a.Connect(verbs.QPAttrs{QPN: qpnA}, verbs.QPAttrs{}); err != ErrState {
		t.Errorf("reconnect: %v", err)
	}
	if err := q.Connect(verbs.QPAttrs{QPN: 6}, verbs.QPAttrs{}); err != ErrQPN {
		t.Errorf("wrong QPN: %v", err)
	}
}

// TestZeroLengthAndVirtual: a zero-length write is one WRITE ONLY packet;
// a virtual source elides the payload and the responder only counts it.
func TestZeroLengthAndVirtual(t *testing.T) {
	p := newPair(t, noCC())
	src := p.ma.RegisterVirtual(1 << 20)
	dst := p.mb.Register(make([]byte, 1<<20))
	p.a.Post(0, verbs.WorkRequest{ID: 1, Op: verbs.OpWriteImm, LocalKey: src.Key, LocalVA: src.VA, RemoteKey: dst.Key, RemoteVA: dst.VA, Imm: 5})
	p.a.Post(0, verbs.WorkRequest{ID: 2, Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 1 << 20, RemoteKey: dst.Key, RemoteVA: dst.VA})
	data := p.drain(p.a)
	if len(data) != 257 || data[0].hdr(t, false).Opcode != OpWriteOnlyImm || data[0].tx.WireLen != 12+16+4+4 {
		t.Fatalf("%d packets, first %+v", len(data), data[0].tx)
	}
	if data[1].tx.Len != 28 || data[1].tx.WireLen != 28+4096+4 {
		t.Fatalf("elided tx %+v", data[1].tx)
	}
	p.deliverAll(p.b, data)
	if rc := p.b.PollCompletions(nil); len(rc) != 1 || rc[0].Bytes != 0 || rc[0].Imm != 5 {
		t.Fatalf("responder %+v", rc)
	}
	if p.b.Stats().BytesPlaced != 1<<20 {
		t.Fatalf("placed %d", p.b.Stats().BytesPlaced)
	}
	p.deliverAll(p.a, p.drain(p.b))
	if cc := p.a.PollCompletions(nil); len(cc) != 2 {
		t.Fatalf("completions %+v", cc)
	}
}

func TestEVLayout(t *testing.T) {
	c := noCC()
	c.Plane = 3
	c.SrcPort = 0xC0FF
	c.FlowLabel = 0xBEEF
	q := New(c, &verbs.Memory{}, 1, 0)
	if ev := q.EV(); ev&0xf != 3 || ev&0xffff != 0xC0F3 || ev>>16 != 0xBEEF {
		t.Fatalf("EV %#x", ev)
	}
	c.SrcPort, c.FlowLabel = 0, 0
	for qpn := uint32(1); qpn < 200; qpn++ {
		ev := New(c, &verbs.Memory{}, qpn, 7).EV()
		if sp := ev & 0xffff; sp < 49152 || ev&0xf != 3 || ev>>16 == 0 {
			t.Fatalf("derived EV %#x", ev)
		}
		if New(c, &verbs.Memory{}, qpn, 7).EV() != ev {
			t.Fatal("EV not deterministic")
		}
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, name := range Presets() {
		c := DefaultConfig()
		if err := c.SetPreset(name); err != nil {
			t.Fatal(err)
		}
		c.Reliability = IRN
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	bad := []struct {
		field string
		f     func(*Config)
	}{
		{"Plane", func(c *Config) { c.Plane = 16 }},
		{"PMTU", func(c *Config) { c.PMTU = 1500 }},
		{"LineRateBps", func(c *Config) { c.LineRateBps = 0 }},
		{"Reliability", func(c *Config) { c.Reliability = "sr" }},
		{"TimeoutNs", func(c *Config) { c.TimeoutNs = 0 }},
		{"RetryCount", func(c *Config) { c.RetryCount = 8 }},
		{"AckEvery", func(c *Config) { c.AckEvery = 0 }},
		{"CC", func(c *Config) { c.CC = "hpcc" }},
		{"DCQCN.G", func(c *Config) { c.DCQCN.G = 0 }},
		{"DCQCN.MinRateBps", func(c *Config) { c.DCQCN.MinRateBps = c.LineRateBps + 1 }},
		{"DCQCN.DecreaseIntervalNs", func(c *Config) { c.DCQCN.DecreaseIntervalNs = 0 }},
		{"IRN.RTOHighNs", func(c *Config) { c.Reliability = IRN; c.IRN.RTOHighNs = 1 }},
		{"IRN.BDPBytes", func(c *Config) { c.Reliability = IRN; c.IRN.BDPBytes = 100 }},
		{"Timely.THighNs", func(c *Config) { c.CC = CCTimely; c.Timely.THighNs = c.Timely.TLowNs }},
	}
	for _, b := range bad {
		c := DefaultConfig()
		b.f(&c)
		err := c.Validate()
		ce, ok := err.(*ConfigError)
		if !ok || ce.Field != b.field {
			t.Errorf("%s: got %v", b.field, err)
		}
	}
	if err := c.SetPreset("nope"); err == nil {
		t.Error("unknown preset accepted")
	}
}
