package mrc

import (
	"flag"
	"os"
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// TestMain runs every mrc test with debugInvariants set: each input to a
// QP checks the send-state, EV-pool and responder invariants
// (checkInvariants) and panics on the first that fails. A run with
// -test.bench leaves them off, so benchmarks measure the production path.
func TestMain(m *testing.M) {
	flag.Parse()
	debugInvariants = flag.Lookup("test.bench").Value.String() == ""
	os.Exit(m.Run())
}

// The invariant checks see a corrupted QP: each corruption below breaks
// one invariant of sendState (sendstate.go), the EV pool or the
// responder, and checkInvariants must name it.
func TestInvariantsCatchCorruption(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func(a, b *QP)
	}{
		{"inflight bytes", func(a, b *QP) { a.inflight += 7 }},
		{"held count", func(a, b *QP) { a.held++ }},
		{"record freed in the window", func(a, b *QP) { a.recs[ib.PSNAdd(a.cack, 1)&a.recMask].state = sendFree }},
		{"lost without a queue entry", func(a, b *QP) {
			r := &a.recs[ib.PSNAdd(a.cack, 1)&a.recMask]
			a.inflight -= int64(r.plen)
			r.state = sendLost
		}},
		{"timer lost", func(a, b *QP) { a.timers = a.timers[:0] }},
		{"send order lost", func(a, b *QP) { a.order.Clear() }},
		{"usable EV count", func(a, b *QP) { a.evs.usable-- }},
		{"GOOD count of a plane", func(a, b *QP) { a.evs.planes[0].good++ }},
		{"responder bitmap", func(a, b *QP) { b.rcvAbove++ }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b := newPair(t, smallCfg(), 1<<20)
			a.write(b, 1, verbs.OpWrite, 0, 64<<10, 0)
			ps := a.drain(0, 0xffff)
			b.recv(1000, ps[len(ps)/2:]...) // a hole: B holds PSNs above ePSN
			if err := a.q.checkInvariants(); err != nil {
				t.Fatalf("before: %v", err)
			}
			if err := b.q.checkInvariants(); err != nil {
				t.Fatalf("before (responder): %v", err)
			}
			c.corrupt(a.q, b.q)
			errA, errB := a.q.checkInvariants(), b.q.checkInvariants()
			if errA == nil && errB == nil {
				t.Fatal("corruption not caught")
			}
			t.Log(errA, errB)
		})
	}
}

// setState refuses, under debugInvariants, every transition the diagram on
// sendState does not draw.
func TestIllegalSendTransitionPanics(t *testing.T) {
	defer func(was bool) { debugInvariants = was }(debugInvariants)
	debugInvariants = true
	for from := sendState(0); from < numSendStates; from++ {
		for to := sendState(0); to < numSendStates; to++ {
			q := &QP{}
			r := &pktRec{state: from}
			func() {
				defer func() {
					if got := recover() != nil; got == legalSend[from][to] {
						t.Errorf("%v → %v: panicked %v, legal %v", from, to, got, legalSend[from][to])
					}
				}()
				q.setState(1, r, to)
			}()
		}
	}
}
