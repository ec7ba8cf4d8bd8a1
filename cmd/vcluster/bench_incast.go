package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/experiments"
)

func init() { benchCommands = append(benchCommands, newBenchIncastCmd) }

func newBenchIncastCmd() *cobra.Command {
	var senders, recv int
	var size uint64
	var every time.Duration
	var out, compare, compareName string
	cmd := markObserved(&cobra.Command{
		Use:   "incast",
		Short: "htsim's 8:1 incast reference check: FCTs, trims and the last hop's queue over time under MRC/NSCC",
		Long: `incast runs --senders flows of --size bytes into host --receiver, all
starting at once, on htsim's fat-tree settings (bench fattree-perm's: 100
Gb/s, 1 µs links, 4150-byte data packets, 178 KiB queues with trimming, ECN
from 0.2 to 0.8 of the queue) on the k=4 fat-tree htsim_uec builds for a
16-host connection matrix. It prints the flow completion times, trims and
the queue of the receiver's last hop (its ToR's downlink), sampled every
--sample on the simulated clock. With --out it writes queue.csv (t_us,bytes)
and queue.png/.svg; --compare adds another tool's trace in the same format
(htsim's) to the plot.`,
		Example: `  vcluster bench incast
  vcluster bench incast --senders 8 --size 2MB --seed 1 --out incast --compare queue_htsim.csv`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfigWith(cmd, cluster.HtsimFatTreeSets(cluster.HtsimIncastK))
			if err != nil {
				return err
			}
			var other []experiments.Series
			if compare != "" {
				s, err := readQueueCSV(compare)
				if err != nil {
					return usageError(fmt.Errorf("--compare: %w", err))
				}
				s.Name = compareName
				other = append(other, s)
			}
			c, err := cluster.New(cfg, nil)
			if err != nil {
				return usageError(err)
			}
			defer c.Close()
			if recv >= len(c.Hosts) || senders >= len(c.Hosts) {
				return usageError(fmt.Errorf("--receiver %d and --senders %d need more than %d hosts", recv, senders, len(c.Hosts)))
			}
			var from []int
			for h := 0; len(from) < senders; h++ {
				if h != recv {
					from = append(from, h)
				}
			}
			r, err := c.RunIncast(from, recv, size, every)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			mean, lo, hi := r.FCTStats()
			peak, qmean := r.QueueStats()
			fmt.Fprintf(w, "incast %d:1 into host %d: fat-tree k=%d, %d hosts; %d bytes per flow; seed %d\n",
				senders, recv, cfg.Fabric.K, len(c.Hosts), size, cfg.Seed)
			fmt.Fprintf(w, "FCT            mean %v, min %v, max %v\n", mean.Round(100*time.Nanosecond), lo.Round(100*time.Nanosecond), hi.Round(100*time.Nanosecond))
			for _, f := range r.Flows {
				fmt.Fprintf(w, "  flow %d→%d   %v\n", f.Src, f.Dst, f.FCT().Round(100*time.Nanosecond))
			}
			fmt.Fprintf(w, "data packets   %d (+%d retransmitted, %d trimmed, %d timeouts)\n", r.DataPackets, r.Retransmissions, r.Trims, r.Timeouts)
			fmt.Fprintf(w, "last-hop queue peak %d B, mean %.0f B over %d samples every %v (to the last completion)\n", peak, qmean, len(r.Queue), every)
			if out == "" {
				return nil
			}
			return writeIncastOut(out, r, other)
		},
	})
	f := cmd.Flags()
	f.IntVar(&senders, "senders", 8, "number of senders (the lowest-numbered hosts other than the receiver)")
	f.IntVar(&recv, "receiver", 0, "receiving host")
	bytesVar(f, &size, "size", 2_000_000, 1, tib, "bytes per flow, with K, M, G or T (powers of 1024)")
	f.DurationVar(&every, "sample", 500*time.Nanosecond, "queue sampling period (simulated time)")
	f.StringVar(&out, "out", "", "write queue.csv and queue.png/.svg into this directory")
	f.StringVar(&compare, "compare", "", "a t_us,bytes CSV of another tool's queue trace to draw beside vcluster's")
	f.StringVar(&compareName, "compare-name", "htsim", "legend name of the --compare trace")
	limit(f, "senders", intIn(1, 1<<20, "at most the hosts other than the receiver"))
	limit(f, "receiver", intIn(0, 1<<20, "a host of the fabric"))
	limit(f, "sample", durationIn(0, maxFlagTime, true))
	return cmd
}

// readQueueCSV reads a t_us,bytes trace (a header line, then one sample a
// line) as a series in µs and KB.
func readQueueCSV(path string) (experiments.Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return experiments.Series{}, err
	}
	defer f.Close()
	var s experiments.Series
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if n == 1 || line == "" {
			continue
		}
		a, b, ok := strings.Cut(line, ",")
		x, err1 := strconv.ParseFloat(a, 64)
		y, err2 := strconv.ParseFloat(b, 64)
		if !ok || err1 != nil || err2 != nil {
			return s, fmt.Errorf("%s:%d: want t_us,bytes, got %q", path, n, line)
		}
		s.X = append(s.X, x)
		s.Y = append(s.Y, y/1000)
	}
	return s, sc.Err()
}

func writeQueueCSV(w io.Writer, r cluster.IncastResult) {
	fmt.Fprintln(w, "t_us,bytes")
	for _, q := range r.Queue {
		fmt.Fprintf(w, "%.3f,%d\n", float64(q.T)/1e3, q.Bytes)
	}
}

func writeIncastOut(dir string, r cluster.IncastResult, other []experiments.Series) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csv bytes.Buffer
	writeQueueCSV(&csv, r)
	if err := os.WriteFile(filepath.Join(dir, "queue.csv"), csv.Bytes(), 0o644); err != nil {
		return err
	}
	vc := experiments.Series{Name: "vcluster"}
	for _, q := range r.Queue {
		vc.X = append(vc.X, float64(q.T)/1e3)
		vc.Y = append(vc.Y, float64(q.Bytes)/1000)
	}
	p := experiments.Plot{
		Name:   "queue",
		Title:  fmt.Sprintf("%d:1 incast, last-hop (ToR → receiver) queue", len(r.Flows)),
		XLabel: "time (µs)",
		YLabel: "queue (KB)",
		Series: append(other, vc),
	}
	png, svg, err := experiments.RenderPlot(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "queue.png"), png, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "queue.svg"), svg, 0o644)
}
