package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/ib"

	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/verbs"
)

// Connections whose two ends live in different processes (a lab: every
// virtual host is its own process, building the whole cluster but running
// only its own host). Each process makes its own end with NewEnd,
// publishes End.Attrs() to the peer by whatever exchange it has, and
// connects its end to the peer's published attributes with ConnectEnd.
// Connect's plane spread (qpPlanes) counts the QPs a host opened in this
// process, which another process cannot know; a remote end takes its
// plane from RemotePlane instead, a function of the two hosts and the
// QP's index that both processes compute alike.

// RemotePlane is the plane of the i-th QP of a connection between hosts a
// and b made with NewEnd, for a single-plane transport (RoCE): (lo + hi +
// i) mod planes, with lo, hi the lower and the higher of the two hosts.
// Both ends compute the same plane whichever of them asks, and a host's
// connections to consecutive peers, like a connection's consecutive QPs,
// go round the planes. Multipath transports ignore it (0).
func (c *Cluster) RemotePlane(a, b, i int) int {
	if !c.SinglePlane() {
		return 0
	}
	lo, hi := min(a, b), max(a, b)
	return (lo + hi + i) % c.Topo.Planes
}

// NewEnd creates one QP of the configured transport on host h for a
// connection to host peer, with its own CQ (no handler yet), added to h's
// engine, not yet connected. i is the QP's index in the connection
// (0..transport.qpsPerConnection-1); a single-plane transport puts it on
// RemotePlane(h, peer, i), which the peer's end computes alike. Publish
// End.Attrs() to the peer and connect with ConnectEnd.
func (c *Cluster) NewEnd(h, peer, i int) (QPEnd, error) {
	n := len(c.Hosts)
	switch {
	case h < 0 || h >= n || peer < 0 || peer >= n || h == peer:
		return QPEnd{}, fmt.Errorf("cluster: NewEnd on host %d toward host %d: hosts must differ and be 0..%d", h, peer, n-1)
	case i < 0 || i >= c.Config.Transport.QPsPerConnection:
		return QPEnd{}, fmt.Errorf("cluster: NewEnd QP index %d: transport.qpsPerConnection is %d, want 0..%d",
			i, c.Config.Transport.QPsPerConnection, c.Config.Transport.QPsPerConnection-1)
	}
	e := c.Hosts[h].RDMA()
	t, err := c.NewTransport(h, c.RemotePlane(h, peer, i))
	if err != nil {
		return QPEnd{}, err
	}
	cq := &endpoint.CQ{}
	e.AddQP(t, cq)
	return QPEnd{Host: h, Engine: e, T: t, CQ: cq}, nil
}

// Attrs is what the peer's ConnectEnd needs of this end: its host, QP
// number and initial PSN (24 bits; the transport's defaults for the rest, which
// both processes derive from the same config).
func (e QPEnd) Attrs() verbs.QPAttrs {
	a := verbs.QPAttrs{Host: e.Host, InitialPSN: e.InitialPSN & ib.PSNMask}
	if e.T != nil {
		a.QPN = e.T.QPN()
	}
	return a
}

// ConnectEnd connects end e (from NewEnd) to the peer end described by
// remote, as that end's Attrs published it. The other process connects
// the peer end to e.Attrs().
func (c *Cluster) ConnectEnd(e QPEnd, remote verbs.QPAttrs) error {
	n := len(c.Hosts)
	switch {
	case e.T == nil || e.Engine == nil || e.Host < 0 || e.Host >= n || c.Hosts[e.Host].RDMA() != e.Engine:
		return fmt.Errorf("cluster: ConnectEnd: not an end NewEnd made on this cluster")
	case remote.Host < 0 || remote.Host >= n || remote.Host == e.Host:
		return fmt.Errorf("cluster: ConnectEnd on host %d: peer host %d, want another host of 0..%d", e.Host, remote.Host, n-1)
	case remote.QPN < endpoint.FirstQPN || remote.QPN > 0xffffff:
		return fmt.Errorf("cluster: ConnectEnd on host %d: peer QPN %#x, want %#x..0xffffff", e.Host, remote.QPN, endpoint.FirstQPN)
	}
	if err := endpoint.ConnectOne(e.Engine, e.T, e.Attrs(), remote); err != nil {
		return fmt.Errorf("cluster: ConnectEnd host %d QP %#x to host %d QP %#x: %w", e.Host, e.T.QPN(), remote.Host, remote.QPN, err)
	}
	return nil
}
