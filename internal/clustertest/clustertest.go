// Package clustertest is a test helper: it builds the cluster a list of
// --set values describes (on the default config), failing the test on an
// invalid config and closing the cluster when the test ends. Tests of
// packages above cluster use it instead of each keeping a copy.
package clustertest

import (
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// New builds the classic cluster of the default config with sets applied.
func New(t testing.TB, sets ...string) *cluster.Cluster {
	t.Helper()
	cfg, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Transfer connects src to dst and starts an RDMA write of n bytes in
// chunk-sized writes between fresh regions of that size, failing the test
// on an error. It returns the transfer and the connection's first pair.
func Transfer(t testing.TB, c *cluster.Cluster, src, dst int, n, chunk uint64) (*cluster.Transfer, cluster.Pair) {
	t.Helper()
	ps, err := c.Connect(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := c.StartTransfer(ps[0], c.Region(src, n, nil), c.Region(dst, n, nil), n, chunk)
	if err != nil {
		t.Fatal(err)
	}
	return tr, ps[0]
}
