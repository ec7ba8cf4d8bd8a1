package endpoint

import (
	"encoding/binary"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/verbs"
)

// toyQP is a minimal verbs.Transport: it sends each posted Write as one
// packet per 4 KB chunk (BTH with dest QP + offset + payload), paced one
// packet per PaceNs when PaceNs > 0, and the receiver places the bytes and
// completes a RecvImm when the last chunk arrives. Enough to exercise the
// engine's plumbing without a real transport.
type toyQP struct {
	qpn, remoteQPN uint32
	remoteHost     int
	state          verbs.QPState
	mem            *verbs.Memory
	ev             uint32
	paceNs, nextAt int64
	queue          []verbs.WorkRequest
	off            uint64
	comps          []verbs.Completion
	got            uint64
	timeouts       int
	deadline       int64
	stuck          bool // Tick never clears the deadline (a buggy transport)
}

func (q *toyQP) QPN() uint32          { return q.qpn }
func (q *toyQP) State() verbs.QPState { return q.state }
func (q *toyQP) Stats() verbs.QPStats { return verbs.QPStats{} }
func (q *toyQP) Connect(l, r verbs.QPAttrs) error {
	q.remoteQPN, q.remoteHost, q.state = r.QPN, r.Host, verbs.QPReady
	return nil
}
func (q *toyQP) Post(now int64, wr verbs.WorkRequest) error {
	if _, err := q.mem.Lookup(wr.LocalKey, wr.LocalVA, wr.Length); err != nil {
		return err
	}
	q.queue = append(q.queue, wr)
	return nil
}

const toyHdr = verbs.BTHLen + 24

func (q *toyQP) Send(now int64, free uint32, b []byte) (verbs.Tx, bool) {
	if len(q.queue) == 0 || free&(1<<(q.ev&0xf)) == 0 || now < q.nextAt {
		return verbs.Tx{}, false
	}
	wr := q.queue[0]
	n := min(4096, wr.Length-q.off)
	clear(b[:toyHdr])
	b[0] = 0x0a
	b[5], b[6], b[7] = byte(q.remoteQPN>>16), byte(q.remoteQPN>>8), byte(q.remoteQPN)
	binary.BigEndian.PutUint64(b[12:], wr.RemoteVA+q.off)
	binary.BigEndian.PutUint32(b[20:], wr.RemoteKey)
	binary.BigEndian.PutUint32(b[24:], uint32(n))
	last := q.off+n == wr.Length
	if last {
		b[28] = 1
	}
	src, _ := q.mem.Bytes(wr.LocalKey, wr.LocalVA+q.off, n)
	copy(b[toyHdr:], src)
	q.off += n
	if last {
		q.queue, q.off = q.queue[1:], 0
		q.comps = append(q.comps, verbs.Completion{WRID: wr.ID, QPN: q.qpn, Op: wr.Op, Bytes: wr.Length})
	}
	if q.paceNs > 0 {
		q.nextAt = now + q.paceNs
	}
	return verbs.Tx{Len: toyHdr + len(src), WireLen: toyHdr + int(n) + 4, DstHost: q.remoteHost, EV: q.ev, DSCP: verbs.DSCPTrimmable, ECT: true}, true
}
func (q *toyQP) Receive(now int64, rx *verbs.Rx) {
	d := rx.Data
	va, key, n := binary.BigEndian.Uint64(d[12:]), binary.BigEndian.Uint32(d[20:]), binary.BigEndian.Uint32(d[24:])
	if dst, err := q.mem.Bytes(key, va, uint64(n)); err == nil && len(d) >= toyHdr+int(n) {
		copy(dst, d[toyHdr:toyHdr+int(n)])
	}
	q.got += uint64(n)
	if d[28] == 1 {
		q.comps = append(q.comps, verbs.Completion{QPN: q.qpn, Op: verbs.OpRecvImm, Bytes: q.got})
	}
}
func (q *toyQP) Deadline() (int64, bool) {
	if q.deadline > 0 {
		return q.deadline, true
	}
	if len(q.queue) > 0 && q.nextAt > 0 {
		return q.nextAt, true
	}
	return 0, false
}
func (q *toyQP) Tick(now int64) {
	if q.deadline > 0 && now >= q.deadline {
		q.timeouts++
		if !q.stuck {
			q.deadline = 0
		}
	}
}
func (q *toyQP) PollCompletions(dst []verbs.Completion) []verbs.Completion {
	dst = append(dst, q.comps...)
	q.comps = q.comps[:0]
	return dst
}

