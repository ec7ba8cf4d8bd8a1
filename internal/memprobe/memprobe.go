// Package memprobe measures how fast this machine reads cache lines at
// random from a region of a given size: the floor under any simulator whose
// every packet-hop touches some number of lines spread over gigabytes.
//
// A probe links the region's 64-byte lines into chains in random order and
// follows several chains at once. One chain measures the latency of a miss;
// many chains measure how many misses the core keeps in flight (what the
// simulator's prefetching can at best reach). It knows nothing of the
// simulator.
package memprobe

import "math/rand/v2"

// Line is the cache line size the probe assumes.
const Line = 64

// Order returns the lines of a region of n lines in an order drawn from
// seed, for Chains.
func Order(n int, seed uint64) []int32 {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(seed, 0x6d656d70726f6265))
	r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return order
}

// Chains links the lines of region (len a multiple of Line/8 words) into k
// chains that together visit every line once, in the given order of its
// lines (from Order): word 0 of each line holds the word index of the next
// line of its chain, the last line of a chain points back to its first. It
// returns each chain's first word index.
func Chains(region []uint64, k int, order []int32) []int {
	n := len(region) / (Line / 8)
	if k < 1 || n < k || len(order) != n {
		return nil
	}
	heads := make([]int, k)
	per := n / k
	for c := 0; c < k; c++ {
		lo, hi := c*per, (c+1)*per
		if c == k-1 {
			hi = n
		}
		for i := lo; i < hi; i++ {
			next := i + 1
			if next == hi {
				next = lo
			}
			region[int(order[i])*(Line/8)] = uint64(order[next]) * (Line / 8)
		}
		heads[c] = int(order[lo]) * (Line / 8)
	}
	return heads
}

// Follow takes steps steps along each chain from heads, all chains
// advancing together (their loads are independent, so the core can overlap
// them), and returns the time per line read in nanoseconds of clock (the
// caller's wall clock: this package reads none).
func Follow(region []uint64, heads []int, steps int, clock func() int64) float64 {
	pos := make([]uint64, len(heads))
	for i, h := range heads {
		pos[i] = uint64(h)
	}
	t := clock()
	for s := 0; s < steps; s++ {
		for i := range pos {
			pos[i] = region[pos[i]]
		}
	}
	el := clock() - t
	sink = pos[0]
	return float64(el) / float64(steps*len(pos))
}

var sink uint64
