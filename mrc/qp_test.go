package mrc

import (
	"math/rand/v2"
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

const pmtu = 4096

func dataPkts(ps []pkt) (d, c []pkt) {
	for _, p := range ps {
		if IsDataOpcode(p.op()) {
			d = append(d, p)
		} else {
			c = append(c, p)
		}
	}
	return
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"Planes":        func(c *Config) { c.Planes = 17 },
		"EVsPerQP":      func(c *Config) { c.EVsPerQP = 100 },
		"ActiveSetSize": func(c *Config) { c.ActiveSetSize = 1000 },
		"MPR":           func(c *Config) { c.MPR = 0 },
		"Timeout":       func(c *Config) { c.Timeout = 25 },
		"RetryLinear":   func(c *Config) { c.RetryLinear = 8 },
		"RetryExp":      func(c *Config) { c.RetryExp = 26 },
		"PMTU":          func(c *Config) { c.PMTU = 8192 },
		"NSCC.Gamma":    func(c *Config) { c.NSCC.Gamma = 2 },
	} {
		c := DefaultConfig()
		mod(&c)
		err := c.Validate()
		if err == nil || !contains(err.Error(), "Config."+name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if d := DefaultConfig(); d.rto() != 32768 || d.activeSetSize() != 100 {
		t.Errorf("default RTO %d, active set %d", d.rto(), d.activeSetSize())
	}
	d := DefaultConfig()
	d.LinkBps, d.BaseRTT = 100e9, 5000 // BDP 62.5 kB ≈ 15 packets
	if n := d.activeSetSize(); n != 30 {
		t.Errorf("active set for a 100G/5µs BDP: %d", n)
	}
	d.RTO = 12345
	if d.rto() != 12345 {
		t.Error("RTO override")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestPostErrors(t *testing.T) {
	var mem verbs.Memory
	mr := mem.Register(make([]byte, 100))
	q := New(DefaultConfig(), &mem, 1, 1)
	wr := verbs.WorkRequest{LocalKey: mr.Key, LocalVA: mr.VA, Length: 10, RemoteKey: 1, RemoteVA: 1}
	if err := q.Post(0, wr); err != verbs.ErrNotReady {
		t.Fatal(err)
	}
	q.Connect(verbs.QPAttrs{QPN: 1}, verbs.QPAttrs{QPN: 2})
	if err := q.Connect(verbs.QPAttrs{QPN: 1}, verbs.QPAttrs{QPN: 2}); err != ErrConnected {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod func(*verbs.WorkRequest)
		err error
	}{
		{func(w *verbs.WorkRequest) { w.Op = verbs.OpRecvImm }, verbs.ErrBadOpcode},
		{func(w *verbs.WorkRequest) { w.LocalKey = 9 }, verbs.ErrBadKey},
		{func(w *verbs.WorkRequest) { w.Length = 101 }, verbs.ErrOutOfBounds},
		{func(w *verbs.WorkRequest) { w.Length = 1<<31 + 1 }, verbs.ErrTooLong},
		{func(w *verbs.WorkRequest) {}, nil},
	} {
		w := wr
		c.mod(&w)
		if err := q.Post(0, w); err != c.err {
			t.Errorf("Post: %v, want %v", err, c.err)
		}
	}
}

func TestInOrderTransfer(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 7, verbs.OpWrite, 0, 10*pmtu+100, 0)
	a.write(b, 8, verbs.OpWriteImm, 64<<10, 3000, 0x1234)
	a.write(b, 9, verbs.OpWrite, 128<<10, 0, 0) // zero-length
	pa := a.drain(0, 0xf)
	if len(pa) != 13 {
		t.Fatalf("%d packets", len(pa))
	}
	ops := []uint8{OpWriteFirst, OpWriteMiddle, OpWriteMiddle, OpWriteMiddle, OpWriteMiddle, OpWriteMiddle,
		OpWriteMiddle, OpWriteMiddle, OpWriteMiddle, OpWriteMiddle, OpWriteLast, OpWriteOnlyImm, OpWriteOnly}
	var h DataHeader
	planes := map[int]int{}
	for i, p := range pa {
		n, err := DecodeData(p.data, &h)
		if err != nil || h.BTH.Opcode != ops[i] || h.BTH.PSN != uint32(1000+i) || h.BTH.DestQP != qpnB || h.BTH.Rtx {
			t.Fatalf("packet %d: %+v %v", i, h, err)
		}
		if i < 11 && (h.RETH.VA != b.mr.VA+uint64(i*pmtu) || h.RETH.DMALen != 10*pmtu+100) {
			t.Fatalf("packet %d RETH %+v", i, h.RETH)
		}
		if p.tx.DSCP != verbs.DSCPTrimmable || !p.tx.ECT || p.tx.DstHost != 1 || p.tx.WireLen != n+int(min(uint64(pmtu), 10*pmtu+100-uint64(i*pmtu)))+4 && i < 11 {
			t.Fatalf("packet %d tx %+v", i, p.tx)
		}
		planes[evPlane(p.tx.EV)]++
		if qp, _ := verbs.DestQP(p.data); qp != qpnB {
			t.Fatal("DestQP")
		}
	}
	if len(planes) != 4 {
		t.Fatalf("not sprayed over 4 planes: %v", planes)
	}
	if !pa[10].bth(t).AckReq || pa[5].bth(t).AckReq {
		t.Fatal("AckReq should be on message ends only")
	}
	b.recv(1000, pa...)
	pb := b.drain(1000, 0xf)
	if len(pb) == 0 {
		t.Fatal("no SACKs")
	}
	for _, p := range pb {
		if p.op() != OpSACK || p.tx.DSCP != verbs.DSCPControl || p.tx.ECT {
			t.Fatalf("control packet %+v op %#x", p.tx, p.op())
		}
	}
	wantComps(t, b.comps(), verbs.Completion{QPN: qpnB, Op: verbs.OpRecvImm, Bytes: 3000, Imm: 0x1234})
	a.recv(2000, pb...)
	wantComps(t, a.comps(),
		verbs.Completion{WRID: 7, QPN: qpnA, Op: verbs.OpWrite, Bytes: 10*pmtu + 100},
		verbs.Completion{WRID: 8, QPN: qpnA, Op: verbs.OpWriteImm, Bytes: 3000},
		verbs.Completion{WRID: 9, QPN: qpnA, Op: verbs.OpWrite})
	sameBytes(t, a, b, 0, 10*pmtu+100)
	sameBytes(t, a, b, 64<<10, 3000)
	if _, ok := a.q.Deadline(); ok {
		t.Fatal("timers left armed after completion")
	}
	st := a.q.Stats()
	if st.DataPacketsSent != 13 || st.Retransmissions != 0 || st.BytesCompleted != 10*pmtu+100+3000 || st.RTTSamples == 0 {
		t.Fatalf("requester stats %+v", st)
	}
	if bs := b.q.Stats(); bs.BytesPlaced != 10*pmtu+100+3000 {
		t.Fatalf("responder stats %+v", bs)
	}
}

func TestReorderAndDuplicates(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 40*pmtu, 0)
	a.write(b, 2, verbs.OpWriteImm, 200<<10, pmtu, 5)
	pa := a.drain(0, 0xf)
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(pa), func(i, j int) { pa[i], pa[j] = pa[j], pa[i] })
	b.recv(100, pa[:20]...)
	b.recv(100, pa[3]) // duplicate above ePSN (unless it advanced ePSN)
	b.recv(100, pa[20:]...)
	b.recv(100, pa[0]) // duplicate below ePSN now
	if st := b.q.Stats(); st.DuplicatesReceived != 2 || st.BytesPlaced != 41*pmtu {
		t.Fatalf("responder %+v", st)
	}
	pb := b.drain(200, 0xf)
	var acks int
	for _, p := range pb {
		if p.op() == OpAck {
			acks++
		}
	}
	if acks != 1 {
		t.Fatalf("want one Transport ACK for the duplicate below ePSN, got %d", acks)
	}
	wantComps(t, b.comps(), verbs.Completion{QPN: qpnB, Op: verbs.OpRecvImm, Bytes: pmtu, Imm: 5})
	a.recv(300, pb...)
	if c := a.comps(); len(c) != 2 || c[0].WRID != 1 || c[1].WRID != 2 {
		t.Fatalf("requester completions %+v", c)
	}
	sameBytes(t, a, b, 0, 40*pmtu)
	sameBytes(t, a, b, 200<<10, pmtu)
}

// lossTest drops data packet idx of a 16-packet message once and checks
// recovery by timeout (too few later packets for the fast-loss rule; the
// tail-loss probe, which would come first, is off: tlp_test.go tests it).
func lossTest(t *testing.T, idx int) {
	cfg := smallCfg()
	cfg.TLPFactor = 0
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 16*pmtu, 0)
	pa := a.drain(0, 0xf)
	lost := pa[idx]
	b.recv(1000, append(append([]pkt{}, pa[:idx]...), pa[idx+1:]...)...)
	a.recv(2000, b.drain(1000, 0xf)...)
	if c := a.comps(); len(c) != 0 {
		t.Fatalf("completed despite loss: %+v", c)
	}
	dl, ok := a.q.Deadline()
	if !ok || dl != a.q.rto {
		t.Fatalf("deadline %d %v, want %d", dl, ok, a.q.rto)
	}
	a.q.Tick(dl)
	if a.q.Stats().Timeouts != 1 {
		t.Fatalf("timeouts %d", a.q.Stats().Timeouts)
	}
	if s, _ := a.q.EVState(lost.tx.EV); s != EVAssumedBad {
		t.Fatalf("timed-out EV is %v", s)
	}
	rt := a.drain(dl, 0xf)
	if len(rt) != 1 {
		t.Fatalf("%d retransmissions", len(rt))
	}
	h := rt[0].bth(t)
	if h.PSN != lost.bth(t).PSN || !h.Rtx || rt[0].tx.DSCP != verbs.DSCPTrimmableRetx || rt[0].tx.EV == lost.tx.EV {
		t.Fatalf("retransmission %+v tx %+v (lost EV %#x)", h, rt[0].tx, lost.tx.EV)
	}
	if evPlane(rt[0].tx.EV) == evPlane(lost.tx.EV) {
		t.Fatal("retransmission after a timeout stayed on the failed plane")
	}
	b.recv(dl+1000, rt...)
	a.recv(dl+2000, b.drain(dl+1000, 0xf)...)
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Bytes: 16 * pmtu})
	sameBytes(t, a, b, 0, 16*pmtu)
}

