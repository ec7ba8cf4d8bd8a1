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
// A port without telemetry pays one feature-bit test per queue change.

// PortSnapshot is one reading of a port's ASIC counters.
type PortSnapshot struct {
	At                 sim.Time // when it was read
	TxBytes, RxBytes   uint64   // PortCounters' (WireLen: frames with FCS)
	TxPackets          uint64
	RateBps            uint64 // the rate of the link the port sends on (0: none)
	Queue              [NumClasses]int    // bytes waiting per class now
	OccupancyByteNanos [NumClasses]uint64 // ∫ class bytes dt since EnableTelemetry (byte·ns)
	// Watermark is each class's peak bytes since the previous
	// ReadTelemetry (or EnableTelemetry): reading clears it, as SAI's
	// watermark stats read-and-clear.
	Watermark [NumClasses]int
}

// EnableTelemetry starts the port's occupancy integrals and watermarks
// (idempotent). Call it before traffic flows or at any time after: the
// integral counts from the call.
func (pt *Port) EnableTelemetry() {
	panic("fabric: EnableTelemetry not implemented yet")
}

// ReadTelemetry returns a snapshot of the port's counters now and clears
// its watermarks. Without EnableTelemetry the occupancy fields are zero.
func (pt *Port) ReadTelemetry() PortSnapshot {
	panic("fabric: ReadTelemetry not implemented yet")
}
