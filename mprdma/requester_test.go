package mprdma

import (
	"math"
	"slices"
	"testing"

	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/verbs"
)

// Step-by-step requester tests: A's packets are taken from Send and B's
// control packets forged (helpers_test.go), one at a time, no goroutines.

// reqConfig: 4 paths on one plane, a window of 8 packets (cap 32), 1 KB
// packets.
func reqConfig(s Scheme) Config {
	c := DefaultConfig()
	c.Scheme, c.Paths, c.PMTU = s, 4, 1024
	c.InitCwnd, c.MaxCwnd = 8, 32
	return c
}

func TestRequesterFirstWindowRoundRobin(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 40<<10, false)
	got := p.sendData(100)
	if want := []uint64{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(seqs(got), want) {
		t.Fatalf("first window %v, want %v", seqs(got), want)
	}
	if want := []int{0, 1, 2, 3, 0, 1, 2, 3}; !slices.Equal(paths(got), want) {
		t.Errorf("first window on paths %v, want round-robin %v", paths(got), want)
	}
	for _, x := range got {
		if x.tx.EV != p.a.EV() || x.flags != 0 {
			t.Errorf("seq %d: EV %#x (QP's %#x), flags %#x", x.seq, x.tx.EV, p.a.EV(), x.flags)
		}
	}
	if st := p.a.MPStats(); st.PathSends[0] != 2 || st.PathSends[3] != 2 || st.CwndPackets != 8 {
		t.Errorf("PathSends %v, cwnd %v", st.PathSends[:4], st.CwndPackets)
	}
}

func TestRequesterAckClocksItsPath(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	cwnd := 8.0
	inFlight := 8
	next := uint64(8)
	// In-order ACKs coming back on paths 2, 3, 1, 0, …: each sends what
	// the window allows (floor(cwnd) − pipe) on its own path.
	for i := range uint64(20) {
		path := int([]uint64{2, 3, 1, 0}[i%4])
		p.ack(i+1, i, false, path)
		cwnd += 1 / cwnd
		inFlight--
		got := p.sendData(100)
		want := int(cwnd) - inFlight
		if len(got) != want {
			t.Fatalf("ACK %d: %d packets, want %d (cwnd %.3f, in flight %d)", i, len(got), want, cwnd, inFlight)
		}
		for _, x := range got {
			if x.path != path || x.seq != next {
				t.Fatalf("ACK %d on path %d released seq %d on path %d, want seq %d on path %d", i, path, x.seq, x.path, next, path)
			}
			next++
		}
		inFlight += want
		if c := p.a.MPStats().CwndPackets; math.Abs(c-cwnd) > 1e-9 {
			t.Fatalf("ACK %d: cwnd %v, want %v", i, c, cwnd)
		}
	}
	if next <= 28 {
		t.Errorf("the window did not grow: %d packets sent after 20 ACKs", next-8)
	}
	if p.a.Stats().CwndBytes != int64(cwnd*1024) || p.a.Stats().RTTSamples != 20 {
		t.Errorf("stats %+v", p.a.Stats())
	}
}

func TestRequesterECNEchoTakesHalfAPacket(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	p.ack(1, 0, true, 1) // cwnd 7.5, 7 in flight: nothing
	if c := p.a.MPStats().CwndPackets; c != 7.5 {
		t.Fatalf("cwnd %v after one ECN echo, want 7.5", c)
	}
	if got := p.sendData(100); len(got) != 0 {
		t.Fatalf("sent %v after an ECN echo, want nothing", seqs(got))
	}
	p.ack(2, 1, true, 1) // cwnd 7, 6 in flight: one packet on path 1
	if got := p.sendData(100); len(got) != 1 || got[0].path != 1 {
		t.Fatalf("sent %v on %v, want one packet on path 1", seqs(got), paths(got))
	}
	for i := uint64(2); i < 8; i++ {
		p.ack(i+1, i, true, 0)
	}
	p.ack(9, 8, true, 0)
	for range 20 { // duplicates: still echoes; the window floors at 1
		p.ack(9, 8, true, 0)
	}
	if c := p.a.MPStats().CwndPackets; c != 1 {
		t.Errorf("cwnd %v after 27 ECN echoes, want the floor 1", c)
	}
	// And the cap: unmarked ACKs grow it by 1/cwnd up to MaxCwnd.
	for range 2000 {
		p.ack(9, 8, false, 0)
	}
	if c := p.a.MPStats().CwndPackets; c != 32 {
		t.Errorf("cwnd %v after 2000 unmarked ACKs, want MaxCwnd 32", c)
	}
}

