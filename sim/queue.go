package sim

import "math/bits"

// qentry is one scheduled event in the queue: its time, a sequence number
// that breaks ties between equal times in scheduling order, and the slot of
// the event node it fires (with the node's generation, so a stopped timer's
// stale entry is recognised and skipped). Entries are 16 bytes, so the
// queue stays cache-friendly at 10^5..10^6 pending events.
type qentry struct {
	at  uint64
	key uint64 // seq<<slotBits | slot: orders ties and names the node
}

const (
	slotBits = 24
	slotMask = 1<<slotBits - 1
	// MaxPending is the most events a loop can hold scheduled at once.
	MaxPending = 1 << slotBits
)

func (e qentry) slot() int32 { return int32(e.key & slotMask) }
func (e qentry) seq() uint64 { return e.key >> slotBits }

// radixQueue is a monotone priority queue (a radix heap). A discrete-event
// loop never schedules before the last popped time, which is exactly the
// monotone property a radix heap needs; in exchange push is O(1) and pop is
// amortised O(log of the time span), with plain slices instead of pointer
// chasing. Bucket 0 holds entries equal to last; bucket i>0 holds entries
// whose highest bit differing from last is bit i-1. Ties are broken by seq:
// bucket 0 is kept in seq order (redistribution sorts the few equal entries
// it moves there, and later pushes carry larger seqs).
type radixQueue struct {
	last    uint64
	n       int
	head0   int // consumed prefix of buckets[0]
	nonzero uint64
	buckets [65][]qentry
}

func (q *radixQueue) len() int { return q.n }

func bucketOf(x, last uint64) int { return bits.Len64(x ^ last) }

func (q *radixQueue) push(e qentry) {
	if e.at < q.last {
		e.at = q.last
	}
	b := bucketOf(e.at, q.last)
	q.buckets[b] = append(q.buckets[b], e)
	if b > 0 {
		q.nonzero |= 1 << uint(b-1)
	}
	q.n++
}

// pushSorted is push for entries whose key may be smaller than those of
// entries already queued at the same time (ranked events): an entry landing
// in bucket 0 is inserted in key order instead of appended.
func (q *radixQueue) pushSorted(e qentry) {
	if e.at < q.last {
		e.at = q.last
	}
	if bucketOf(e.at, q.last) != 0 {
		q.push(e)
		return
	}
	z := append(q.buckets[0], e)
	i := len(z) - 1
	for ; i > q.head0 && z[i-1].key > e.key; i-- {
		z[i] = z[i-1]
	}
	z[i] = e
	q.buckets[0] = z
	q.n++
}

// minBound returns the smallest time queued (stopped entries included);
// the queue must not be empty.
func (q *radixQueue) minBound() uint64 {
	if q.head0 < len(q.buckets[0]) {
		return q.last
	}
	src := q.buckets[bits.TrailingZeros64(q.nonzero)+1]
	m := src[0].at
	for _, e := range src[1:] {
		m = min(m, e.at)
	}
	return m
}

// prepare makes bucket 0 hold the smallest entries if their time is at or
// before limit, and reports whether it does. The queue must not be empty.
// It never moves last past limit: a later push below last would be lost.
func (q *radixQueue) prepare(limit uint64) bool {
	if q.head0 < len(q.buckets[0]) {
		return q.last <= limit
	}
	b := bits.TrailingZeros64(q.nonzero) + 1
	src := q.buckets[b]
	min := src[0].at
	for _, e := range src[1:] {
		if e.at < min {
			min = e.at
		}
	}
	if min > limit {
		return false
	}
	q.refill(b, min)
	return true
}

// pop removes and returns the entry with the smallest (at, seq); prepare
// must have returned true.
func (q *radixQueue) pop() qentry {
	b0 := q.buckets[0]
	e := b0[q.head0]
	q.head0++
	if q.head0 == len(b0) {
		q.buckets[0] = b0[:0]
		q.head0 = 0
	}
	q.n--
	return e
}

// refill moves the lowest non-empty bucket down around its minimum.
func (q *radixQueue) refill(b int, min uint64) {
	q.buckets[0] = q.buckets[0][:0]
	q.head0 = 0
	src := q.buckets[b]
	q.last = min
	q.nonzero &^= 1 << uint(b-1)
	for _, e := range src {
		nb := bucketOf(e.at, min)
		q.buckets[nb] = append(q.buckets[nb], e)
		if nb > 0 {
			q.nonzero |= 1 << uint(nb-1)
		}
	}
	q.buckets[b] = src[:0]
	// Entries equal to min arrived in bucket order, which is not always seq
	// order; insertion-sort the (almost always tiny) run by seq.
	z := q.buckets[0]
	for i := 1; i < len(z); i++ {
		for j := i; j > 0 && z[j].key < z[j-1].key; j-- {
			z[j], z[j-1] = z[j-1], z[j]
		}
	}
}