func TestLossFirst(t *testing.T)  { lossTest(t, 0) }
func TestLossMiddle(t *testing.T) { lossTest(t, 7) }
func TestLossLast(t *testing.T)   { lossTest(t, 15) }

func TestFastLossRule(t *testing.T) {
	cfg := smallCfg()
	cfg.SleekFactor = 0.01 // threshold = SleekMinPackets (5)
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 40*pmtu, 0)
	pa := a.drain(0, 0xf)
	b.recv(1000, pa[1:]...)
	a.recv(2000, b.drain(1000, 0xf)...)
	rt, _ := dataPkts(a.drain(2000, 0xf))
	if len(rt) != 1 || rt[0].bth(t).PSN != 1000 || !rt[0].bth(t).Rtx {
		t.Fatalf("fast retransmit: %d packets", len(rt))
	}
	if a.q.MRCStats().FastRetransmits != 1 || a.q.Stats().Timeouts != 0 {
		t.Fatalf("%+v", a.q.MRCStats())
	}
	// One silent loss is below EVLossThreshold: the EV stays usable.
	if s, _ := a.q.EVState(pa[0].tx.EV); s != EVGood {
		t.Fatalf("EV after one fast loss: %v", s)
	}
	b.recv(3000, rt...)
	a.recv(4000, b.drain(3000, 0xf)...)
	if c := a.comps(); len(c) != 1 || c[0].Status != verbs.StatusOK {
		t.Fatalf("%+v", c)
	}
}