func TestRequesterSlowPathIsNotClocked(t *testing.T) {
	c := reqConfig(SchemeMPRDMA)
	c.SlowPathLag = 2
	p := newReqPair(t, c, 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100) // 0..7 on paths 0,1,2,3,0,1,2,3
	p.ack(0, 7, false, 3)
	if got := p.sendData(100); len(got) != 1 || got[0].path != 3 {
		t.Fatalf("ACK of 7 on path 3 released %v on %v, want one packet on path 3", seqs(got), paths(got))
	}
	// 6 is 1 behind 7: within Δ = 2, path 2 is clocked.
	p.ack(0, 6, false, 2)
	if got := p.sendData(100); len(got) != 1 || got[0].path != 2 {
		t.Fatalf("ACK of 6 on path 2 released %v on %v, want path 2", seqs(got), paths(got))
	}
	// 0 is 8 behind 9: path 0 is too slow; the packet goes elsewhere.
	p.ack(1, 0, false, 0)
	got := p.sendData(100)
	if len(got) != 1 || got[0].path == 0 {
		t.Fatalf("ACK of 0 on path 0 (8 behind) released %v on %v, want one packet on another path", seqs(got), paths(got))
	}
	if n := p.a.MPStats().SlowPathAcks; n != 1 {
		t.Errorf("SlowPathAcks %d, want 1", n)
	}
	// A retransmitted packet's ACK says nothing of its path.
	p.fnack(1, 1)
	p.sendData(100)
	p.ack(1, 1, false, 0)
	if n := p.a.MPStats().SlowPathAcks; n != 1 {
		t.Errorf("SlowPathAcks %d after the ACK of a retransmission, want still 1", n)
	}
}

func TestRequesterNAKGoesBackN(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	p.ack(1, 0, false, 0)
	p.ack(1, 4, false, 0) // 4 held beyond the hole: still resent by go-back-N
	p.sendData(100)       // whatever the two ACKs released: 8, 9
	p.now += 1000
	p.nak(2, 5)
	got := p.sendData(100)
	if len(got) < 8 || !slices.Equal(seqs(got)[:8], []uint64{2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("after NAK for 2: %v, want 2..9 resent in order first", seqs(got))
	}
	st, mp := p.a.Stats(), p.a.MPStats()
	if mp.GoBackNs != 1 || st.Retransmissions != 8 || st.NacksReceived != 1 {
		t.Errorf("GoBackNs %d, Retransmissions %d, NacksReceived %d; want 1, 8, 1", mp.GoBackNs, st.Retransmissions, st.NacksReceived)
	}
	if c := p.comps(); len(c) != 0 {
		t.Errorf("completions %+v before the WR is acknowledged", c)
	}
	// The same NAK again, caused by a packet sent before the rewind: stale.
	p.nak(2, 5)
	if again := p.sendData(100); len(again) != 0 || p.a.MPStats().GoBackNs != 1 {
		t.Errorf("a stale NAK resent %v (GoBackNs %d)", seqs(again), p.a.MPStats().GoBackNs)
	}
	// An RTO later, caused by a resend: the resend of 2 was lost too.
	p.now += DefaultConfig().RTO
	p.nak(2, 3)
	if again := p.sendData(100); len(again) == 0 || again[0].seq != 2 || p.a.MPStats().GoBackNs != 2 {
		t.Errorf("a fresh NAK resent %v (GoBackNs %d), want from 2 again", seqs(again), p.a.MPStats().GoBackNs)
	}
}

// A NAK caused by a packet last sent before the rewind to the same ePSN
// is stale even an RTO later: the resend of ePSN may still be on its way.
func TestRequesterNAKCausedBeforeTheRewind(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	p.a.req.win.cwnd = 2
	p.nak(0, 5)
	if got := p.sendData(100); !slices.Equal(seqs(got), []uint64{0, 1}) {
		t.Fatalf("resent %v with a window of 2, want 0 1", seqs(got))
	}
	p.now += DefaultConfig().RTO
	p.nak(0, 7) // 7 was sent before the rewind and not since
	if p.a.MPStats().GoBackNs != 1 {
		t.Errorf("GoBackNs %d, want 1: the NAK caused by 7 is stale", p.a.MPStats().GoBackNs)
	}
	p.nak(0, 1) // 1 was resent after it: the resend of 0 was lost
	if p.a.MPStats().GoBackNs != 2 {
		t.Errorf("GoBackNs %d, want 2", p.a.MPStats().GoBackNs)
	}
}

func TestRequesterRandomFNACKOneRetransmission(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeRandom), 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	p.fnack(3, 0)
	got := p.sendData(100)
	if len(got) != 1 || got[0].seq != 3 {
		t.Fatalf("after FNACK for 3: %v, want exactly 3 once", seqs(got))
	}
	if got[0].path < 0 || got[0].path >= 4 || got[0].flags != 0 {
		t.Errorf("retransmission on path %d with flags %#x", got[0].path, got[0].flags)
	}
	p.fnack(3, 0) // a copy of the same FNACK
	if again := p.sendData(100); len(again) != 0 {
		t.Errorf("a copied FNACK resent %v", seqs(again))
	}
	st, mp := p.a.Stats(), p.a.MPStats()
	if st.Retransmissions != 1 || mp.SelectiveRetx != 1 || mp.GoBackNs != 0 || mp.FReTxSent != 0 || st.NacksReceived != 2 {
		t.Errorf("Retransmissions %d SelectiveRetx %d GoBackNs %d FReTxSent %d NacksReceived %d", st.Retransmissions, mp.SelectiveRetx, mp.GoBackNs, mp.FReTxSent, st.NacksReceived)
	}
	// The retransmission's path is drawn: over many losses every path is
	// used.
	var used [4]int
	for i := uint64(0); i < 200; i++ {
		p2 := newReqPair(t, reqConfig(SchemeRandom), 64<<10)
		p2.a = New(reqConfig(SchemeRandom), p2.ma, reqQPNA, i+10)
		p2.a.Connect(verbs.QPAttrs{Host: reqHostA, QPN: reqQPNA, InitialPSN: reqPSNA}, verbs.QPAttrs{Host: reqHostB, QPN: reqQPNB, InitialPSN: reqPSNB})
		p2.write(1, 0, 16<<10, false)
		p2.sendData(100)
		p2.fnack(2, 0)
		used[p2.sendData(1)[0].path]++
	}
	for i, n := range used {
		if n < 20 {
			t.Errorf("path %d drew %d of 200 retransmissions: %v", i, n, used)
		}
	}
}

