package cluster

import (
	"fmt"
	"time"

	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// RoCEConfig is the RoCE configuration of the index-th QP of a connection:
// QPs go round-robin over the planes (a RoCE QP is one flow on one plane
// and, under ECMP, one path), at the host link rate, with the configured
// reliability and congestion-control preset.
func (c *Cluster) RoCEConfig(index int) (roce.Config, error) {
	t := c.Config.Transport.RoCE
	r := roce.DefaultConfig()
	r.Plane = index % c.Topo.Planes
	r.LineRateBps = int64(c.hostRate())
	r.WireOverhead = c.frameOverhead()
	r.Reliability = t.Reliability
	r.RetryCount = t.RetryCount
	to, err := durationOr("transport.roce.timeout", t.Timeout, time.Duration(r.TimeoutNs))
	if err != nil {
		return r, err
	}
	r.TimeoutNs = int64(to)
	// IRN's BDP flow control caps what is in flight at two of the fabric's
	// bandwidth-delay products (base RTT plus the responder's ACK
	// coalescing): repairing a hole takes two RTTs, and a one-BDP cap
	// stalls the sender for the second (package roce measured 74% of line
	// rate at 1% loss with 1.25 BDP, 97% with 2).
	pkt := time.Duration(float64(r.PMTU+r.WireOverhead) * 8 / float64(c.hostRate()) * 1e9)
	rtt := c.BaseRTT() + time.Duration(r.AckEvery)*pkt
	r.IRN.BDPBytes = 2 * int64(float64(c.hostRate())/8*rtt.Seconds())
	if err := r.SetPreset(t.CC); err != nil {
		return r, fmt.Errorf("transport.roce.cc: %v", err)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("transport.roce: %v", err)
	}
	return r, nil
}

func (c *Cluster) newRoCE(e *endpoint.Engine, h, index int, qpn uint32) (verbs.Transport, error) {
	r, err := c.RoCEConfig(index)
	if err != nil {
		return nil, err
	}
	return roce.New(r, e.Memory(), qpn, c.qpSeed(h, qpn)), nil
}