func TestSACKLoss(t *testing.T) {
	cfg := smallCfg()
	cfg.TLPFactor = 0 // the timeout path (the tail-loss probe would come first)
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 32*pmtu, 0)
	b.recv(1000, a.drain(0, 0xf)...)
	pb := b.drain(1000, 0xf)
	if len(pb) < 3 {
		t.Fatalf("%d SACKs", len(pb))
	}
	// Lose all SACKs but the last: it carries the cumulative ack.
	a.recv(2000, pb[len(pb)-1])
	if c := a.comps(); len(c) != 1 {
		t.Fatalf("completion from the last SACK: %+v", c)
	}
	// Now lose every SACK of a second message: timeout, retransmission,
	// duplicate → Transport ACK + SACK.
	a.write(b, 2, verbs.OpWrite, 0, 2*pmtu, 0)
	b.recv(3000, a.drain(3000, 0xf)...)
	b.drain(3000, 0xf)
	dl, _ := a.q.Deadline()
	a.q.Tick(dl)
	rt := a.drain(dl, 0xf)
	if len(rt) != 2 {
		t.Fatalf("%d retransmissions", len(rt))
	}
	b.recv(dl+1000, rt...)
	pb = b.drain(dl+1000, 0xf)
	var ack, sack int
	for _, p := range pb {
		switch p.op() {
		case OpAck:
			ack++
		case OpSACK:
			sack++
		}
	}
	if ack != 2 || sack != 2 {
		t.Fatalf("duplicates below ePSN: %d ACKs %d SACKs", ack, sack)
	}
	a.recv(dl+2000, pb...)
	if c := a.comps(); len(c) != 1 || c[0].WRID != 2 {
		t.Fatalf("%+v", c)
	}
}

func trim(p pkt, lastHop bool) *verbs.Rx {
	rx := p.rx()
	rx.Data = rx.Data[:26]
	rx.WireLen = 26
	rx.Trimmed, rx.LastHop = true, lastHop
	return rx
}

func TestTrimmedNACK(t *testing.T) {
	for _, lastHop := range []bool{false, true} {
		a, b := newPair(t, smallCfg(), 1<<20)
		a.write(b, 1, verbs.OpWrite, 0, 8*pmtu, 0)
		pa := a.drain(0, 0xf)
		cw0 := a.q.cwnd()
		b.q.Receive(1000, trim(pa[2], lastHop))
		b.recv(1000, pa[3:]...)
		b.recv(1000, pa[:2]...)
		pb := b.drain(1000, 0xf)
		var nack pkt
		for _, p := range pb {
			if p.op() == OpNACK {
				nack = p
			}
		}
		_, n, err := DecodeNACK(nack.data)
		want := NackTrimmed
		if lastHop {
			want = NackTrimmedLastHop
		}
		if err != nil || n.Code != want || n.PSN != 1002 || n.EV != pa[2].tx.EV || nack.tx.EV != pa[2].tx.EV {
			t.Fatalf("NACK %+v %v", n, err)
		}
		if b.q.Stats().TrimmedReceived != 1 {
			t.Fatal("TrimmedReceived")
		}
		a.q.Receive(2000, nack.rx())
		rt := a.drain(2000, 0xf)
		if len(rt) != 1 {
			t.Fatalf("fast retransmit on trim: %d packets", len(rt))
		}
		h := rt[0].bth(t)
		if h.PSN != 1002 || !h.Rtx || rt[0].tx.EV == pa[2].tx.EV || rt[0].tx.DSCP != verbs.DSCPTrimmableRetx {
			t.Fatalf("retransmission %+v %+v", h, rt[0].tx)
		}
		s, _ := a.q.EVState(pa[2].tx.EV)
		if lastHop && s != EVGood || !lastHop && s != EVSkip {
			t.Fatalf("lastHop=%v: EV %v", lastHop, s)
		}
		if a.q.cwnd() >= cw0 {
			t.Fatalf("no NSCC trim reaction: cwnd %d → %d", cw0, a.q.cwnd())
		}
		b.recv(3000, rt...)
		for _, p := range pb {
			if p.op() == OpSACK {
				a.recv(3000, p)
			}
		}
		a.recv(4000, b.drain(3000, 0xf)...)
		if c := a.comps(); len(c) != 1 || c[0].Status != verbs.StatusOK {
			t.Fatalf("%+v", c)
		}
		sameBytes(t, a, b, 0, 8*pmtu)
		if a.q.Stats().Timeouts != 0 {
			t.Fatal("timeout")
		}
	}
}

