package fabric

import "github.com/vcluster/vcluster/sim"

// Port telemetry is what a switch ASIC keeps for its control plane (seed
// 003): per-port byte and frame counters (PortCounters' Tx/Rx, always
// kept) and, once EnableTelemetry is called, per-queue occupancy
// accumulated continuously — the time integral of each class queue's
// bytes and its high watermark since the last read. A control-plane
// sampler (package pathquality, SAI-style) reads snapshots with
// ReadTelemetry every period and differences them: Δbytes / Δt is the
// utilization, Δintegral / Δt the mean queue depth over the period.
//
// A port without telemetry pays one feature-bit test per queue change;
// with it, each push and pop of a class queue adds the bytes it held
// times the time since its previous change (exact, in byte·ns).

// PortSnapshot is one reading of a port's ASIC counters.
type PortSnapshot struct {
	At                 sim.Time // when it was read
	TxBytes, RxBytes   uint64   // PortCounters' (WireLen: frames with FCS)
	TxPackets          uint64
	RateBps            uint64             // the rate of the link the port sends on (0: none)
	Queue              [NumClasses]int    // bytes waiting per class now
	OccupancyByteNanos [NumClasses]uint64 // ∫ class bytes dt since EnableTelemetry (byte·ns)
	// Watermark is each class's peak bytes since the previous
	// ReadTelemetry (or EnableTelemetry): reading clears it, as SAI's
	// watermark stats read-and-clear.
	Watermark [NumClasses]int
}

// portObs is a port's observation state (telemetry and HDC), allocated
// the first time either is enabled, so a port without them carries one
// nil pointer.
type portObs struct {
	// Telemetry: per class, the occupancy integral up to last[c] and the
	// peak since the previous read.
	last     [NumClasses]sim.Time
	integral [NumClasses]uint64
	peak     [NumClasses]int
	// HDC (hdc.go): the switch's collector and the smaller of its two
	// thresholds, so that a frame below both costs one comparison.
	hdc    *HDCCollector
	hdcMin sim.Time
}

// observe returns the port's observation state, allocating it.
func (pt *Port) observe() *portObs {
	if pt.obs == nil {
		pt.obs = &portObs{}
	}
	return pt.obs
}

// EnableTelemetry starts the port's occupancy integrals and watermarks
// (idempotent). Call it before traffic flows or at any time after: the
// integral counts from the call.
func (pt *Port) EnableTelemetry() {
	if pt.feat&featTele != 0 {
		return
	}
	o := pt.observe()
	now := pt.loop.Now()
	for c := range o.last {
		o.last[c] = now
		o.integral[c] = 0
		o.peak[c] = pt.queues[c].bytes
	}
	pt.feat |= featTele
}

// teleNote accounts a change of delta bytes in class c's queue (already
// applied to it): the integral runs at the old level up to now. Only
// called with telemetry on.
func (pt *Port) teleNote(c int, delta int) {
	o := pt.obs
	now := pt.loop.Now()
	b := pt.queues[c].bytes
	o.integral[c] += uint64(b-delta) * uint64(now-o.last[c])
	o.last[c] = now
	if b > o.peak[c] {
		o.peak[c] = b
	}
}

// ReadTelemetry returns a snapshot of the port's counters now and clears
// its watermarks. Without EnableTelemetry the occupancy fields are zero.
// A cleared watermark restarts at the class's bytes now: the peak of the
// new interval is at least its starting level.
func (pt *Port) ReadTelemetry() PortSnapshot {
	now := pt.loop.Now()
	s := PortSnapshot{At: now, TxBytes: pt.Counters.TxBytes, RxBytes: pt.Counters.RxBytes, TxPackets: pt.Counters.TxPackets}
	if pt.Tx != nil {
		s.RateBps = pt.Tx.Rate
	}
	for c := range s.Queue {
		s.Queue[c] = pt.queues[c].bytes
	}
	if pt.feat&featTele == 0 {
		return s
	}
	o := pt.obs
	for c := range o.last {
		b := pt.queues[c].bytes
		o.integral[c] += uint64(b) * uint64(now-o.last[c])
		o.last[c] = now
		s.OccupancyByteNanos[c] = o.integral[c]
		s.Watermark[c] = o.peak[c]
		o.peak[c] = b
	}
	return s
}