func TestRequesterOrderREFReTxIgnoresTheWindow(t *testing.T) {
	c := reqConfig(SchemeOrderRE)
	c.Copies = 3
	p := newReqPair(t, c, 64<<10)
	p.write(1, 0, 60<<10, false)
	p.sendData(100)
	p.a.req.win.cwnd = 1 // 8 in flight, a window of 1: nothing new may go
	p.fnack(5, 0)
	got := p.sendData(100)
	if len(got) != 1 || got[0].seq != 5 {
		t.Fatalf("after FNACK for 5 with the window full: %v, want 5 once", seqs(got))
	}
	x := got[0]
	if !x.sig.FReTx() || x.sig.Copies != 3 || x.flags&(orderre.FlagCreate|orderre.FlagDelete) != 0 {
		t.Errorf("FReTx signal %+v, want FReTx with 3 copies and no group signal", x.sig)
	}
	if x.path < 0 || x.path >= 4 {
		t.Errorf("FReTx on path %d", x.path)
	}
	if mp := p.a.MPStats(); mp.FReTxSent != 1 || mp.SelectiveRetx != 1 {
		t.Errorf("FReTxSent %d SelectiveRetx %d, want 1 1", mp.FReTxSent, mp.SelectiveRetx)
	}
	// Ahead of new data: with room in the window, the FReTx goes first.
	p.a.req.win.cwnd = 20
	p.fnack(6, 0)
	got = p.sendData(100)
	if len(got) < 2 || got[0].seq != 6 || !got[0].sig.FReTx() || got[1].seq != 8 || got[1].sig.FReTx() {
		t.Errorf("after FNACK for 6 with room: %v, want the FReTx of 6 then new data from 8", seqs(got))
	}
}