func TestOutOfWindowNACK(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	p := a.drain(0, 0xf)[0]
	// Rewrite the PSN to ePSN + window.
	psn := ib.PSNAdd(1000, 4*128)
	p.data[9], p.data[10], p.data[11] = byte(psn>>16), byte(psn>>8), byte(psn)
	b.recv(100, p)
	pb := b.drain(100, 0xf)
	if len(pb) != 1 || pb[0].op() != OpNACK {
		t.Fatalf("%d packets", len(pb))
	}
	_, n, _ := DecodeNACK(pb[0].data)
	if n.Code != NackPSNOutOfWindow || n.PSN != psn {
		t.Fatalf("%+v", n)
	}
	if b.q.Stats().BytesPlaced != 0 {
		t.Fatal("placed an out-of-window packet")
	}
	// At the requester a NACK for a PSN it never sent is ignored.
	a.recv(200, pb[0])
	if a.q.State() != verbs.QPReady {
		t.Fatal("QP failed")
	}
}

// twoPacketsOut: A (retry limit 1, no tail-loss probe) has sent PSNs 1000
// and 1001 of one Write to B.
func twoPacketsOut(t *testing.T) (*end, []pkt) {
	t.Helper()
	cfg := smallCfg()
	cfg.RetryLinear, cfg.RetryExp = 1, 0
	cfg.TLPFactor = 0
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 2*pmtu, 0)
	sent := a.drain(0, 0xf)
	if len(sent) != 2 {
		t.Fatalf("%d packets sent, want 2", len(sent))
	}
	return a, sent
}

// noBitmapNACK is B's NACK NO_BITMAP of psn, reflecting ev.
func noBitmapNACK(psn, ev uint32) pkt {
	buf := make([]byte, NACKLen)
	EncodeNACK(buf, BTH{DestQP: qpnA, PSN: psn}, &NETH{Code: NackNoBitmap, EV: ev, PSN: psn})
	return pkt{tx: verbs.Tx{EV: ev, WireLen: NACKLen}, data: buf}
}

// Resource NACKs (NO_BITMAP …): a refused packet at cack+1 — the one the
// cumulative ack waits for — is sent again at once; one further up is held
// until the cumulative ack moves, and its timer firing meanwhile releases
// it without counting a retry; the NACKs count toward the packet's own
// limit, restarting when cack moves past a refusal.
func TestNACKRetry(t *testing.T) {
	a, sent := twoPacketsOut(t)
	nack := noBitmapNACK
	// PSN 1001 is refused while 1000 is outstanding: held.
	a.recv(10, nack(1001, sent[1].tx.EV))
	if rt := a.drain(10, 0xf); len(rt) != 0 {
		t.Fatalf("%d packets sent at once after NO_BITMAP above cack+1; want the packet held", len(rt))
	}
	if s, _ := a.q.EVState(sent[1].tx.EV); s != EVGood {
		t.Fatal("NO_BITMAP penalised the EV")
	}
	// 1000 is acknowledged: cack moves and 1001 goes again.
	a.recv(20, sackWithM(t, sent[0].tx.EV, PathNone, false, 1000))
	rt := a.drain(20, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != 1001 || !rt[0].bth(t).Rtx {
		t.Fatalf("after cack moved: %d packets, want 1001 again", len(rt))
	}
	// Now 1001 is cack+1: a NACK sends it again at once (its count
	// restarted when cack moved, so this is its first).
	a.recv(30, nack(1001, rt[0].tx.EV))
	rt = a.drain(30, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != 1001 {
		t.Fatalf("NO_BITMAP at cack+1: %d packets sent, want 1001 at once", len(rt))
	}
	if a.q.State() != verbs.QPReady {
		t.Fatal("one NACK since cack moved exceeded a limit of 1")
	}
	// A second refusal with no progress exceeds the limit of 1.
	a.recv(40, nack(1001, rt[0].tx.EV))
	if a.q.State() != verbs.QPError {
		t.Fatal("retry limit not enforced for NACKs")
	}
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded})
}

