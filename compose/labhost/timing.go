package labhost

import (
	"time"

	"github.com/vcluster/vcluster/config"
)

// LabRTO is the retransmission timeout (transport.mrc.rto,
// transport.roce.timeout) a lab host's transports get unless the config
// sets its own. The derived ones do not fit a lab: cluster.DefaultRTO is
// the scaled fabric's base RTT plus its worst queueing, capped at
// cluster.MaxDerivedRTO (2 ms), and RoCE's default is 524 µs, while every
// frame of a lab also crosses two loopback UDP hops (host → fabric →
// host: 10–100 µs each, and milliseconds on a loaded machine, where the
// loops run late) that the virtual clock does not model. A timeout that
// fires on a packet only waiting costs a retransmission and, for MRC,
// marks a healthy EV bad — and MRC counts its retry limit per connection
// by default (transport.mrc.retryScope=connection): 13 packets in flight
// through one stall longer than the timeout fail the QP at once. A loaded
// machine stalls a loop for milliseconds (a 2-core box running the race
// detector: over 10 ms), and a lab whose loops cannot keep up with its
// link speeds lags further: four hosts of 4 × 1 Gb/s and their fabric on
// 2 cores ran their loops up to 160 ms late in a 32 MiB allreduce, and
// 50 ms failed it (measured; docs/benchmarks.md). So 500 ms. A process
// that dies is noticed sooner by the members' API watch
// (PeerWatchPeriod), not by its QPs.
const LabRTO = 500 * time.Millisecond

// LabTimers returns c with the transports' timeouts raised to LabRTO
// where the config left them to their defaults. Apply it after
// labspec.Resolve, to the config the host builds its cluster from: the
// digest the fabric compares is the resolved config's (the fabric runs no
// transport), so both ends keep agreeing.
func LabTimers(c config.Config) config.Config {
	if c.Transport.MRC.RTO == "" {
		c.Transport.MRC.RTO = LabRTO.String()
	}
	if c.Transport.RoCE.Timeout == "" {
		c.Transport.RoCE.Timeout = LabRTO.String()
	}
	return c
}
