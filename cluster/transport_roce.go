package cluster

import (
	"fmt"
	"time"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// RoCE: one flow on one plane (and, under ECMP, one path) per QP; its
// config section is transport.roce (roce.Settings).
func init() {
	RegisterTransport(config.TransportRoCE, TransportKind{
		New: func(c *Cluster, e *endpoint.Engine, h, plane int, qpn uint32) (verbs.Transport, error) {
			return c.newRoCE(e, h, plane, qpn)
		},
		SinglePlane: true,
		QPBytes: func(t config.TransportConfig) uint64 {
			if t.RoCE.Reliability == roce.IRN {
				return memRoCEQPIRN
			}
			return memRoCEQPGBN
		},
	})
}

// RoCEConfig is the RoCE configuration of a QP on plane (a RoCE QP is one
// flow on one plane and, under ECMP, one path), at the host link rate,
// with the configured reliability and congestion-control preset.
func (c *Cluster) RoCEConfig(plane int) (roce.Config, error) {
	t := c.Config.Transport.RoCE
	r := roce.DefaultConfig()
	if plane < 0 || plane >= c.Topo.Planes {
		return r, fmt.Errorf("cluster: RoCE QP on plane %d: the fabric has planes 0..%d", plane, c.Topo.Planes-1)
	}
	r.Plane = plane
	r.LineRateBps = int64(c.hostRate())
	r.WireOverhead = c.frameOverhead()
	r.Reliability = t.Reliability
	r.RetryCount = t.RetryCount
	to, err := units.DurationOr("transport.roce.timeout", t.Timeout, time.Duration(r.TimeoutNs))
	if err != nil {
		return r, err
	}
	r.TimeoutNs = int64(to)
	// IRN's BDP flow control caps what is in flight at
	// transport.roce.irnBDPFactor of the fabric's bandwidth-delay products
	// (base RTT plus the responder's ACK coalescing): 1 by default, the IRN
	// paper's cap; 2 leaves room for the second RTT a hole takes to repair
	// (docs/transports.md has both measured); 0 turns BDP-FC off.
	pkt := time.Duration(float64(r.PMTU+r.WireOverhead) * 8 / float64(c.hostRate()) * 1e9)
	rtt := c.BaseRTT() + time.Duration(r.AckEvery)*pkt
	f := t.IRNBDPFactor
	r.IRN.BDPFC = f > 0
	if f == 0 {
		f = 1 // off, one BDP still sizes the responder's out-of-order window
	}
	r.IRN.BDPBytes = max(int64(f*float64(c.hostRate())/8*rtt.Seconds()), int64(r.PMTU))
	if err := r.SetPreset(t.CC); err != nil {
		return r, fmt.Errorf("transport.roce.cc: %v", err)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("transport.roce: %v", err)
	}
	return r, nil
}

func (c *Cluster) newRoCE(e *endpoint.Engine, h, plane int, qpn uint32) (verbs.Transport, error) {
	r, err := c.RoCEConfig(plane)
	if err != nil {
		return nil, err
	}
	return roce.New(r, e.Memory(), qpn, c.qpSeed(h, qpn)), nil
}
