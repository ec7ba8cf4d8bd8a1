package tunnel

// WindowSize is how many sequence numbers a Window remembers: the
// highest seen and the 127 below it.
const WindowSize = 128

// Window is the anti-replay state of one stream (host, plane, dir) at its
// receiver. It holds the current session, the highest seq committed in
// it and a bitmap of which of the WindowSize seqs ending at the highest
// were committed. The zero value is ready and accepts any first frame.
// It is not safe for concurrent use (one reader goroutine owns it).
type Window struct {
	started bool
	session uint64
	highest uint64
	// bits: bit i (bits[i/64] bit i%64) is set when highest-i was
	// committed; bit 0 is the highest itself.
	bits [2]uint64
}

// Check says whether (session, seq) may be accepted: 0 if so, else
// Replay or Stale. It changes nothing; Commit once the frame verified.
//
//   - no frame committed yet: accept;
//   - session below the current: Stale; above: accept (a restart);
//   - seq above the highest: accept;
//   - seq at or below highest-WindowSize (or 0): Stale;
//   - seq in the window: Replay if committed, else accept.
func (w *Window) Check(session, seq uint64) Reason {
	if !w.started {
		if seq == 0 {
			return Stale
		}
		return 0
	}
	switch {
	case session < w.session:
		return Stale
	case session > w.session:
		if seq == 0 {
			return Stale
		}
		return 0
	}
	if seq > w.highest {
		return 0
	}
	d := w.highest - seq
	if d >= WindowSize || seq == 0 {
		return Stale
	}
	if w.bits[d/64]&(1<<(d%64)) != 0 {
		return Replay
	}
	return 0
}

// Commit records (session, seq) as accepted: a larger session restarts
// the window at seq, a seq above the highest slides it. Committing what
// Check refuses changes nothing.
func (w *Window) Commit(session, seq uint64) {
	if seq == 0 {
		return
	}
	if !w.started || session > w.session {
		*w = Window{started: true, session: session, highest: seq, bits: [2]uint64{1, 0}}
		return
	}
	if session < w.session {
		return
	}
	if seq > w.highest {
		w.slide(seq - w.highest)
		w.highest = seq
		w.bits[0] |= 1
		return
	}
	d := w.highest - seq
	if d < WindowSize {
		w.bits[d/64] |= 1 << (d % 64)
	}
}

// slide moves every bit d places toward the old end (d > 0).
func (w *Window) slide(d uint64) {
	switch {
	case d >= WindowSize:
		w.bits = [2]uint64{}
	case d >= 64:
		w.bits[1] = w.bits[0] << (d - 64)
		w.bits[0] = 0
	default:
		w.bits[1] = w.bits[1]<<d | w.bits[0]>>(64-d)
		w.bits[0] <<= d
	}
}

// Session is the current session (0 before any commit).
func (w *Window) Session() uint64 { return w.session }

// Highest is the highest seq committed in the current session.
func (w *Window) Highest() uint64 { return w.highest }
