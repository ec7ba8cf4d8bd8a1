package cluster

import (
	"fmt"

	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/verbs"
)

func (c *Cluster) newRoCE(e *endpoint.Engine, h, index int, qpn uint32) (verbs.Transport, error) {
	return nil, fmt.Errorf("transport.kind: roce is not wired yet")
}
