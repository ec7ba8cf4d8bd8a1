package main

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/sim"
)

func init() { benchCommands = append(benchCommands, newBenchHostsCmd) }

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func newBenchHostsCmd() *cobra.Command {
	var hosts, perT0, t1 int
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "Build time and memory of the fabric and of the virtual hosts (netstack + NIC + addressing)",
		Example: `  vcluster bench hosts                      # 8192 hosts on the default 4-plane Clos
  vcluster bench hosts --hosts 1024 --set fabric.planes=8`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, kv := range []string{"fabric.hostsPerT0=" + strconv.Itoa(perT0), "fabric.t1PerPlane=" + strconv.Itoa(t1), "fabric.hosts=" + strconv.Itoa(hosts)} {
				if err := cmd.Flags().Set("set", kv); err != nil {
					return usageError(err)
				}
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if err := checkMemory(cfg, 0); err != nil {
				return err
			}
			h0 := liveHeap()
			loop := sim.NewLoop(sim.Options{Seed: cfg.Seed})
			t0 := time.Now()
			topo, err := cluster.BuildTopology(loop, cfg)
			if err != nil {
				return usageError(err)
			}
			tTopo := time.Since(t0)
			h1 := liveHeap()
			t1 := time.Now()
			hs, err := endpoint.NewHosts(loop, topo, endpoint.HostOptions{MTU: uint32(cfg.Fabric.MTU)})
			if err != nil {
				return err
			}
			tHosts := time.Since(t1)
			h2 := liveHeap()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "fabric: %s, %d planes, %d switches, %d ports: built in %v, %.1f MiB\n",
				topo.Kind, topo.Planes, len(topo.Switches), len(topo.PortNames()), tTopo.Round(time.Millisecond), float64(h1-h0)/(1<<20))
			fmt.Fprintf(w, "hosts:  %d built in %v (%.1f µs each), %.1f KiB per host (netstack + NIC + addressing), goroutines %d\n",
				len(hs), tHosts.Round(time.Millisecond), float64(tHosts.Microseconds())/float64(len(hs)), float64(h2-h1)/float64(len(hs))/1024, runtime.NumGoroutine())
			runtime.KeepAlive(hs)
			runtime.KeepAlive(topo)
			return nil
		},
	}
	cmd.Flags().IntVar(&hosts, "hosts", 8192, "hosts to build (fabric.hosts)")
	cmd.Flags().IntVar(&perT0, "hosts-per-t0", 32, "hosts per T0 (fabric.hostsPerT0)")
	cmd.Flags().IntVar(&t1, "t1", 32, "T1 switches per plane (fabric.t1PerPlane)")
	limit(cmd.Flags(), "hosts", intIn(1, maxFlagHosts, ""))
	limit(cmd.Flags(), "hosts-per-t0", intIn(1, 4096, ""))
	limit(cmd.Flags(), "t1", intIn(1, 4096, ""))
	return cmd
}