func toyPair(t testing.TB, n *testNet, a, b int, ev uint32) (*Engine, *toyQP, *Engine, *toyQP, *CQ, *CQ) {
	ea, eb := n.hosts[a].RDMA(), n.hosts[b].RDMA()
	qa := &toyQP{qpn: ea.AllocQPN(), mem: ea.Memory(), ev: ev}
	qb := &toyQP{qpn: eb.AllocQPN(), mem: eb.Memory(), ev: ev}
	ca, cb := &CQ{}, &CQ{}
	ea.AddQP(qa, ca)
	eb.AddQP(qb, cb)
	if err := Connect(ea, qa, verbs.QPAttrs{}, eb, qb, verbs.QPAttrs{}); err != nil {
		t.Fatal(err)
	}
	return ea, qa, eb, qb, ca, cb
}

func TestEngineMovesBytesAndCompletions(t *testing.T) {
	for _, mode := range modes() {
		n := newTestNet(t, mode, 1)
		ea, qa, eb, _, ca, cb := toyPair(t, n, 0, 2, uint32(MakeEV(2, 1, 0x55)))
		src := ea.Memory().Register(make([]byte, 1<<20))
		dst := eb.Memory().Register(make([]byte, 1<<20))
		for i := range src.Buf {
			src.Buf[i] = byte(i * 7)
		}
		if err := ea.Post(qa.QPN(), verbs.WorkRequest{ID: 9, Op: verbs.OpWriteImm, LocalKey: src.Key, LocalVA: src.VA, Length: src.Len, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != nil {
			t.Fatal(err)
		}
		if err := ea.Post(qa.QPN(), verbs.WorkRequest{LocalKey: 99}); err != verbs.ErrBadKey {
			t.Fatalf("bad key posted: %v", err)
		}
		n.loop.Run()
		for i := range dst.Buf {
			if dst.Buf[i] != src.Buf[i] {
				t.Fatalf("%v: byte %d differs", mode, i)
			}
		}
		a, b := ca.Poll(nil), cb.Poll(nil)
		if len(a) != 1 || a[0].WRID != 9 || len(b) != 1 || b[0].Op != verbs.OpRecvImm || b[0].Bytes != 1<<20 {
			t.Fatalf("%v: completions %+v / %+v", mode, a, b)
		}
		// 256 packets, all on the EV's plane, none on the others.
		if got := n.hosts[0].NIC.Port(2).Counters.TxPackets; got != 256 || n.hosts[0].NIC.Port(0).Counters.TxPackets != 0 {
			t.Fatalf("%v: plane 2 sent %d", mode, got)
		}
		// The port never held more than FreeBytes + one frame.
		if mq := n.hosts[0].NIC.Port(2).Counters.MaxQueueBytes; mq > ea.FreeBytes+4200 {
			t.Fatalf("%v: NIC queue reached %d bytes", mode, mq)
		}
		if n.topo.Pool.Live != 0 {
			t.Fatalf("%d packets leaked", n.topo.Pool.Live)
		}
	}
}

func TestEngineTimersPacingAndUnknownQP(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	ea, qa, eb, qb, ca, _ := toyPair(t, n, 0, 3, uint32(MakeEV(0, 0, 1)))
	qa.paceNs = 10_000 // one packet per 10 µs
	src := ea.Memory().RegisterVirtual(10 * 4096)
	dst := eb.Memory().RegisterVirtual(10 * 4096)
	ca.Handler = func(c verbs.Completion) {
		if int64(n.loop.Now()) < 9*10_000 {
			t.Errorf("completion at %v: pacing ignored", n.loop.Now())
		}
	}
	if err := ea.Post(qa.QPN(), verbs.WorkRequest{ID: 1, LocalKey: src.Key, LocalVA: src.VA, Length: src.Len, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != nil {
		t.Fatal(err)
	}
	qb.deadline = 500_000
	n.loop.Run()
	if qb.got != 10*4096 || qb.timeouts != 1 || n.loop.Now() != 500_000 {
		t.Fatalf("got %d, timeouts %d, end %v", qb.got, qb.timeouts, n.loop.Now())
	}
	if ea.Counters.TimerRuns < 9 {
		t.Fatalf("%d timer runs for 10 paced packets", ea.Counters.TimerRuns)
	}
	// A frame for a QP that does not exist is counted and dropped.
	qa.remoteQPN = 0x999
	ea.Post(qa.QPN(), verbs.WorkRequest{ID: 2, LocalKey: src.Key, LocalVA: src.VA, Length: 100, RemoteKey: dst.Key, RemoteVA: dst.VA})
	n.loop.Run()
	if eb.Counters.RxNoQP != 1 || n.topo.Pool.Live != 0 {
		t.Fatalf("unknown QP: %+v, live %d", eb.Counters, n.topo.Pool.Live)
	}
}

func TestDSCPConstantsAgree(t *testing.T) {
	pairs := [][2]int{
		{verbs.DSCPTrimmable, fabric.DSCPTrimmable}, {verbs.DSCPTrimmableRetx, fabric.DSCPTrimmableRetx},
		{verbs.DSCPNoTrim, fabric.DSCPNoTrim}, {verbs.DSCPRoCE, fabric.DSCPRoCE}, {verbs.DSCPTrimmed, fabric.DSCPTrimmed},
		{verbs.DSCPTrimmedLastHop, fabric.DSCPTrimmedLastHop}, {verbs.DSCPControl, fabric.DSCPControl},
		{verbs.RoCEv2UDPPort, fabric.RoCEv2Port},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Fatalf("verbs and fabric disagree: %d vs %d", p[0], p[1])
		}
	}
}

// BenchmarkEngineToyPackets measures the engine + NIC + fabric cost of one
// data packet (4 hops, payload elided) with the trivial toy transport: the
// floor under any real transport's per-packet cost.
func BenchmarkEngineToyPackets(b *testing.B) {
	n := newTestNet(b, fabric.ForwardUSID, 1)
	ea, qa, eb, _, _, _ := toyPair(b, n, 0, 2, uint32(MakeEV(1, 1, 7)))
	src := ea.Memory().RegisterVirtual(uint64(b.N) * 4096)
	dst := eb.Memory().RegisterVirtual(uint64(b.N) * 4096)
	b.ReportAllocs()
	b.ResetTimer()
	ea.Post(qa.QPN(), verbs.WorkRequest{LocalKey: src.Key, LocalVA: src.VA, Length: src.Len, RemoteKey: dst.Key, RemoteVA: dst.VA})
	n.loop.Run()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpkt/s")
}

// A transport that keeps reporting a deadline its timer already served is
// not re-armed (it would spin the loop at one instant); the engine counts
// it and the run ends.
func TestEngineStaleDeadlineDoesNotSpin(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	_, _, eb, qb, _, _ := toyPair(t, n, 0, 3, uint32(MakeEV(0, 0, 1)))
	qb.deadline = 1000
	qb.stuck = true
	eb.rearm(eb.slot(qb.QPN()))
	n.loop.Run()
	if eb.Counters.StaleDeadlines != 1 || eb.Counters.TimerRuns != 1 || n.loop.Now() != 1000 {
		t.Fatalf("counters %+v at %v", eb.Counters, n.loop.Now())
	}
}

// TestEngineRetire: a retired QP stops mid-transfer — no more frames, its
// timer never runs — and frames still addressed to it are counted and
// dropped; retiring it again, or an unknown QPN, reports false.
func TestEngineRetire(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	ea, qa, eb, qb, _, _ := toyPair(t, n, 0, 3, uint32(MakeEV(0, 0, 1)))
	qa.paceNs = 10_000
	src := ea.Memory().RegisterVirtual(100 * 4096)
	dst := eb.Memory().RegisterVirtual(100 * 4096)
	if err := ea.Post(qa.QPN(), verbs.WorkRequest{ID: 1, LocalKey: src.Key, LocalVA: src.VA, Length: src.Len, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != nil {
		t.Fatal(err)
	}
	n.loop.RunUntil(200_000)
	sent := ea.Counters.TxPackets
	if sent < 15 || sent > 25 {
		t.Fatalf("%d packets in 200 µs at one per 10 µs", sent)
	}
	if !ea.Retire(qa.QPN()) || ea.Retire(qa.QPN()) || ea.Retire(0x999) {
		t.Fatal("Retire: want true once, then false; false for an unknown QPN")
	}
	if err := ea.Post(qa.QPN(), verbs.WorkRequest{ID: 2, LocalKey: src.Key, LocalVA: src.VA, Length: 100, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != verbs.ErrQPError {
		t.Fatalf("post on a retired QP: %v", err)
	}
	n.loop.Run()
	if ea.Counters.TxPackets != sent {
		t.Fatalf("after Retire: %d packets sent (was %d)", ea.Counters.TxPackets, sent)
	}
	// Its pacing timer is gone: the loop ends with the frames in flight,
	// not 80 × 10 µs later.
	if n.loop.Now() >= 300_000 {
		t.Fatalf("the retired QP's timer still ran the loop to %v", n.loop.Now())
	}
	// The peer's frames toward the retired QP are dropped and counted.
	before := qb.got
	if !eb.Retire(qb.QPN()) {
		t.Fatal("retire the responder")
	}
	qa2 := &toyQP{qpn: ea.AllocQPN(), mem: ea.Memory(), ev: uint32(MakeEV(0, 0, 1)), remoteQPN: qb.QPN(), remoteHost: 3, state: verbs.QPReady}
	ea.AddQP(qa2, &CQ{})
	if err := ea.Post(qa2.QPN(), verbs.WorkRequest{ID: 3, LocalKey: src.Key, LocalVA: src.VA, Length: 3 * 4096, RemoteKey: dst.Key, RemoteVA: dst.VA}); err != nil {
		t.Fatal(err)
	}
	n.loop.Run()
	if eb.Counters.RxRetired != 3 || qb.got != before || n.topo.Pool.Live != 0 {
		t.Fatalf("frames to a retired QP: RxRetired %d, got %d (was %d), live %d", eb.Counters.RxRetired, qb.got, before, n.topo.Pool.Live)
	}
}
