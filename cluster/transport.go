package cluster

import (
	"fmt"
	"slices"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/verbs"
)

// TransportKind is what the cluster needs of one transport kind
// (transport.kind): how to create a QP, and the few facts about it that
// the rest of the cluster depends on. It owns no state of its own.
//
// A kind is registered by one file of this package (transport_mrc.go,
// transport_roce.go): the transports sit below config and cluster in the
// layering (internal/layers), so they cannot register themselves, and the
// cluster is where a kind's config section meets its constructor. A new
// transport is its package plus one such file; its config section, if it
// has one, validates itself (see config.TransportConfig).
type TransportKind struct {
	// New creates the transport of a new QP numbered qpn on host h (e is
	// h's engine). plane is the plane a SinglePlane kind puts the QP on;
	// other kinds ignore it.
	New func(c *Cluster, e *endpoint.Engine, h, plane int, qpn uint32) (verbs.Transport, error)
	// SinglePlane says a QP sends on one plane only (RoCE: one flow, one
	// path). Connect then spreads each host's QPs over the planes (both
	// ends of a QP share one; see qpPlanes), and a pair's line rate is
	// one plane's, not the NIC's.
	SinglePlane bool
	// DataPacketBytes, if set, is the IP packet (IPv6 header onwards) of
	// the kind's full data packet when it is shorter than fabric.mtu (MRC:
	// transport.mrc.pmtu plus its headers): htsim's ECN thresholds count
	// whole data packets. nil: a full-MTU packet.
	DataPacketBytes func(c config.Config) int
	// QPBytes, if set, is the live heap of one QP end (EstimateMemory).
	QPBytes func(t config.TransportConfig) uint64
}

var (
	transports     = map[string]TransportKind{}
	transportNames []string // in registration order
)

// RegisterTransport makes kind a valid transport.kind, for the cluster and
// for config validation (config.RegisterTransportKind). Call it from an
// init function; a kind registered twice, or without New, panics.
func RegisterTransport(kind string, t TransportKind) {
	if kind == "" || t.New == nil {
		panic(fmt.Sprintf("cluster: RegisterTransport(%q): needs a name and New", kind))
	}
	if _, dup := transports[kind]; dup {
		panic(fmt.Sprintf("cluster: transport kind %q registered twice", kind))
	}
	transports[kind] = t
	transportNames = append(transportNames, kind)
	config.RegisterTransportKind(kind)
}

// LookupTransport returns the registered transport kind.
func LookupTransport(kind string) (TransportKind, bool) {
	t, ok := transports[kind]
	return t, ok
}

// TransportKinds lists the registered kinds in registration order.
func TransportKinds() []string { return slices.Clone(transportNames) }

// transportKind is the configured kind; validation already refused an
// unregistered one.
func (c *Cluster) transportKind() (TransportKind, error) {
	t, ok := transports[c.Config.Transport.Kind]
	if !ok {
		return t, fmt.Errorf("transport.kind: unknown %q (registered: %q)", c.Config.Transport.Kind, transportNames)
	}
	return t, nil
}

// SinglePlane says whether the configured transport puts each QP on one
// plane (TransportKind.SinglePlane): a pair then runs at one plane's rate.
func (c *Cluster) SinglePlane() bool {
	t, _ := c.transportKind()
	return t.SinglePlane
}

// qpPlanes spreads the QPs of a single-plane transport (RoCE) over the
// planes per host, as NCCL spreads its channels over a NIC's ports: the
// k-th QP a host opens — as the first host of Connect, counted over all
// its connections in the order they are made — goes on plane k mod planes,
// and the QP's other end takes the same plane (its data and
// acknowledgements share the plane). The opening host's count decides; the
// accepting host's is not advanced. In an all-to-all (pairs connected lower
// host first) that spreads both ends: host a's QP to b > a is its
// (b−a−1)-th, so a host's QPs to higher and lower peers each go round the
// planes.
type qpPlanes struct {
	opened []int // per host: QPs opened as the first host of Connect
}

// next returns the plane of the next QP host h opens and counts it.
func (p *qpPlanes) next(h, hosts, planes int) int {
	if p.opened == nil {
		p.opened = make([]int, hosts)
	}
	k := p.opened[h]
	p.opened[h]++
	return k % planes
}
