package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

func memcheckConfig(t *testing.T, sets ...string) config.Config {
	t.Helper()
	c, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantUsage(t *testing.T, err error, parts ...string) {
	t.Helper()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("err = %v; want a usage error (exit 2)", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not mention %q", err, p)
		}
	}
}

func TestCheckMemoryRefusesPayloadThatCannotFit(t *testing.T) {
	// 64 hosts × 1 GiB of real payload on a machine with 16 GiB available.
	cfg := memcheckConfig(t, "fabric.preset=C", "fabric.hostsPerT0=16")
	err := checkMemoryWith(cfg, 1<<30, cluster.EstimateMemory(cfg, 1<<30), 16<<30)
	wantUsage(t, err, "64.0 GiB", "16.0 GiB is available", "--elide")
	// The same run with the payload elided fits.
	cfg.Transport.Payload = config.PayloadElided
	if err := checkMemoryWith(cfg, 1<<30, cluster.EstimateMemory(cfg, 1<<30), 16<<30); err != nil {
		t.Errorf("elided payload: %v", err)
	}
}

func TestCheckMemoryRefusesTooManyHosts(t *testing.T) {
	// 10^6 hosts: validation refuses them (fabric.hosts has a maximum), and
	// the estimate alone refuses them too, on a 64 GiB machine.
	if _, err := config.Load("", []string{"fabric.hostsPerT0=1000", "fabric.t0PerPlane=1000"}); err == nil {
		t.Error("a 10^6-host config passed validation")
	}
	cfg := config.Default()
	cfg.Fabric.HostsPerT0, cfg.Fabric.T0PerPlane, cfg.Fabric.Hosts = 1000, 1000, 1_000_000
	err := checkMemoryWith(cfg, 0, cluster.EstimateMemory(cfg, 0), 64<<30)
	wantUsage(t, err, "fewer hosts", "1000000")
}

// Cluster B fits where its 8192-flow permutation's QPs are counted, not a
// ring over all 131 072 hosts.
func TestCheckMemoryConnsCountsOnlyTheConnections(t *testing.T) {
	cfg := memcheckConfig(t, cluster.ClusterBSets()...)
	ring, perm := cluster.EstimateMemory(cfg, 0), cluster.EstimateMemoryConns(cfg, 0, 8192)
	// 6 GiB: since issue #16 an MRC QP's window is the spec's one MPR unit,
	// so the ring's QPs over 131 072 hosts need 8.8 GiB, not more than 12.
	if err := checkMemoryWith(cfg, 0, perm, 6<<30); err != nil {
		t.Errorf("cluster B, 8192 connections, 6 GiB available: %v", err)
	}
	if err := checkMemoryWith(cfg, 0, ring, 6<<30); err == nil {
		t.Errorf("cluster B with a ring over every host (%.1f GiB) fits 6 GiB?", gib(ring.Total))
	}
}

func TestCheckMemoryAcceptsSmallPreset(t *testing.T) {
	cfg := memcheckConfig(t, "fabric.preset=C")
	if err := checkMemory(cfg, 64<<20); err != nil {
		t.Errorf("16-host preset with 64 MiB per host: %v", err)
	}
	if err := checkMemoryWith(cfg, 64<<20, cluster.EstimateMemory(cfg, 64<<20), 0); err != nil {
		t.Errorf("unknown available memory must check nothing: %v", err)
	}
}