// A held packet's timer releases it and counts no retry: the QP is
// withholding it, nothing was lost.
func TestHeldPacketTimerCountsNothing(t *testing.T) {
	a, sent := twoPacketsOut(t)
	a.recv(10, noBitmapNACK(1001, sent[1].tx.EV))
	// 1000 is acknowledged by the bitmap only (cack stays): 1001 stays held.
	a.recv(20, sack(t, SETH{EV: sent[0].tx.EV, CackPSN: 999, SackOffset: 1, Bitmap: 1, MPR: 1}, CCState{}))
	if rt := a.drain(20, 0xf); len(rt) != 0 {
		t.Fatalf("%d packets sent with cack unmoved: %v", len(rt), psns(t, rt))
	}
	at, ok := a.q.Deadline()
	if !ok {
		t.Fatalf("no timer: %+v", a.q.recs[1001&a.q.recMask])
	}
	a.q.Tick(at)
	if a.q.State() != verbs.QPReady {
		t.Fatalf("a held packet's timer failed the QP: %v", a.q.Err())
	}
	if st := a.q.Stats(); st.Timeouts != 0 {
		t.Fatalf("%d timeouts counted for a held packet", st.Timeouts)
	}
	rt := a.drain(at, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != 1001 {
		t.Fatalf("timer of the held packet sent %d packets, want 1001", len(rt))
	}
}

func TestRetryExhaustion(t *testing.T) {
	cfg := smallCfg()
	cfg.RetryLinear, cfg.RetryExp = 2, 2
	cfg.RetryScope = RetryPacket // the per-packet schedule (spec_req_test.go has the connection's)
	cfg.ProbeInterval = 1 << 40  // keep probe deadlines out of the timer gaps
	cfg.TLPFactor = 0            // … and the tail-loss probe
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 3*pmtu, 0)
	a.write(b, 2, verbs.OpWriteImm, 64<<10, pmtu, 1)
	a.write(b, 3, verbs.OpWrite, 128<<10, pmtu, 0)
	now := int64(0)
	var gaps []int64
	last := int64(0)
	for i := 0; i < 100 && a.q.State() == verbs.QPReady; i++ {
		a.drain(now, 0xf) // everything is lost
		dl, ok := a.q.Deadline()
		if !ok {
			t.Fatal("no deadline")
		}
		if dl > last {
			gaps = append(gaps, dl-last)
			last = dl
		}
		now = dl
		a.q.Tick(now)
	}
	if a.q.State() != verbs.QPError {
		t.Fatal("QP did not fail")
	}
	rto := a.q.rto
	want := []int64{rto, rto, rto, 2 * rto, 4 * rto}
	if len(gaps) != len(want) {
		t.Fatalf("timer gaps %v, want %v", gaps, want)
	}
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("timer gaps %v, want %v", gaps, want)
		}
	}
	wantComps(t, a.comps(),
		verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded},
		verbs.Completion{WRID: 2, QPN: qpnA, Op: verbs.OpWriteImm, Status: verbs.StatusFlushed},
		verbs.Completion{WRID: 3, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusFlushed})
	if err := a.q.Post(now, verbs.WorkRequest{LocalKey: 1, LocalVA: a.mr.VA, Length: 1}); err != verbs.ErrQPError {
		t.Fatal(err)
	}
	if _, ok := a.q.Send(now, 0xf, a.buf); ok {
		t.Fatal("sent in ERROR")
	}
	if _, ok := a.q.Deadline(); ok {
		t.Fatal("deadline in ERROR")
	}
}

func TestBadRKey(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	a.q.Post(0, verbs.WorkRequest{ID: 2, LocalKey: a.mr.Key, LocalVA: a.mr.VA, Length: 2 * pmtu, RemoteKey: 77, RemoteVA: 0x10000})
	a.q.Post(0, verbs.WorkRequest{ID: 3, LocalKey: a.mr.Key, LocalVA: a.mr.VA, Length: 10})
	runUntilIdle(a, b, 0, nil)
	wantComps(t, a.comps(),
		verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Bytes: pmtu},
		verbs.Completion{WRID: 2, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRemoteAccess},
		verbs.Completion{WRID: 3, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusFlushed})
	if a.q.State() != verbs.QPError || b.q.State() != verbs.QPReady {
		t.Fatal("states")
	}
	// Out of range of a valid key.
	a, b = newPair(t, smallCfg(), 1<<20)
	a.q.Post(0, verbs.WorkRequest{ID: 4, LocalKey: a.mr.Key, LocalVA: a.mr.VA, Length: 2 * pmtu, RemoteKey: b.mr.Key, RemoteVA: b.mr.VA + 1<<20 - pmtu})
	runUntilIdle(a, b, 0, nil)
	wantComps(t, a.comps(), verbs.Completion{WRID: 4, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRemoteAccess})
	// Out of range of the key the previous packet was written with (the
	// responder remembers that region: its bounds must still be checked).
	a, b = newPair(t, smallCfg(), 1<<20)
	a.write(b, 5, verbs.OpWrite, 0, pmtu, 0)
	a.q.Post(0, verbs.WorkRequest{ID: 6, LocalKey: a.mr.Key, LocalVA: a.mr.VA, Length: 2 * pmtu, RemoteKey: b.mr.Key, RemoteVA: b.mr.VA + 1<<20 - pmtu})
	runUntilIdle(a, b, 0, nil)
	wantComps(t, a.comps(),
		verbs.Completion{WRID: 5, QPN: qpnA, Op: verbs.OpWrite, Bytes: pmtu},
		verbs.Completion{WRID: 6, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRemoteAccess})
}

func TestUnexpEvent(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	p := a.drain(0, 0xf)[0]
	rx := p.rx()
	rx.WireLen += 100 // payload beyond PMTU
	b.q.Receive(10, rx)
	pb := b.drain(10, 0xf)
	_, n, err := DecodeNACK(pb[0].data)
	if err != nil || n.Code != NackUnexpEvent {
		t.Fatalf("%+v %v", n, err)
	}
	a.recv(20, pb...)
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRemoteOp})
}

func TestWriteImmOrdering(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 8*pmtu, 0)
	a.write(b, 2, verbs.OpWriteImm, 64<<10, 2*pmtu, 11)
	a.write(b, 3, verbs.OpWriteImm, 128<<10, 100, 12)
	pa := a.drain(0, 0xf) // 8 + 2 + 1
	// WriteImms first, then the Write's packets in reverse.
	b.recv(10, pa[8:]...)
	if c := b.comps(); len(c) != 0 {
		t.Fatalf("RecvImm before the earlier Write was placed: %+v", c)
	}
	for i := 7; i > 0; i-- {
		b.recv(20, pa[i])
	}
	if c := b.comps(); len(c) != 0 {
		t.Fatalf("RecvImm early: %+v", c)
	}
	b.recv(30, pa[0])
	wantComps(t, b.comps(),
		verbs.Completion{QPN: qpnB, Op: verbs.OpRecvImm, Bytes: 2 * pmtu, Imm: 11},
		verbs.Completion{QPN: qpnB, Op: verbs.OpRecvImm, Bytes: 100, Imm: 12})
	sameBytes(t, a, b, 0, 8*pmtu)
}