func TestRequesterGroupSignals(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeOrderRE), 64<<10)
	p.write(1, 0, 4<<10, false) // 4 packets
	got := p.sendData(100)
	want := []uint8{orderre.FlagCreate, 0, 0, orderre.FlagDelete}
	for i, x := range got {
		if x.flags != want[i] {
			t.Errorf("burst 1 packet %d flags %#x, want %#x", i, x.flags, want[i])
		}
	}
	// More posted while the first burst is outstanding: no create; the
	// delete moves to the new last packet.
	p.write(2, 4<<10, 3<<10, true)
	got = p.sendData(100)
	if len(got) != 3 || got[0].flags != 0 || got[1].flags != 0 || got[2].flags != orderre.FlagDelete {
		t.Errorf("burst 2 flags %v", got)
	}
	p.ack(7, 6, false, 0)
	if c := p.comps(); len(c) != 2 || c[0].WRID != 1 || c[1].WRID != 2 {
		t.Fatalf("completions %+v, want WR 1 then WR 2", c)
	}
	// Idle again: a one-packet burst carries both.
	p.write(3, 0, 100, false)
	if got = p.sendData(100); len(got) != 1 || got[0].flags != orderre.FlagCreate|orderre.FlagDelete {
		t.Errorf("one-packet burst: %v", got)
	}
	if mp := p.a.MPStats(); mp.GroupCreates != 2 || mp.GroupDeletes != 3 {
		t.Errorf("GroupCreates %d GroupDeletes %d, want 2 3", mp.GroupCreates, mp.GroupDeletes)
	}
	// Random and MP-RDMA carry no signals.
	for _, s := range []Scheme{SchemeRandom, SchemeMPRDMA} {
		q := newReqPair(t, reqConfig(s), 64<<10)
		q.write(1, 0, 4<<10, false)
		for _, x := range q.sendData(100) {
			if x.flags != 0 {
				t.Errorf("%v: flags %#x", s, x.flags)
			}
		}
	}
}

func TestRequesterTimeoutBackoff(t *testing.T) {
	c := reqConfig(SchemeMPRDMA)
	c.RTO = 10_000
	p := newReqPair(t, c, 64<<10)
	p.write(1, 0, 8<<10, false)
	p.now = 500
	p.sendData(100)
	at, ok := p.a.Deadline()
	if !ok || at != 500+10_000 {
		t.Fatalf("deadline %d %v, want %d", at, ok, 500+10_000)
	}
	p.now = at - 1
	p.a.Tick(p.now)
	if p.a.Stats().Timeouts != 0 {
		t.Fatal("timed out early")
	}
	// Each timeout without progress doubles the timer; MP-RDMA goes back
	// to the cumulative ack.
	for i, d := range []int64{20_000, 40_000, 80_000} {
		p.now = at
		p.a.Tick(p.now)
		if got := p.sendData(100); len(got) != 8 || got[0].seq != 0 {
			t.Fatalf("timeout %d resent %v, want 0..7", i+1, seqs(got))
		}
		at, _ = p.a.Deadline()
		if at != p.now+d {
			t.Fatalf("after timeout %d the deadline is now+%d, want now+%d", i+1, at-p.now, d)
		}
	}
	if st, mp := p.a.Stats(), p.a.MPStats(); st.Timeouts != 3 || mp.GoBackNs != 3 || st.Retransmissions != 24 {
		t.Errorf("Timeouts %d GoBackNs %d Retransmissions %d", st.Timeouts, mp.GoBackNs, st.Retransmissions)
	}
	// Progress resets it.
	p.now += 100
	p.ack(1, 0, false, 0)
	if at, _ = p.a.Deadline(); at != p.now+10_000 {
		t.Errorf("after progress the deadline is now+%d, want now+10000", at-p.now)
	}
	// Everything acknowledged: no timer.
	p.ack(8, 7, false, 0)
	if _, ok := p.a.Deadline(); ok {
		t.Error("timer armed with nothing outstanding")
	}
}

func TestRequesterSelectiveTimeout(t *testing.T) {
	for _, s := range []Scheme{SchemeRandom, SchemeOrderRE} {
		c := reqConfig(s)
		c.RTO = 10_000
		p := newReqPair(t, c, 64<<10)
		p.write(1, 0, 8<<10, false)
		p.sendData(100)
		for i := uint64(2); i < 8; i++ { // 0 and 1 lost, the rest held
			p.ack(0, i, false, 0)
		}
		p.sendData(100) // nothing new: all posted data is out
		at, _ := p.a.Deadline()
		p.now = at
		p.a.Tick(p.now)
		got := p.sendData(100)
		if !slices.Equal(seqs(got), []uint64{0, 1}) {
			t.Errorf("%v: timeout resent %v, want 0 and 1 only", s, seqs(got))
		}
		for _, x := range got {
			if x.sig.FReTx() != (s == SchemeOrderRE) {
				t.Errorf("%v: timeout retransmission FReTx %v", s, x.sig.FReTx())
			}
		}
		if mp := p.a.MPStats(); mp.GoBackNs != 0 || mp.SelectiveRetx != 2 {
			t.Errorf("%v: GoBackNs %d SelectiveRetx %d", s, mp.GoBackNs, mp.SelectiveRetx)
		}
	}
}

