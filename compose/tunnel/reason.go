package tunnel

import "sync/atomic"

// Reason is why a frame was dropped. Its String is a lower-case-hyphen
// word, fit for a /metrics label.
type Reason uint8

const (
	Malformed   Reason = iota + 1 // not a v1 frame: short, bad magic/version/kind/dir/reserved, length mismatch, seq 0
	BadTag                        // the tag does not verify under the host's key (wrong secret, forged, corrupted)
	UnknownHost                   // no key for the header's host id (decided by the caller or Receiver)
	Replay                        // a seq already accepted in the current session
	Stale                         // an older session, or a seq below the window
	WrongDir                      // an authentic frame travelling the other way (reflected)
	Digest                        // a Hello whose labspec digest differs (decided by the caller)
	Unattached                    // a Data frame for a host/plane not attached yet (decided by the caller)
	QueueFull                     // the Sender's queue was full (or closed)

	numReasons = int(QueueFull)
)

var reasonNames = [...]string{
	Malformed:   "malformed",
	BadTag:      "bad-tag",
	UnknownHost: "unknown-host",
	Replay:      "replay",
	Stale:       "stale",
	WrongDir:    "wrong-dir",
	Digest:      "digest",
	Unattached:  "unattached",
	QueueFull:   "queue-full",
}

func (r Reason) String() string {
	if r >= Malformed && int(r) <= numReasons {
		return reasonNames[r]
	}
	return "unknown-reason"
}

// Reasons lists every reason, in order.
func Reasons() []Reason {
	rs := make([]Reason, 0, numReasons)
	for r := Malformed; int(r) <= numReasons; r++ {
		rs = append(rs, r)
	}
	return rs
}

// DropError is why Peek, Open or Receiver refused a frame.
type DropError struct {
	Reason Reason
	Detail string
}

func (e *DropError) Error() string {
	return "tunnel: frame dropped (" + e.Reason.String() + "): " + e.Detail
}

// Counters counts dropped frames per reason; safe for concurrent use.
// The zero value is ready.
type Counters struct {
	n [numReasons + 1]atomic.Uint64
}

// Drop counts one frame dropped for r (an unknown r is counted nowhere).
func (c *Counters) Drop(r Reason) {
	if r >= Malformed && int(r) <= numReasons {
		c.n[r].Add(1)
	}
}

// Dropped is how many frames were dropped for r.
func (c *Counters) Dropped(r Reason) uint64 {
	if r >= Malformed && int(r) <= numReasons {
		return c.n[r].Load()
	}
	return 0
}

// Total is how many frames were dropped for any reason.
func (c *Counters) Total() uint64 {
	var t uint64
	for r := Malformed; int(r) <= numReasons; r++ {
		t += c.n[r].Load()
	}
	return t
}

// Snapshot maps every reason's String to its count (zeros included, so
// a /metrics page always shows every label).
func (c *Counters) Snapshot() map[string]uint64 {
	m := make(map[string]uint64, numReasons)
	for r := Malformed; int(r) <= numReasons; r++ {
		m[r.String()] = c.n[r].Load()
	}
	return m
}