func TestMaxWImm(t *testing.T) {
	cfg := smallCfg()
	cfg.MaxWImm = 2
	a, b := newPair(t, cfg, 1<<20)
	for i := 0; i < 5; i++ {
		a.write(b, uint64(i), verbs.OpWriteImm, uint64(i)*pmtu, 100, uint32(i))
	}
	if pa := a.drain(0, 0xf); len(pa) != 2 {
		t.Fatalf("%d WriteImms in flight, limit 2", len(pa))
	}
	runUntilIdle(a, b, 0, nil)
	if c := a.comps(); len(c) != 5 {
		t.Fatalf("%d completions", len(c))
	}
	if c := b.comps(); len(c) != 5 || c[4].Imm != 4 {
		t.Fatalf("%+v", c)
	}
}

func TestMPRWindow(t *testing.T) {
	cfg := smallCfg()
	cfg.MPR = 1
	cfg.DisableCC = true
	cfg.NSCC.MaxCwnd = 1 << 30
	a, b := newPair(t, cfg, 4<<20)
	a.write(b, 1, verbs.OpWrite, 0, 300*pmtu, 0)
	pa := a.drain(0, 0xf)
	if len(pa) != 128 {
		t.Fatalf("sent %d packets beyond cack, MPR 128", len(pa))
	}
	if !pa[127].bth(t).AckReq {
		t.Fatal("window-closing packet lacks AckReq")
	}
	runUntilIdle(a, b, 0, nil)
	if c := a.comps(); len(c) != 1 {
		t.Fatal("not completed")
	}
	sameBytes(t, a, b, 0, 300*pmtu)
}

func TestPSNWrap(t *testing.T) {
	cfg := smallCfg()
	mk := func(qpn uint32, seed uint64) *end {
		e := &end{t: t, mem: &verbs.Memory{}, buf: make([]byte, verbs.MaxTxBytes)}
		e.mr = e.mem.Register(make([]byte, 1<<20))
		e.q = New(cfg, e.mem, qpn, seed)
		return e
	}
	a, b := mk(qpnA, 1), mk(qpnB, 2)
	for i := range a.mr.Buf {
		a.mr.Buf[i] = byte(i * 7)
	}
	aa := verbs.QPAttrs{Host: 0, QPN: qpnA, InitialPSN: ib.PSNMask - 5}
	ba := verbs.QPAttrs{Host: 1, QPN: qpnB, InitialPSN: 3}
	a.q.Connect(aa, ba)
	b.q.Connect(ba, aa)
	a.write(b, 1, verbs.OpWriteImm, 0, 20*pmtu, 9)
	pa := a.drain(0, 0xf)
	b.recv(10, pa[19], pa[3], pa[10])
	b.recv(10, pa...)
	a.recv(20, b.drain(20, 0xf)...)
	if c := a.comps(); len(c) != 1 || c[0].Status != verbs.StatusOK {
		t.Fatalf("%+v", c)
	}
	if c := b.comps(); len(c) != 1 {
		t.Fatal("RecvImm")
	}
	sameBytes(t, a, b, 0, 20*pmtu)
}

func TestVirtualRegionElided(t *testing.T) {
	var ma, mb verbs.Memory
	src := ma.RegisterVirtual(1 << 30)
	dst := mb.RegisterVirtual(1 << 30)
	a := &end{t: t, mem: &ma, mr: src, buf: make([]byte, verbs.MaxTxBytes), q: New(smallCfg(), &ma, qpnA, 1)}
	b := &end{t: t, mem: &mb, mr: dst, buf: make([]byte, verbs.MaxTxBytes), q: New(smallCfg(), &mb, qpnB, 2)}
	aa := verbs.QPAttrs{QPN: qpnA}
	ba := verbs.QPAttrs{Host: 1, QPN: qpnB}
	a.q.Connect(aa, ba)
	b.q.Connect(ba, aa)
	a.write(b, 1, verbs.OpWrite, 0, 10*pmtu, 0)
	pa := a.drain(0, 0xf)
	if pa[0].tx.Len != BTHLen+METHLen+TSETHLen+RETHLen || pa[0].tx.WireLen != pa[0].tx.Len+pmtu+ICRCLen {
		t.Fatalf("elided tx %+v", pa[0].tx)
	}
	runUntilIdle(a, b, 0, nil)
	if c := a.comps(); len(c) != 1 || b.q.Stats().BytesPlaced != 10*pmtu {
		t.Fatal("elided transfer")
	}
	// Stored payload sent to a virtual region: accounted, not copied.
	a2, b2 := newPair(t, smallCfg(), 1<<20)
	v := b2.mem.RegisterVirtual(1 << 20)
	a2.q.Post(0, verbs.WorkRequest{ID: 1, LocalKey: a2.mr.Key, LocalVA: a2.mr.VA, Length: 3 * pmtu, RemoteKey: v.Key, RemoteVA: v.VA})
	runUntilIdle(a2, b2, 0, nil)
	if c := a2.comps(); len(c) != 1 || c[0].Status != verbs.StatusOK {
		t.Fatalf("%+v", c)
	}
}

