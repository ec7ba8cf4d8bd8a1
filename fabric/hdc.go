package fabric

import (
	"encoding/binary"
	"fmt"
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
	Latency     time.Duration // its queueing delay at this hop: dequeue − Packet.EnqAt
	Switch      int32         // index into Topology.Switches (Switch.ID − 1)
	IngressPort int32         // port index on the switch; -1: not forwarded by it (see EnableHDC)
	EgressPort  int32
	QueueID     uint8 // the egress traffic class
	RDMA        bool  // judged against RDMAThreshold
	// QueueDepth is the bytes (WireLen) left in the egress class queue
	// just after the frame left it: the backlog behind it.
	QueueDepth int
	OrigLen    int // the frame's length without FCS
	SnapLen    int // bytes of Excerpt kept: min(SnapLen, stored bytes)
	Excerpt    [HDCSnapLen]byte
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

	window, spare []HDCPortDelay // TakeWindow's current window and the other buffer
}

// HDC defaults (the seed's).
const (
	DefaultHDCRDMAThreshold  = 5 * time.Microsecond
	DefaultHDCOtherThreshold = 50 * time.Microsecond
	DefaultHDCMaxRecords     = 100000
)

// WithDefaults returns c with its zero fields set to the defaults.
func (c HDCConfig) WithDefaults() HDCConfig {
	if c.RDMAThreshold == 0 {
		c.RDMAThreshold = DefaultHDCRDMAThreshold
	}
	if c.OtherThreshold == 0 {
		c.OtherThreshold = DefaultHDCOtherThreshold
	}
	if c.SnapLen == 0 {
		c.SnapLen = HDCSnapLen
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultHDCMaxRecords
	}
	return c
}

// Validate reports the first invalid field (zero fields are valid: they
// take the defaults).
func (c HDCConfig) Validate() error {
	switch {
	case c.RDMAThreshold < 0:
		return fmt.Errorf("hdc.rdmaThreshold: must be ≥ 0 (0: %v), got %v", DefaultHDCRDMAThreshold, c.RDMAThreshold)
	case c.OtherThreshold < 0:
		return fmt.Errorf("hdc.otherThreshold: must be ≥ 0 (0: %v), got %v", DefaultHDCOtherThreshold, c.OtherThreshold)
	case c.SnapLen < 0 || c.SnapLen > HDCSnapLen:
		return fmt.Errorf("hdc.snapLen: must be 0..%d (0: %d), got %d", HDCSnapLen, HDCSnapLen, c.SnapLen)
	case c.MaxRecords < 0:
		return fmt.Errorf("hdc.maxRecords: must be ≥ 0 (0: %d), got %d", DefaultHDCMaxRecords, c.MaxRecords)
	}
	return nil
}

// EnableHDC turns on high-delay capture at every port of the switch and
// returns its collector (calling it again replaces the configuration and
// keeps the collector). Invalid settings (negative thresholds, SnapLen
// beyond HDCSnapLen, negative MaxRecords) are an error naming the field;
// zero fields take the defaults (5 µs, 50 µs, HDCSnapLen, 100000).
//
// The switch then stamps every frame it forwards with its ingress port
// (Packet.hopIn): a record's IngressPort. Frames that did not come through
// its forwarding have IngressPort -1: MAC control frames (never in a
// class queue, so never captured anyway) and frames a device put on the
// port with Enqueue. A programmable ToR's FReTx copies are forwarded, so
// they carry the ingress port of the frame they copy.
func (s *Switch) EnableHDC(c HDCConfig) (*HDCCollector, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.WithDefaults()
	col := s.hdc
	if col == nil {
		n := len(s.Ports)
		col = &HDCCollector{Switch: s, Total: make([]HDCPortDelay, n),
			window: make([]HDCPortDelay, n), spare: make([]HDCPortDelay, n)}
		s.hdc = col
	}
	col.Config = c
	lo := min(c.RDMAThreshold, c.OtherThreshold)
	for _, pt := range s.Ports {
		o := pt.observe()
		o.hdc, o.hdcMin = col, sim.Time(lo)
		pt.feat |= featHDC
	}
	s.hdcOn = true
	return col, nil
}

// HDC returns the switch's collector, or nil.
func (s *Switch) HDC() *HDCCollector { return s.hdc }

// TakeWindow returns, per egress port, the captures since the previous
// TakeWindow (or EnableHDC) and starts a new window: what the control
// plane folds into a link's delay factor each period. The collector owns
// the slice and reuses it: it is valid until the next TakeWindow (no
// allocation per call).
func (c *HDCCollector) TakeWindow() []HDCPortDelay {
	w := c.window
	clear(c.spare)
	c.window, c.spare = c.spare, w
	return w
}

// check runs at the dequeue of p from class c of switch port pt, whose
// queueing delay is above the smaller threshold: it captures p if it is
// above its own class's.
func (c *HDCCollector) check(pt *Port, p *Packet, class int, now sim.Time) {
	d := time.Duration(now - p.EnqAt)
	rdma := IsRoCEv2(p.Data)
	th := c.Config.OtherThreshold
	if rdma {
		th = c.Config.RDMAThreshold
	}
	if d <= th {
		return
	}
	e := pt.Index
	for _, a := range [2]*HDCPortDelay{&c.Total[e], &c.window[e]} {
		a.Records++
		a.SumLatency += d
		if d > a.MaxLatency {
			a.MaxLatency = d
		}
	}
	if len(c.Records) >= c.Config.MaxRecords {
		c.Overflow++
		return
	}
	c.Records = append(c.Records, HDCRecord{})
	r := &c.Records[len(c.Records)-1]
	r.Timestamp, r.Latency = now, d
	r.Switch, r.IngressPort, r.EgressPort = int32(c.Switch.ID-1), p.hopIn-1, e
	r.QueueID, r.RDMA = uint8(class), rdma
	r.QueueDepth = pt.queues[class].bytes
	r.OrigLen = p.WireLen - FCSLen
	r.SnapLen = copy(r.Excerpt[:c.Config.SnapLen], p.Data)
}

// IsRoCEv2 reports whether frame (from the Ethernet header on) is RoCEv2:
// IPv6 whose UDP destination port is 4791, directly or inside IPv6-in-IPv6
// (any depth). A frame cut short (trimmed, elided) is judged on the
// headers it still has; it never panics.
func IsRoCEv2(frame []byte) bool {
	if len(frame) < offL4 || binary.BigEndian.Uint16(frame[12:]) != EtherTypeIPv6 {
		return false
	}
	for off := offIPv6; off+IPv6HeaderLen <= len(frame); {
		nh := frame[off+6]
		off += IPv6HeaderLen
		if nh != ProtoIPv6 {
			return nh == ProtoUDP && off+UDPHeaderLen <= len(frame) &&
				binary.BigEndian.Uint16(frame[off+2:]) == RoCEv2Port
		}
	}
	return false
}
