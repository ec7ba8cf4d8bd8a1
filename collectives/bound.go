package collectives

import (
	"fmt"
	"math"
	"time"
)

// Bound is a formula's prediction for one collective: its time and the
// nccl-tests bandwidths that time gives (GB/s, 10^9 bytes/s, as Result).
type Bound struct {
	Time  time.Duration
	AlgBW float64 // size / Time
	BusBW float64 // AlgBW × BusFactor
}

// PairwiseAllToAllBound is TARGETS.md's time of a pairwise all-to-all of
// size bytes (nccl-tests' size: each rank's whole send buffer) over ranks
// ranks, T = (P−1)·α + (P−1)/P · S/B: P−1 steps, each paying the latency
// alpha once and moving one rank's block, S/P bytes, at B = linkBps bits
// per second — the payload rate one rank's NIC gives one peer (for MRC on
// cluster C, 4 × 100G less the headers of every packet: 384.4 Gb/s,
// docs/collectives.md). With pairwise's steps each one MPI_Sendrecv, alpha
// is a step's round trip, measured as the time of the same algorithm at
// the smallest size (4P bytes) over P−1.
//
// Every parameter is checked: ranks ≥ 2, size ≥ 1, linkBps finite and
// > 0, alpha ≥ 0; the error names the one that is not.
func PairwiseAllToAllBound(ranks int, size uint64, linkBps float64, alpha time.Duration) (Bound, error) {
	switch {
	case ranks < 2:
		return Bound{}, fmt.Errorf("collectives: PairwiseAllToAllBound: ranks %d: need at least 2", ranks)
	case size == 0:
		return Bound{}, fmt.Errorf("collectives: PairwiseAllToAllBound: size 0: need at least 1 byte")
	case !(linkBps > 0) || math.IsInf(linkBps, 1):
		return Bound{}, fmt.Errorf("collectives: PairwiseAllToAllBound: linkBps %g: must be finite and > 0 (bits per second)", linkBps)
	case alpha < 0:
		return Bound{}, fmt.Errorf("collectives: PairwiseAllToAllBound: alpha %v: must be ≥ 0", alpha)
	}
	p := float64(ranks)
	f := (p - 1) / p
	ns := (p-1)*float64(alpha) + f*float64(size)*8/linkBps*1e9
	if ns > math.MaxInt64 {
		return Bound{}, fmt.Errorf("collectives: PairwiseAllToAllBound: %.3g ns does not fit a time.Duration", ns)
	}
	alg := float64(size) / ns // bytes per ns = GB/s
	return Bound{Time: time.Duration(math.Round(ns)), AlgBW: alg, BusBW: alg * BusFactor(AllToAll, ranks)}, nil
}
