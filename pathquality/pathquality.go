// Package pathquality is seed 003's control plane: dynamic path-quality
// routing from switch counters and INT/HDC delay capture. Every switch of
// the fabric runs, in virtual time, what a SONiC switch runs beside its
// ASIC:
//
//   - a sampler (SAI-style) that reads each port's ASIC counters
//     (fabric.Port.ReadTelemetry) every SamplePeriod and differences them
//     into utilization and mean queue depth, kept per port as a time series
//     (the seed's Redis TSDB, in memory here and exported as CSV);
//   - the HDC collector's per-port delay (fabric.HDCCollector.TakeWindow);
//   - a per-link quality score from available bandwidth, queue depth and
//     delay, and a path bandwidth per destination subnet, advertised to
//     its neighbours every AdvertisePeriod as a BGP UPDATE carrying a path
//     bandwidth extended community (encoded bytes, not a BGP session), with
//     damping;
//   - the weights of its next hops toward each subnet, set from its own
//     links' scores and its neighbours' advertisements
//     (fabric.Switch.SetPathWeights), which forwarding mode pathquality
//     follows.
//
// It owns the scoring formula, the update wire format and the time
// series; it knows the fabric only through fabric's exported API (ports,
// peers, next-hop groups, telemetry, HDC, weights) and schedules its work
// as a sim.Scheduler's events (a partitioned cluster's global events, so
// it reads counters and writes tables with every partition stopped). It
// knows nothing of transports, hosts or experiments. docs/pathquality.md
// documents the formula, the wire format and the scaling of the periods.
package pathquality

import (
	"time"

	"github.com/vcluster/vcluster/fabric"
)

// Weights weigh the three factors of a link's score (any non-negative
// scale, not all zero; normalized to sum 1).
type Weights struct {
	Bandwidth, Queue, Delay float64
}

// Config configures the control plane. Zero fields take the defaults
// (WithDefaults); Validate names the field of any invalid value.
type Config struct {
	// SamplePeriod: how often the sampler reads the counters (default
	// 500ms, the seed's; 100ms and scaled periods down to 1µs allowed).
	SamplePeriod time.Duration
	// AdvertisePeriod: how often each switch advertises path bandwidth
	// (default 1s, the seed's); ≥ SamplePeriod.
	AdvertisePeriod time.Duration
	// Weights of the score (default bandwidth 0.5, queue 0.25, delay 0.25).
	Weights Weights
	// QueueRefBytes: the mean queue depth at which the queue factor is 0
	// (default: the port's buffer).
	QueueRefBytes int
	// DelayRef: the mean queueing delay at which the delay factor is 0
	// (default 10 × HDC.RDMAThreshold).
	DelayRef time.Duration
	// DampingFraction, DampingMinGbps: a switch sends no update for a
	// subnet unless its path bandwidth moved from the last advertised value
	// by more than both DampingFraction of it and DampingMinGbps (defaults
	// 0.1 and 1).
	DampingFraction, DampingMinGbps float64
	// ControlDelay: from a switch sending an update to its neighbour
	// applying it (default 100µs).
	ControlDelay time.Duration
	// HDC is every switch's high-delay capture (fabric.HDCConfig defaults).
	HDC fabric.HDCConfig
	// Apply: set the switches' weights (forwarding pathquality follows
	// them). False measures and advertises only (to count the control
	// plane under ECMP or uSID forwarding).
	Apply bool
}

// Stats are the control plane's totals.
type Stats struct {
	Samples           uint64 // port readings
	UpdatesSent       uint64 // UPDATE messages sent (one per neighbour and change)
	UpdateBytes       uint64 // their encoded bytes
	UpdatesSuppressed uint64 // changes held back by damping
	WeightChanges     uint64 // SetPathWeights calls that moved buckets
	BucketsMoved      uint64
	HDCRecords        uint64 // captures, every switch (kept and overflowed)
}

// LinkState is a switch port's latest view: the sampler's last period and
// the score it gives the link the port sends on.
type LinkState struct {
	Switch, Port, Peer string // the peer device's port name
	CapacityGbps       float64
	Utilization        float64 // 0..1 over the last sample period
	MeanQueueBytes     float64
	MeanDelay          time.Duration // from HDC: Σ latency / frames sent
	Score              float64       // 0..1
	QualityGbps        float64       // CapacityGbps × Score
}

// RouteState is what a switch advertises toward a subnet and the weights
// it forwards with.
type RouteState struct {
	Switch     string
	Subnet     int
	Advertised float64 // the path bandwidth last advertised, Gb/s (0: never)
	// Path is the path bandwidth computed at the switch's last advertise
	// tick, advertised or not (split horizon or damping may hold it back).
	Path float64
	// Weights are the weights of the next hops (fabric.Switch.NextHops
	// order) last computed; set on the switch when Config.Apply. Nil for
	// the switch's own subnet.
	Weights []float64
}
