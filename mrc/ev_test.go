package mrc

import (
	"math/rand/v2"
	"testing"
)

// onePlanePool is an EV pool of one plane with an active set of four EVs,
// scanned in a fixed order (no reshuffle before ReshuffleInterval).
func onePlanePool(t *testing.T) *evPool {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Planes, cfg.ActiveSetSize = 1, 4
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := &evPool{}
	p.init(&cfg, rand.New(rand.NewPCG(1, 2)))
	return p
}

// rotation picks n EVs in a row.
func rotation(p *evPool, now int64, n int) []int32 {
	out := make([]int32, n)
	for k := range out {
		out[k] = p.pick(now, 1, -1, -1)
	}
	return out
}

func same(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An ECN echo (SKIP_ONCE) costs its EV one turn in the scan, wherever in
// the rotation the echo arrives. Before: an EV whose turn in the current
// rotation had already passed went back to GOOD at the start of the next
// rotation, before its turn came again, and was never skipped — about half
// of all ECN echoes penalised nothing, so sprayed load stayed on
// ECN-marked paths (TestT8BlastRadius: one T0–T1 cable of 8 × 32 cost
// 2.72% instead of ~0.4%).
func TestSkipOnceAfterTurn(t *testing.T) {
	p := onePlanePool(t)
	order := rotation(p, 1, 4)
	if got := rotation(p, 2, 4); !same(got, order) {
		t.Fatalf("scan order changed without a reshuffle: %v then %v", order, got)
	}
	// Every EV has had its turn in this rotation; the echo for the first
	// one arrives now.
	p.skip(order[0], 3, CauseSackSkip)
	if got := rotation(p, 4, 3); !same(got, order[1:]) {
		t.Fatalf("after SKIP of %d once its turn had passed: next rotation %v, want %v (skipped once)", order[0], got, order[1:])
	}
	if s := p.evs[order[0]].state; s != EVSkip {
		t.Fatalf("EV %d is %v before its skipped turn's rotation ended, want SKIP", order[0], s)
	}
	// Skipped once: GOOD again, in its place, from the next rotation on.
	if got := rotation(p, 5, 4); !same(got, order) {
		t.Fatalf("rotation after the skipped turn: %v, want %v", got, order)
	}
	if s := p.evs[order[0]].state; s != EVGood {
		t.Fatalf("EV %d is %v after its skipped turn, want GOOD", order[0], s)
	}
}

// The echo arrives before the EV's turn in the current rotation: the EV
// misses that turn and is back in the next rotation (unchanged behaviour).
func TestSkipOnceBeforeTurn(t *testing.T) {
	p := onePlanePool(t)
	order := rotation(p, 1, 4)
	if got := rotation(p, 2, 1); got[0] != order[0] {
		t.Fatalf("scan order changed without a reshuffle")
	}
	p.skip(order[2], 3, CauseSackSkip)
	if got := rotation(p, 4, 2); !same(got, []int32{order[1], order[3]}) {
		t.Fatalf("rest of the rotation after SKIP of %d: %v, want %v", order[2], got, []int32{order[1], order[3]})
	}
	if got := rotation(p, 5, 4); !same(got, order) {
		t.Fatalf("rotation after the skipped turn: %v, want %v", got, order)
	}
	if s := p.evs[order[2]].state; s != EVGood {
		t.Fatalf("EV %d is %v after its skipped turn, want GOOD", order[2], s)
	}
}

// SKIP never blocks sending: with every active EV of the only plane in
// SKIP, the plane still sends, and every EV is GOOD again after that.
func TestSkipAllActive(t *testing.T) {
	p := onePlanePool(t)
	order := rotation(p, 1, 4)
	for _, i := range order {
		p.skip(i, 2, CauseSackSkip)
	}
	if got := p.pick(3, 1, -1, -1); got < 0 {
		t.Fatal("no EV with every active EV in SKIP")
	}
	for _, i := range order {
		if s := p.evs[i].state; s != EVGood {
			t.Fatalf("EV %d is %v after its plane skipped a whole rotation", i, s)
		}
	}
}