// ---------------------------------------------------------------- EV states

func activeOf(q *QP, plane int) []uint32 {
	var out []uint32
	for _, i := range q.evs.planes[plane].active {
		out = append(out, q.evs.evs[i].ev)
	}
	return out
}

func TestECNEchoSkip(t *testing.T) {
	cfg := smallCfg()
	cfg.MPR = 4 // two rotations of a plane's active set need more than 128 PSNs in flight
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 2*pmtu, 0)
	pa := a.drain(0, 0xf)
	rx := pa[0].rx()
	rx.CE = true
	b.q.Receive(10, rx)
	pb := b.drain(10, 0xf)
	if len(pb) != 1 {
		t.Fatal("CE arrival must trigger a SACK")
	}
	_, s, _, _ := DecodeSACK(pb[0].data)
	if s.M != PathSkipOnce || s.EV != pa[0].tx.EV || pb[0].tx.EV != pa[0].tx.EV {
		t.Fatalf("SACK %+v", s)
	}
	a.recv(20, pb...)
	if st, _ := a.q.EVState(pa[0].tx.EV); st != EVSkip {
		t.Fatalf("EV %v after ECN echo", st)
	}
	if b.q.Stats().ECNMarksReceived != 1 {
		t.Fatal("ECNMarksReceived")
	}
	// SKIP → GOOD at the next rotation of its plane: spray enough packets.
	plane := evPlane(pa[0].tx.EV)
	n := len(activeOf(a.q, plane))
	a.write(b, 2, verbs.OpWrite, 0, uint64(8*n)*pmtu, 0)
	seen := false
	for _, p := range a.drain(30, 0xf) {
		if p.tx.EV == pa[0].tx.EV {
			seen = true
		}
	}
	if st, _ := a.q.EVState(pa[0].tx.EV); st != EVGood || !seen {
		t.Fatalf("EV %v after rotation (used again: %v)", st, seen)
	}
}

func sackWithM(t *testing.T, ev uint32, m uint8, probe bool, cack uint32) pkt {
	buf := make([]byte, SACKLen)
	s := SETH{M: m, EV: ev, CackPSN: cack, SackOffset: 1, ProbeResp: probe}
	EncodeSACK(buf, BTH{DestQP: qpnA, PSN: cack}, &s, &CCState{})
	return pkt{tx: verbs.Tx{EV: ev, WireLen: SACKLen}, data: buf}
}

func TestAlwaysSkipReplacementAndProbe(t *testing.T) {
	cfg := smallCfg()
	cfg.TLPFactor = 0 // the deadline checked is the RTO's
	a, b := newPair(t, cfg, 1<<20)
	ev := activeOf(a.q, 2)[0]
	before := len(activeOf(a.q, 2))
	a.recv(10, sackWithM(t, ev, PathAlwaysSkip, false, 999))
	if st, _ := a.q.EVState(ev); st != EVAssumedBad {
		t.Fatalf("ALWAYS_SKIP → %v", st)
	}
	act := activeOf(a.q, 2)
	if len(act) != before {
		t.Fatalf("active set shrank %d → %d with backups available", before, len(act))
	}
	for _, e := range act {
		if e == ev {
			t.Fatal("bad EV still active")
		}
		if evPlane(e) != 2 {
			t.Fatal("replacement from another plane")
		}
	}
	// Probes run only while the requester has work.
	if _, ok := a.q.Deadline(); ok {
		t.Fatal("idle QP armed a probe timer")
	}
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	b.recv(20, a.drain(20, 0xf)...)
	dl, ok := a.q.Deadline()
	if !ok || dl != a.q.rto+20 {
		t.Fatalf("deadline %d", dl)
	}
	// Keep the message unacknowledged; jump to the probe time.
	pt := int64(10 + a.q.cfg.ProbeInterval)
	a.q.Tick(pt)
	var probe pkt
	for _, p := range a.drain(pt, 0xf) {
		if p.op() == OpProbe {
			probe = p
		}
	}
	if probe.data == nil || probe.tx.EV != ev || probe.tx.DSCP != verbs.DSCPControl {
		t.Fatalf("probe %+v", probe.tx)
	}
	b.recv(pt+10, probe)
	pb := b.drain(pt+10, 0xf)
	_, s, _, err := DecodeSACK(pb[len(pb)-1].data)
	if err != nil || !s.ProbeResp || s.EV != ev {
		t.Fatalf("probe response %+v %v", s, err)
	}
	a.recv(pt+20, pb...)
	if st, _ := a.q.EVState(ev); st != EVGood {
		t.Fatalf("probe answered: %v", st)
	}
	if a.q.MRCStats().ProbeReplies != 1 {
		t.Fatal("ProbeReplies")
	}
	// Probe answered with SKIP_ONCE → SKIP.
	a.recv(pt+30, sackWithM(t, ev, PathAlwaysSkip, false, 1000))
	a.recv(pt+40, sackWithM(t, ev, PathSkipOnce, true, 1000))
	if st, _ := a.q.EVState(ev); st != EVSkip {
		t.Fatalf("probe answered with SKIP_ONCE: %v", st)
	}
}

func TestEVMinActiveFloor(t *testing.T) {
	cfg := smallCfg()
	cfg.EVMinActive = 126
	a, _ := newPair(t, cfg, 1<<20)
	evs := a.q.EVStates()
	for i := 0; i < 3; i++ {
		a.recv(10, sackWithM(t, evs[i].EV, PathAlwaysSkip, false, 999))
	}
	ms := a.q.MRCStats()
	if ms.EVAssumedBad != 2 || ms.EVSkip != 1 || ms.EVGood != 125 {
		t.Fatalf("floor not enforced: %+v", ms)
	}
}

