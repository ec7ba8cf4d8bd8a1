package main

import (
	"fmt"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

// memoryHeadroom is the share of the available memory a run may plan to
// use: the rest is for the collector's slack, the binary and the kernel.
const memoryHeadroom = 0.9

// checkMemory refuses (exit 2) a run whose estimated memory
// (cluster.EstimateMemory with payloadBytesPerHost of registered memory on
// every host) exceeds 90% of what this machine has available, before
// anything is built. The message names the estimate, the available memory
// and the fix: payload elided when the buffers dominate, fewer hosts
// otherwise. Where the available memory cannot be read it checks nothing.
func checkMemory(cfg config.Config, payloadBytesPerHost uint64) error {
	return checkMemoryWith(cfg, payloadBytesPerHost, cluster.EstimateMemory(cfg, payloadBytesPerHost), cluster.AvailableMemory())
}

// checkMemoryConns is checkMemory for a workload that connects only
// connections pairs of hosts (cluster.EstimateMemoryConns), e.g. a
// permutation among a few hosts of cluster B.
func checkMemoryConns(cfg config.Config, payloadBytesPerHost, connections uint64) error {
	e := cluster.EstimateMemoryConns(cfg, payloadBytesPerHost, connections)
	return checkMemoryWith(cfg, payloadBytesPerHost, e, cluster.AvailableMemory())
}

// checkMemoryWith checks estimate e against avail bytes available (0:
// unknown, no check).
func checkMemoryWith(cfg config.Config, payloadBytesPerHost uint64, e cluster.MemoryEstimate, avail uint64) error {
	if avail == 0 {
		return nil
	}
	if float64(e.Total) <= memoryHeadroom*float64(avail) {
		return nil
	}
	hosts := max(cfg.Fabric.Hosts, 1)
	fix := fmt.Sprintf("use fewer hosts (%d now; the fabric and hosts take %.1f GiB)", cfg.Fabric.Hosts, gib(e.Fabric+e.Hosts))
	if e.Buffers >= e.Fabric+e.Hosts {
		fix = fmt.Sprintf("elide the payload (--set transport.payload=elided, or --elide on collective: the buffers, %d hosts × %.2f GiB, take %.1f GiB) or move fewer bytes",
			hosts, gib(payloadBytesPerHost), gib(e.Buffers))
	}
	return usageError(fmt.Errorf("not enough memory: this run needs about %.1f GiB (fabric %.1f, hosts %.1f, buffers %.1f) and %.1f GiB is available (at most %.0f%% of it may be used); %s",
		gib(e.Total), gib(e.Fabric), gib(e.Hosts), gib(e.Buffers), gib(avail), memoryHeadroom*100, fix))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
