package sim

// HoldModel is the classic event-queue benchmark: a constant number of
// pending events, each of which schedules one successor a random delay
// later. Delays (exponential, mean 20 µs, like serialisation, propagation
// and transport timers mixed) come from a precomputed table so the model
// measures the loop, not the random generator. Used by the benchmarks in
// this package and by `vcluster bench loop`.
type HoldModel struct {
	L      *Loop
	delays []Time
	i      int
}

// NewHoldModel returns a loop holding pending events, warmed up to its
// steady state.
func NewHoldModel(seed uint64, pending int) *HoldModel {
	h := &HoldModel{L: NewLoop(Options{Seed: seed})}
	rng := NewStream(seed, "hold")
	for range 1 << 16 {
		h.delays = append(h.delays, Time(1+rng.ExpFloat64()*20000))
	}
	for i := range pending {
		h.L.Schedule(Time(rng.IntN(100000)), h, uint64(i))
	}
	for range 4 * pending {
		h.L.Step()
	}
	return h
}

// OnEvent schedules the successor.
func (h *HoldModel) OnEvent(arg uint64) {
	h.i++
	h.L.Post(h.L.now+h.delays[h.i&(len(h.delays)-1)], h, arg)
}

// Steps runs n events.
func (h *HoldModel) Steps(n int) {
	for range n {
		h.L.Step()
	}
}
