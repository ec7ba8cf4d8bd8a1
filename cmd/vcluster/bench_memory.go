package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/internal/memprobe"
	"github.com/vcluster/vcluster/units"
	"github.com/vcluster/vcluster/wallclock"
)

func init() { benchCommands = append(benchCommands, newBenchMemoryCmd) }

func newBenchMemoryCmd() *cobra.Command {
	var sizes []string
	var chains []int
	var reads int
	var lines []int
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "This machine's floor: random cache-line reads per second over regions as large as a fabric",
		Long: `memory measures how fast this machine reads 64-byte lines at random from
regions of --sizes bytes (K, M, G, T: powers of 1024), with 4 KiB pages and with transparent huge pages,
following 1 chain (the latency of a miss) and several independent chains at
once (how many misses the core overlaps — the most prefetching can reach).
From the best figure at the largest size it prints the ceiling for a
simulator whose packet-hop touches --lines cold lines: no instruction
counted, every miss overlapped. Compare it with bench clusterB.`,
		Example: `  vcluster bench memory
  vcluster bench memory --sizes 4G --chains 16`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var regions []uint64
			for _, s := range sizes {
				b, err := units.ParseSize(s) // checked when parsed: cannot fail
				if err != nil {
					return usageError(fmt.Errorf("--sizes: %v", err))
				}
				// Map maps whole 2 MiB pages (the huge pages' size): the
				// region measured is that, and is what the row says.
				const hp = 2 << 20
				regions = append(regions, (b+hp-1)&^(hp-1))
			}
			for name, vs := range map[string][]int{"--chains": chains, "--lines": lines} {
				for _, v := range vs {
					if v < 1 {
						return usageError(fmt.Errorf("%s: must be ≥ 1, got %d", name, v))
					}
				}
			}
			if reads < 1000 {
				return usageError(fmt.Errorf("--reads: must be ≥ 1000, got %d", reads))
			}
			w := cmd.OutOrStdout()
			clock := wallclock.New().Now
			fmt.Fprintf(w, "random 64-byte reads, ns per line (chains followed together; one core)\n%-10s %-8s", "region", "pages")
			for _, k := range chains {
				fmt.Fprintf(w, " %9s", fmt.Sprintf("%d chain", k))
			}
			fmt.Fprintln(w)
			var best float64
			for _, size := range regions {
				mib := fmt.Sprintf("%g MiB", float64(size)/(1<<20))
				order := memprobe.Order(int(size/memprobe.Line), size>>20) // the seed: the size in MiB, as it always was
				for _, huge := range []bool{false, true} {
					region, free, err := memprobe.Map(int(size), huge)
					if err != nil {
						return fmt.Errorf("map %s: %w", mib, err)
					}
					page := "4 KiB"
					if huge {
						page = "2 MiB"
					}
					fmt.Fprintf(w, "%-10s %-8s", mib, page)
					// One linking with the most chains serves every k: the
					// first k chains still spread over all of the region.
					all := memprobe.Chains(region, slices.Max(chains), order)
					for _, k := range chains {
						heads := all[:k]
						steps := max(reads/k, 1)
						if k == 1 {
							steps = max(reads/8, 1) // one miss at a time is slow
						}
						memprobe.Follow(region, heads, steps/10, clock) // warm the TLB and caches as a run would
						d := memprobe.Follow(region, heads, steps, clock)
						fmt.Fprintf(w, " %9.1f", d)
						if size == regions[len(regions)-1] && (best == 0 || d < best) {
							best = d
						}
					}
					fmt.Fprintln(w)
					free()
				}
			}
			fmt.Fprintf(w, "best at %g MiB: %.1f ns per line; a packet-hop touching", float64(regions[len(regions)-1])/(1<<20), best)
			for i, l := range lines {
				sep := ","
				if i == len(lines)-1 {
					sep = ""
				}
				fmt.Fprintf(w, " %d lines: ≤ %.2f M hops/s%s", l, 1e3/(float64(l)*best), sep)
			}
			fmt.Fprintln(w)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&sizes, "sizes", []string{"64M", "1G", "4G"}, "region sizes, with K, M, G or T (powers of 1024), rounded up to whole 2 MiB pages; the ceiling uses the last")
	cmd.Flags().IntSliceVar(&chains, "chains", []int{1, 8, 16, 24}, "numbers of chains followed together")
	cmd.Flags().IntVar(&reads, "reads", 16_000_000, "line reads per measurement (an eighth with one chain)")
	cmd.Flags().IntSliceVar(&lines, "lines", []int{4, 8, 12}, "cold lines per packet-hop for the ceiling line")
	limit(cmd.Flags(), "sizes", listOf(sizeIn(1<<20, tib)))
	limit(cmd.Flags(), "chains", listOf(intIn(1, 1024, "")))
	limit(cmd.Flags(), "reads", intIn(1, 100*maxFlagCount, ""))
	limit(cmd.Flags(), "lines", listOf(intIn(1, 1024, "")))
	return cmd
}
