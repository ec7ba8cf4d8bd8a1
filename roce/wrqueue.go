package roce

import (
	"github.com/vcluster/vcluster/internal/ring"
	"github.com/vcluster/vcluster/verbs"
)

// wrEntry is a posted work request and the sequence numbers it occupies:
// [first, first+n). Every WR occupies at least one (a zero-length WRITE
// is one packet).
type wrEntry struct {
	wr    verbs.WorkRequest
	first uint64 // first sequence
	n     uint64 // packets
}

func (w *wrEntry) end() uint64 { return w.first + w.n }

// wrQueue is the requester's posted WRs that have not completed, oldest
// first, and the cursor of the one new data is taken from. Indices are
// from the oldest (0). WRs occupy consecutive sequences, so it is sorted
// by first.
type wrQueue struct {
	ring.Ring[wrEntry]
	cur int // the WR of the packet last picked to send: go-back-N's sndNxt, IRN's sndMax (0 when empty)
}

// find returns the index of the WR holding seq, which must lie in
// [At(0).first, nextSeq); 0 when the queue is empty.
func (w *wrQueue) find(seq uint64) int {
	lo, hi := 0, w.Len()-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if w.At(m).first <= seq {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// seek moves the cursor forward to the WR holding seq (which lies at or
// after the cursor's WR) and returns its index.
func (w *wrQueue) seek(seq uint64) int {
	i := w.cur
	for w.At(i).end() <= seq {
		i++
	}
	w.cur = i
	return i
}

// pop removes the oldest WR, keeping the cursor on the same WR (or on the
// new oldest).
func (w *wrQueue) pop() {
	w.Pop()
	if w.cur > 0 {
		w.cur--
	}
}

// clear drops every WR.
func (w *wrQueue) clear() {
	w.Clear()
	w.cur = 0
}
