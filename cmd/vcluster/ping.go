package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

func init() { extraCommands = append(extraCommands, newPingCmd) }

func newPingCmd() *cobra.Command {
	var from, to, plane, count int
	var payloadB uint64
	var interval time.Duration
	var pcapFile string
	cmd := &cobra.Command{
		Use:   "ping",
		Short: "ICMPv6 echo between two virtual hosts through their netstacks and the fabric (RTT in virtual time)",
		Example: `  vcluster ping                       # host 0 to the last host, plane 0
  vcluster ping --to 1 --plane 3 --count 5 --pcap ping.pcap
  vcluster ping --set fabric.forwarding=ecmp --preset B --hosts 64`,
		Args: noArgs,
	}
	load := presetFlags(cmd)
	f := cmd.Flags()
	f.IntVar(&from, "from", 0, "source host")
	f.IntVar(&to, "to", -1, "destination host (default: the last host)")
	f.IntVar(&plane, "plane", 0, "plane whose address to ping")
	f.IntVar(&count, "count", 3, "echo requests to send")
	bytesVar(f, &payloadB, "payload", 56, 0, 65535, "ICMPv6 data bytes (a size: 56, 1K, …; at most fabric.mtu − 48)")
	f.DurationVar(&interval, "interval", time.Millisecond, "virtual time between requests")
	f.StringVar(&pcapFile, "pcap", "", "capture the source NIC's port in that plane to `file`")
	parallel := addParallelFlag(cmd)
	limit(f, "from", intIn(0, maxFlagHosts, "a host of the cluster"))
	limit(f, "to", intIn(-1, maxFlagHosts, "-1: the last host"))
	limit(f, "plane", intIn(0, 1024, "a plane of the cluster"))
	limit(f, "count", intIn(1, 1_000_000, ""))
	limit(f, "interval", durationIn(0, maxFlagTime, true))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		payload := int(payloadB)
		cfg, err := load()
		if err != nil {
			return err
		}
		if err := checkMemory(cfg, 0); err != nil {
			return err
		}
		// Pings run until the loop is dry, which the path-quality
		// control plane's periodic sampling would never let it be
		// (unweighted, forwarding pathquality is ECMP).
		cfg.Fabric.PathQuality.Mode = config.PathQualityOff
		c, err := parallelCluster(cfg, *parallel)
		if err != nil {
			return usageError(err)
		}
		defer c.Close()
		if to < 0 {
			to = len(c.Hosts) - 1
		}
		switch {
		case from < 0 || from >= len(c.Hosts):
			return usageError(fmt.Errorf("--from: must be 0..%d, got %d", len(c.Hosts)-1, from))
		case to >= len(c.Hosts):
			return usageError(fmt.Errorf("--to: must be 0..%d, got %d", len(c.Hosts)-1, to))
		case plane < 0 || plane >= c.Topo.Planes:
			return usageError(fmt.Errorf("--plane: must be 0..%d, got %d", c.Topo.Planes-1, plane))
		case count < 1:
			return usageError(fmt.Errorf("--count: must be ≥ 1, got %d", count))
		case payload < 0 || payload > cfg.Fabric.MTU-48:
			return usageError(fmt.Errorf("--payload: must be 0..%d, got %d", cfg.Fabric.MTU-48, payload))
		}
		var pw *pcap.Writer
		if pcapFile != "" {
			fh, err := os.Create(pcapFile)
			if err != nil {
				return err
			}
			defer fh.Close()
			if pw, err = pcap.NewWriter(fh, pcap.LinkTypeEthernet, 0); err != nil {
				return err
			}
			defer pw.Flush()
			c.Hosts[from].NIC.Capture(plane, pw)
		}
		w := cmd.OutOrStdout()
		dst := c.Topo.HostAddr(to, plane)
		fmt.Fprintf(w, "PING %s (h%d, plane %d) from h%d: %d data bytes, %s fabric, %s forwarding\n",
			fabric.AddrString(dst), to, plane, from, payload, c.Topo.Kind, c.Topo.Mode)
		var rtts []time.Duration
		for i := 0; i < count; i++ {
			seq := uint16(i + 1)
			// On the source host's loop: its partition's, when partitioned
			// (the callback then runs on that partition's goroutine only).
			c.Hosts[from].Loop().At(sim.Time(i)*sim.Time(interval), func() {
				err := c.Hosts[from].Ping(dst, 1, seq, payload, 0, func(rtt time.Duration, ok bool) {
					if !ok {
						fmt.Fprintf(w, "icmp_seq=%d timeout\n", seq)
						return
					}
					rtts = append(rtts, rtt)
					fmt.Fprintf(w, "%d bytes from %s: icmp_seq=%d time=%.3f µs (virtual)\n", payload+8, fabric.AddrString(dst), seq, float64(rtt)/1e3)
				})
				if err != nil {
					fmt.Fprintf(w, "icmp_seq=%d: %v\n", seq, err)
				}
			})
		}
		c.Run()
		fmt.Fprintf(w, "--- %d transmitted, %d received", count, len(rtts))
		if len(rtts) > 0 {
			mn, mx, sum := rtts[0], rtts[0], time.Duration(0)
			for _, r := range rtts {
				mn, mx, sum = min(mn, r), max(mx, r), sum+r
			}
			fmt.Fprintf(w, ", rtt min/avg/max = %.3f/%.3f/%.3f µs", float64(mn)/1e3, float64(sum)/float64(len(rtts))/1e3, float64(mx)/1e3)
		}
		fmt.Fprintln(w)
		if pcapFile != "" {
			fmt.Fprintf(w, "capture: %s\n", pcapFile)
		}
		if len(rtts) != count {
			return fmt.Errorf("%d of %d echo requests unanswered", count-len(rtts), count)
		}
		return nil
	}
	return cmd
}
