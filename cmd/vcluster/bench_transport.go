package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
)

func init() { benchCommands = append(benchCommands, newBenchP2PCmd) }

func newBenchP2PCmd() *cobra.Command {
	var size uint64
	var losses []float64
	var parallel *int
	cmd := &cobra.Command{
		Use:   "p2p",
		Short: "One connection between two hosts across the fabric: goodput (virtual) and simulation speed (wall)",
		Long: `p2p moves --size bytes from host 0 to the last host over one connection of the
configured transport (default: MRC, 1 QP, on cluster C scaled to 16 hosts,
payload bytes elided) at each --loss rate on every link, and prints the
goodput as a fraction of the sender's line rate and the data packets
simulated per wall-clock second.`,
		Example: `  vcluster bench p2p
  vcluster bench p2p --set transport.kind=roce --set transport.qpsPerConnection=4 --loss 0,0.001`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, kv := range []string{"fabric.preset=C", "fabric.hosts=16", "transport.payload=elided"} {
				if err := prependSet(cmd, kv); err != nil {
					return usageError(err)
				}
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if err := checkMemory(cfg, size); err != nil {
				return err
			}
			stopsOnInterrupt()
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s, %d QP(s), %d bytes, payload %s, GOMAXPROCS %d\n", cfg.Transport.Kind, cfg.Transport.QPsPerConnection, size, cfg.Transport.Payload, runtime.GOMAXPROCS(0))
			fmt.Fprintf(w, "%-7s %12s %8s %10s %8s %12s %12s %10s\n", "loss", "goodput", "of line", "data pkts", "retx", "wall", "Mpkt/s", "Mevents/s")
			for _, loss := range losses {
				start := time.Now()
				r, err := cluster.RunP2PParallel(cfg, *parallel, 0, cfg.Fabric.Hosts-1, size, loss)
				el := time.Since(start)
				if interrupted(cmd.Context()) {
					return interruptedError(fmt.Sprintf("(loss %g%%)", loss*100), "the rows above are complete")
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%-7s %9.1f Gb/s %7.1f%% %10d %8d %12v %12.3f %10.2f\n", fmt.Sprintf("%g%%", loss*100),
					r.GoodputBps/1e9, 100*r.GoodputBps/r.LineRateBps, r.DataPackets, r.Retransmitted, el.Round(time.Millisecond),
					float64(r.DataPackets)/el.Seconds()/1e6, float64(r.Events)/el.Seconds()/1e6)
			}
			return nil
		},
	}
	bytesVar(cmd.Flags(), &size, "size", 1<<30, 1, tib, "bytes to transfer, with K, M, G or T (powers of 1024)")
	cmd.Flags().Float64SliceVar(&losses, "loss", []float64{0, 0.001, 0.01}, "loss rates per link")
	limit(cmd.Flags(), "loss", listOf(lossRate()))
	parallel = addParallelFlag(cmd)
	return cmd
}

// prependSet puts a --set value before the user's, so the user's win.
func prependSet(cmd *cobra.Command, kv string) error {
	old, err := cmd.Flags().GetStringArray("set")
	if err != nil {
		return err
	}
	f := cmd.Flags().Lookup("set")
	if err := f.Value.(interface{ Replace([]string) error }).Replace(append([]string{kv}, old...)); err != nil {
		return err
	}
	return nil
}