func TestDenyAllow(t *testing.T) {
	cfg := smallCfg()
	cfg.PathsPerPlane = 8 // structured: 32 EVs per plane over 8 paths → 4 EVs per path
	a, b := newPair(t, cfg, 1<<20)
	infos := a.q.EVStates()
	for _, e := range infos {
		if e.EV&0xf != uint32(e.Plane) || e.Choice >= 8 {
			t.Fatalf("structured EV %#x plane %d choice %d", e.EV, e.Plane, e.Choice)
		}
	}
	if err := a.q.DenyEV(0xdeadbeef); err != ErrUnknownEV {
		t.Fatal(err)
	}
	ev := activeOf(a.q, 1)[0]
	if err := a.q.DenyEV(ev); err != nil {
		t.Fatal(err)
	}
	if n := a.q.DenyPath(0, 3); n != 4 {
		t.Fatalf("DenyPath hit %d EVs, want 4", n)
	}
	a.write(b, 1, verbs.OpWrite, 0, 200*pmtu, 0)
	for _, p := range a.drain(0, 0xf) {
		if p.tx.EV == ev || evPlane(p.tx.EV) == 0 && evChoice(p.tx.EV) == 3 {
			t.Fatalf("denied EV %#x used", p.tx.EV)
		}
	}
	if ms := a.q.MRCStats(); ms.EVDenied != 5 {
		t.Fatalf("%+v", ms)
	}
	if err := a.q.AllowEV(ev); err != nil {
		t.Fatal(err)
	}
	if n := a.q.AllowPath(0, 3); n != 4 {
		t.Fatalf("AllowPath %d", n)
	}
	if ms := a.q.MRCStats(); ms.EVDenied != 0 || ms.EVGood != 128 {
		t.Fatalf("%+v", ms)
	}
}

func TestPlaneStatus(t *testing.T) {
	a, b := newPair(t, smallCfg(), 4<<20)
	a.write(b, 1, verbs.OpWrite, 0, 40*pmtu, 0)
	pa := a.drain(0, 0xf)
	a.q.SetPlaneStatus(1, false)
	if a.q.MRCStats().PlaneDownRetx != 10 {
		t.Fatalf("in-flight packets on the down plane not retransmitted: %+v", a.q.MRCStats())
	}
	var onPlane1 []pkt
	for _, p := range pa {
		if evPlane(p.tx.EV) == 1 {
			onPlane1 = append(onPlane1, p)
		}
	}
	rt := a.drain(10, 0xf)
	if len(rt) != 10 {
		t.Fatalf("%d retransmissions", len(rt))
	}
	for _, p := range rt {
		if evPlane(p.tx.EV) == 1 {
			t.Fatal("data on a down plane")
		}
	}
	a.write(b, 2, verbs.OpWrite, 1<<20, 40*pmtu, 0)
	for _, p := range a.drain(20, 0xf) {
		if evPlane(p.tx.EV) == 1 {
			t.Fatal("data on a down plane")
		}
	}
	// The peer's ports being up does not revive this side's down port …
	buf := make([]byte, EndpointLen)
	EncodePortStatus(buf, 1, 0xf)
	_, _, e, _ := DecodeEndpoint(buf)
	a.q.ApplyPortStatus(e.PortStatusMask)
	if a.q.PlaneUp(1) {
		t.Fatal("a peer's update revived this side's down port")
	}
	// … but a peer's down port takes a plane out, and its return brings
	// the plane back once this side's port is up too.
	a.q.SetPlaneStatus(1, true)
	a.q.ApplyPortStatus(0xf &^ (1 << 2))
	if !a.q.PlaneUp(1) || a.q.PlaneUp(2) {
		t.Fatal("port status of the peer not applied")
	}
	a.q.ApplyPortStatus(0xf)
	if !a.q.PlaneUp(1) || !a.q.PlaneUp(2) {
		t.Fatal("plane not up")
	}
	b.recv(30, pa...)
	runUntilIdle(a, b, 30, nil)
	if c := a.comps(); len(c) != 2 {
		t.Fatalf("%+v", c)
	}
	sameBytes(t, a, b, 0, 40*pmtu)
	sameBytes(t, a, b, 1<<20, 40*pmtu)
}

func TestFreePlanes(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 20*pmtu, 0)
	for _, p := range a.drain(0, 1<<2) {
		if evPlane(p.tx.EV) != 2 {
			t.Fatal("data on a plane without room")
		}
	}
	if _, ok := a.q.Send(0, 0, a.buf); ok {
		t.Fatal("data with no free plane")
	}
}

func TestReceiverPenalty(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	b.q.SetReceiverPenalty(64)
	a.write(b, 1, verbs.OpWrite, 0, 4*pmtu, 0)
	runUntilIdle(a, b, 0, nil)
	if got, max := a.q.cwnd(), int64(a.q.cc.p.MaxWnd); got > max/2+1 {
		t.Fatalf("penalty 64: cwnd %d, maxwnd %d", got, max)
	}
	b.q.SetReceiverPenalty(127)
	a.write(b, 2, verbs.OpWrite, 0, 4*pmtu, 0)
	runUntilIdle(a, b, 0, nil)
	if a.q.cwnd() != pmtu {
		t.Fatalf("penalty 127: cwnd %d", a.q.cwnd())
	}
}
