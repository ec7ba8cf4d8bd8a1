package labfabric

import (
	"math/bits"
	"time"
)

// lagSub is the sub-buckets per power of two of lagHist (3 bits: a
// quantile is within 12.5 % of the truth).
const (
	lagSubBits = 3
	lagSub     = 1 << lagSubBits
	lagBuckets = 64 * lagSub
)

// lagHist is a fixed log-bucket histogram of the loop's lag behind wall
// time: bucket (e, s) holds lags in [2^e + s·2^e/8, 2^e + (s+1)·2^e/8).
// Observe does not allocate; it runs on the loop goroutine only.
type lagHist struct {
	counts [lagBuckets]uint64
	n      int64
	max    int64
}

func lagBucket(ns int64) int {
	if ns < lagSub {
		return int(max(ns, 0))
	}
	u := uint64(ns)
	e := bits.Len64(u) - 1 // ≥ lagSubBits
	s := (u >> (e - lagSubBits)) & (lagSub - 1)
	return (e-lagSubBits+1)*lagSub + int(s)
}

// lagUpper is the largest lag bucket b holds.
func lagUpper(b int) int64 {
	if b < lagSub {
		return int64(b)
	}
	e := b/lagSub + lagSubBits - 1
	s := uint64(b % lagSub)
	lo := uint64(1)<<e | s<<(e-lagSubBits)
	return int64(lo + uint64(1)<<(e-lagSubBits) - 1)
}

func (h *lagHist) Observe(lag time.Duration) {
	ns := int64(lag)
	h.counts[lagBucket(ns)]++
	h.n++
	if ns > h.max {
		h.max = ns
	}
}

// Quantile returns the upper bound of the bucket holding quantile q
// (0 < q ≤ 1), at most the maximum seen; 0 with no events.
func (h *lagHist) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = max(rank, 1)
	var c uint64
	for b, k := range h.counts {
		c += k
		if c >= rank {
			return min(lagUpper(b), h.max)
		}
	}
	return h.max
}
