package fabric

import (
	"time"

	"github.com/vcluster/vcluster/sim"
)

// High-delay capture (HDC, seed 003): INT-style per-hop timestamps — a
// frame's enqueue time at its egress queue (Packet.EnqAt) and its dequeue
// time — give its queueing delay at every switch hop, the switch's fixed
// pipeline latency excluded. A frame whose queueing delay exceeds its
// class's threshold produces a capture record: the first SnapLen bytes of
// the frame plus the INT metadata of the seed's JSON (ingress port, egress
// port, queue id, queue depth in bytes, latency, timestamp), sent to the
// switch's collector (its CPU), which keeps the records and aggregates
// delay per egress port for the control plane (package pathquality).

// HDCConfig configures high-delay capture on a switch.
type HDCConfig struct {
	// RDMAThreshold applies to RoCEv2 frames (UDP destination port 4791,
	// outer or inside IPv6-in-IPv6), OtherThreshold to every other frame.
	// A frame is captured when its queueing delay is strictly greater.
	// Defaults 5 µs and 50 µs (the seed's).
	RDMAThreshold, OtherThreshold time.Duration
	// SnapLen is the bytes of the frame a record keeps (default and
	// maximum HDCSnapLen).
	SnapLen int
	// MaxRecords bounds the records a collector keeps (default 100000);
	// beyond it records are counted (HDCCollector.Overflow) but not kept.
	MaxRecords int
}

// HDCSnapLen is the seed's excerpt: the first 150 bytes of the frame.
const HDCSnapLen = 150

// HDCRecord is one high-delay capture.
type HDCRecord struct {
	Timestamp   sim.Time      // when the frame left the queue (ns of virtual time)
	Latency     time.Duration // its queueing delay at this hop
	Switch      int32         // index into Topology.Switches
	IngressPort int32         // port index on the switch; -1: the switch made the frame
	EgressPort  int32
	QueueID     uint8 // the egress traffic class
	RDMA        bool  // judged against RDMAThreshold
	QueueDepth  int   // bytes in the egress class queue when the frame left it
	OrigLen     int   // the frame's length without FCS
	SnapLen     int   // bytes of Excerpt kept
	Excerpt     [HDCSnapLen]byte
}

// HDCPortDelay is a collector's aggregate for one egress port.
type HDCPortDelay struct {
	Records    uint64        // captures
	SumLatency time.Duration // their total queueing delay
	MaxLatency time.Duration
}

// HDCCollector is a switch's capture collector (its CPU).
type HDCCollector struct {
	Switch   *Switch
	Config   HDCConfig // with defaults applied
	Records  []HDCRecord
	Overflow uint64 // captures beyond MaxRecords (counted, not kept)
	// Total per egress port since EnableHDC (index: port index).
	Total []HDCPortDelay
}

// EnableHDC turns on high-delay capture at every port of the switch and
// returns its collector (calling it again replaces the configuration and
// keeps the collector). Invalid settings (negative thresholds, SnapLen
// beyond HDCSnapLen, negative MaxRecords) are an error naming the field.
func (s *Switch) EnableHDC(c HDCConfig) (*HDCCollector, error) {
	panic("fabric: EnableHDC not implemented yet")
}

// HDC returns the switch's collector, or nil.
func (s *Switch) HDC() *HDCCollector { return s.hdc }

// TakeWindow returns, per egress port, the captures since the previous
// TakeWindow (or EnableHDC) and starts a new window: what the control
// plane folds into a link's delay factor each period.
func (c *HDCCollector) TakeWindow() []HDCPortDelay {
	panic("fabric: TakeWindow not implemented yet")
}
