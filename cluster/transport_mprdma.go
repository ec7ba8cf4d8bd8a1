package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mprdma"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// MP-RDMA, Random and OrderRE: multipath by destination address (a QP
// sprays over the receiver's path addresses, each routed over one spine
// under ECMP and static forwarding: docs/addressing.md) on every plane.
// The three share the section transport.mprdma; OrderRE also reads
// transport.orderre (mprdma.Settings, mprdma.OrderRESettings).
func init() {
	for _, k := range []struct {
		kind   string
		scheme mprdma.Scheme
	}{
		{config.TransportMPRDMA, mprdma.SchemeMPRDMA},
		{config.TransportRandom, mprdma.SchemeRandom},
		{config.TransportOrderRE, mprdma.SchemeOrderRE},
	} {
		RegisterTransport(k.kind, TransportKind{
			New: func(c *Cluster, e *endpoint.Engine, h, _ int, qpn uint32) (verbs.Transport, error) {
				m, err := c.mprdmaConfig(k.scheme)
				if err != nil {
					return nil, err
				}
				return mprdma.New(m, e.Memory(), qpn, c.qpSeed(h, qpn)), nil
			},
			DataPacketBytes: func(c config.Config) int { return mprdmaPMTU(c.Fabric.MTU) + mprdmaPacketOverhead },
			QPBytes:         mprdmaQPBytes,
		})
	}
}

// mprdmaPacketOverhead is what a full MP-RDMA data packet adds to its
// payload inside the IPv6 MTU: IPv6 40, UDP 8, BTH 12, RETH 16 (on every
// packet: out-of-order placement), ICRC 4.
const mprdmaPacketOverhead = fabric.IPv6HeaderLen + fabric.UDPHeaderLen + roce.BTHLen + roce.RETHLen + roce.ICRCLen

// mprdmaPMTU is the path MTU a QP negotiates on a fabric of IPv6 MTU mtu:
// the largest of IB's PMTUs (256, 512, 1024, 2048, 4096) whose full packet
// fits (4096 at the default fabric.mtu 4200; 1024 at 1500).
func mprdmaPMTU(mtu int) int {
	p := 4096
	for p > 256 && p+mprdmaPacketOverhead > mtu {
		p /= 2
	}
	return p
}

// MPRDMAConfig is the mprdma configuration of the configured kind (mprdma,
// random or orderre) the cluster's config and topology give, before
// Config.Derived: what New builds a QP from.
func (c *Cluster) MPRDMAConfig() (mprdma.Config, error) {
	var s mprdma.Scheme
	switch k := c.Config.Transport.Kind; k {
	case config.TransportMPRDMA:
		s = mprdma.SchemeMPRDMA
	case config.TransportRandom:
		s = mprdma.SchemeRandom
	case config.TransportOrderRE:
		s = mprdma.SchemeOrderRE
	default:
		return mprdma.Config{}, fmt.Errorf("cluster: transport.kind %q is not an mprdma kind", k)
	}
	return c.mprdmaConfig(s)
}

// mprdmaConfig builds one QP's Config for scheme: the sections' values
// (mprdma.Settings.Apply), and from the fabric the PMTU, the planes, every
// path it offers unless transport.mprdma.paths says fewer, one BDP in
// packets — the NIC's rate over all planes (the QP sprays them all) × the
// base RTT / PMTU, rounded up —, the base RTT (the responder's test of a
// late original) and cluster.DefaultRTO unless transport.mprdma.rto is
// set.
func (c *Cluster) mprdmaConfig(scheme mprdma.Scheme) (mprdma.Config, error) {
	m := mprdma.DefaultConfig()
	m.Scheme = scheme
	m.PMTU = mprdmaPMTU(c.Config.Fabric.MTU)
	m.Planes = c.Topo.Planes
	m.Paths = min(c.offeredPaths(), mprdma.MaxPaths)
	m.BDPPackets = c.mprdmaBDPPackets(m.PMTU)
	m.BaseRTT = int64(c.BaseRTT())
	t := c.Config.Transport
	m, err := t.MPRDMA.Apply(m, t.OrderRE, c.DefaultRTO())
	if err != nil {
		return m, err
	}
	if n := c.offeredPaths(); m.Paths > n {
		return m, fmt.Errorf("transport.mprdma.paths: %d, the fabric offers %d", m.Paths, n)
	}
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("transport.mprdma: %v", err)
	}
	return m, nil
}

// offeredPaths is how many distinct paths the fabric's path addresses
// name (config.FabricConfig.OfferedPaths, from the built topology).
func (c *Cluster) offeredPaths() int {
	if c.Topo.Kind == fabric.KindClos {
		return c.Topo.Planes * c.Topo.Clos.T1
	}
	return c.Topo.FatTree.K / 2
}

// mprdmaBDPPackets is one bandwidth-delay product of a QP in full packets
// of pmtu payload bytes: all planes' rate × the base RTT, at least 1.
func (c *Cluster) mprdmaBDPPackets(pmtu int) int {
	bits := float64(c.Topo.Planes) * float64(c.hostRate()) * c.BaseRTT().Seconds()
	n := int(bits/8/float64(pmtu) + 0.999999)
	return max(n, 1)
}

// mprdmaQPBytes is the live heap of one QP end: see memMPRDMA*.
func mprdmaQPBytes(t config.TransportConfig) uint64 {
	return memMPRDMAQPBase + memMPRDMAPerEntry*nonNeg(t.MPRDMA.BitmapEntries)
}

// One QP end's live heap, measured (TestMPRDMAQPBytesMeasured, 200
// connected pairs on the 4-spine leaf-spine: 7.4 kB per end with the
// default 64-entry bitmap, 233 kB with 4096): a fixed part (the QP, its
// queues, engine slot and CQ) and, per bitmap entry, the responder's slot
// and the requester's packet record (both rings round up to a power of
// two, which the linear fit absorbs within the estimate's ±50%).
const (
	memMPRDMAQPBase   = 3_800
	memMPRDMAPerEntry = 56
)