func TestRequesterRetryExhaustion(t *testing.T) {
	c := reqConfig(SchemeRandom)
	c.RetryCount = 2
	p := newReqPair(t, c, 64<<10)
	p.write(1, 0, 2<<10, false)
	p.write(2, 2<<10, 1<<10, true)
	p.sendData(100)
	for i := range 3 {
		if p.a.State() != verbs.QPReady {
			t.Fatalf("ERROR after %d timeouts, want after 3", i)
		}
		at, ok := p.a.Deadline()
		if !ok {
			t.Fatalf("no timer after %d timeouts", i)
		}
		p.now = at
		p.a.Tick(p.now)
		p.sendData(100)
	}
	if p.a.State() != verbs.QPError || p.a.Stats().Timeouts != 3 {
		t.Fatalf("state %v after %d timeouts, want ERROR after 3", p.a.State(), p.a.Stats().Timeouts)
	}
	c1 := p.comps()
	if len(c1) != 2 || c1[0].WRID != 1 || c1[0].Status != verbs.StatusRetryExceeded || c1[1].WRID != 2 || c1[1].Status != verbs.StatusFlushed {
		t.Errorf("completions %+v, want 1 RETRY_EXCEEDED, 2 FLUSHED", c1)
	}
	if _, ok := p.a.Deadline(); ok {
		t.Error("timer armed in ERROR")
	}
	if _, ok := p.a.Send(p.now, ^uint32(0), p.buf); ok {
		t.Error("ERROR QP sent")
	}
}

func TestRequesterErrorNAK(t *testing.T) {
	p := newReqPair(t, reqConfig(SchemeMPRDMA), 64<<10)
	p.write(1, 0, 2<<10, false)
	p.write(2, 2<<10, 3<<10, false)
	p.write(3, 5<<10, 1<<10, false)
	p.sendData(100)
	// 0, 1 placed; 3 (WR 2's second packet) hits a bad range.
	p.ctl(0x60|0x02, psnA(3), psnA(2)-1, false, 0)
	c := p.comps()
	want := []verbs.Completion{
		{WRID: 1, QPN: reqQPNA, Op: verbs.OpWrite, Status: verbs.StatusOK, Bytes: 2 << 10},
		{WRID: 2, QPN: reqQPNA, Op: verbs.OpWrite, Status: verbs.StatusRemoteAccess},
		{WRID: 3, QPN: reqQPNA, Op: verbs.OpWrite, Status: verbs.StatusFlushed},
	}
	if !slices.Equal(c, want) {
		t.Errorf("completions %+v, want %+v", c, want)
	}
	if p.a.State() != verbs.QPError {
		t.Errorf("state %v, want ERROR", p.a.State())
	}
}

func TestRequesterPlanes(t *testing.T) {
	c := reqConfig(SchemeMPRDMA)
	c.Planes = 2
	p := newReqPair(t, c, 64<<10)
	p.write(1, 0, 8<<10, false)
	// Only plane 1's port has room: paths 1 and 3.
	got := p.sendFree(100, 1<<1)
	if len(got) != 8 {
		t.Fatalf("sent %d packets on plane 1, want 8", len(got))
	}
	for _, x := range got {
		if x.path%2 != 1 || x.tx.EV&0xf != 1 || x.tx.EV&^0xf != p.a.EV() {
			t.Errorf("seq %d on path %d EV %#x, want an odd path on plane 1", x.seq, x.path, x.tx.EV)
		}
	}
	if _, ok := p.a.Send(p.now, 0, p.buf); ok {
		t.Error("sent data with no port free")
	}
}

func TestRequesterDerivedConfig(t *testing.T) {
	c := DefaultConfig()
	c.BDPPackets, c.Paths = 40, 4
	q := New(c, &verbs.Memory{}, 1, 1)
	d := q.Config()
	if d.InitCwnd != 40 || d.MaxCwnd != 80 || d.LossThreshold != 10 || d.SlowPathLag != 5 {
		t.Errorf("derived %+v", d)
	}
	c.SlowPathLag = -1
	if err := c.Validate(); err == nil {
		t.Error("SlowPathLag −1 accepted")
	}
}
