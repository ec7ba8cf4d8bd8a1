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
