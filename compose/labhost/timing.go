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
// marks a healthy EV bad. 10 ms is several of those round trips; a peer
// that stops answering still errors its QPs within the retry limit
// (70 × 10 ms with MRC's default schedule).
const LabRTO = 10 * time.Millisecond

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
