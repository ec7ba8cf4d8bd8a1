package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/verbs"
)

// MRC: multipath, sprays every plane; its config section is
// transport.mrc (mrc.Settings).
func init() {
	RegisterTransport(config.TransportMRC, TransportKind{
		New: func(c *Cluster, e *endpoint.Engine, h, _ int, qpn uint32) (verbs.Transport, error) {
			m, err := c.MRCConfig()
			if err != nil {
				return nil, err
			}
			return mrc.New(m, e.Memory(), qpn, c.qpSeed(h, qpn)), nil
		},
		DataPacketBytes: func(c config.Config) int { return pmtuOf(c) + mrc.PacketOverhead },
		QPBytes: func(t config.TransportConfig) uint64 {
			return memMRCQPBase + memMRCPerMPR*nonNeg(t.MRC.MPRUnits) + memMRCPerEV*nonNeg(t.MRC.EVsPerQP)
		},
	})
}

// MRCConfig is the MRC configuration the cluster's config and topology
// give.
func (c *Cluster) MRCConfig() (mrc.Config, error) {
	t := c.Config.Transport.MRC
	m := mrc.DefaultConfig()
	m.Planes = c.Topo.Planes
	m.PathsPerPlane = c.pathsPerPlane()
	m.EVsPerQP = t.EVsPerQP
	m.MPR = t.MPRUnits
	m.MaxWImm = t.MaxWImm
	m.PMTU = c.pmtu()
	rto, err := units.DurationOr("transport.mrc.rto", t.RTO, c.DefaultRTO())
	if err != nil {
		return m, err
	}
	m.RTO = int64(rto)
	m.DisableCC = !t.NSCC
	m.TLPFactor = t.TLPFactor
	m.RetryScope = mrc.RetryScope(t.RetryScope)
	m.LossDetection = mrc.LossDetection(t.LossDetection)
	m.Responder = t.Responder.Config()
	m.LinkBps = int64(c.Topo.Planes) * int64(c.hostRate())
	m.BaseRTT = int64(c.BaseRTT())
	m.Trimming = c.Config.Fabric.Queue.Trim.Enabled
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("transport.mrc: %v", err)
	}
	return m, nil
}
