package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
)

func TestParallelFlag(t *testing.T) {
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	n := addParallelFlag(cmd)
	cmd.SetArgs([]string{"--parallel", "3"})
	if err := cmd.Execute(); err != nil || *n != 3 {
		t.Fatalf("--parallel 3 parsed as %d (%v)", *n, err)
	}
	if err := rejectParallel(0, "collective"); err != nil {
		t.Fatalf("--parallel 0 rejected: %v", err)
	}
	err := rejectParallel(2, "collective")
	var ee *exitError
	if err == nil || !strings.Contains(err.Error(), "collective cannot run partitioned") || !errors.As(err, &ee) || ee.code != 2 {
		t.Fatalf("rejection: %v", err)
	}
}

func TestParallelCluster(t *testing.T) {
	cfg, err := cluster.HtsimFatTreeConfig(4, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parallelCluster(cfg, 8) // more workers than pods: 4 partitions
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Partitioning(); p == nil || len(p.Loops) != 4 || c.Loop != nil {
		t.Fatalf("--parallel 8 on k=4: partitioning %v", p)
	}
	c.Close()
	if c, err = parallelCluster(cfg, 0); err != nil || c.Partitioning() != nil {
		t.Fatalf("--parallel 0: %v", err)
	}
	c.Close()
	bad, err := config.Load("", append(cluster.HtsimFatTreeSets(4), "output.pcap=h0/p0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parallelCluster(bad, 2); err == nil || !strings.Contains(err.Error(), "output.pcap") {
		t.Fatalf("pcap with --parallel 2: %v", err)
	}
}
