package tunnel

import (
	"net/netip"
	"sync"
	"sync/atomic"
)

// SendBatch is the most frames a Sender hands to one WriteBatch.
const SendBatch = 64

// Sender queues frames for a Conn so that the goroutine sending them (the
// loop's) never blocks on a syscall: Send copies the frame into a pooled
// slot and returns; a background goroutine writes the queue with
// WriteBatch. Slots keep their buffers, so once each has held a frame of
// the largest size sent, Send allocates nothing.
//
// Send may be called from one goroutine at a time (the loop's); Close
// from any.
type Sender struct {
	c        *Conn
	counters *Counters

	mu     sync.Mutex
	slots  []sendSlot
	head   int // oldest queued slot
	n      int // queued slots, the flusher's batch included
	closed bool
	kick   chan struct{} // a buffered wake-up for the flusher
	done   chan struct{} // closed when the flusher has returned

	batch []Message // the flusher's

	sent, errors atomic.Uint64
	lastErr      atomic.Pointer[error]
}

type sendSlot struct {
	buf []byte
	to  netip.AddrPort
}

// NewSender starts a sender on c with room for queue frames (at least 1),
// counting frames refused for a full queue as QueueFull in counters (a new
// Counters if nil).
func NewSender(c *Conn, queue int, counters *Counters) *Sender {
	s := newSender(c, queue, counters)
	go s.flush()
	return s
}

// newSender is NewSender without its flusher (tests start it later).
func newSender(c *Conn, queue int, counters *Counters) *Sender {
	if queue < 1 {
		queue = 1
	}
	if counters == nil {
		counters = new(Counters)
	}
	s := &Sender{
		c:        c,
		counters: counters,
		slots:    make([]sendSlot, queue),
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		batch:    make([]Message, min(queue, SendBatch)),
	}
	return s
}

// Send queues a copy of frame for to (the zero AddrPort on a Dialed Conn:
// the fabric) and returns true; when the queue is full, or the sender
// closed, it counts QueueFull and returns false. It never blocks on I/O.
func (s *Sender) Send(frame []byte, to netip.AddrPort) bool {
	s.mu.Lock()
	if s.closed || s.n == len(s.slots) {
		s.mu.Unlock()
		s.counters.Drop(QueueFull)
		return false
	}
	i := s.head + s.n
	if i >= len(s.slots) {
		i -= len(s.slots)
	}
	sl := &s.slots[i]
	sl.buf = append(sl.buf[:0], frame...)
	sl.to = to
	s.n++
	wake := s.n == 1
	s.mu.Unlock()
	if wake {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// flush writes queued slots, a batch at a time, until Close and the
// queue is empty. Slots in [head, head+n) are only read here; Send only
// writes slots outside that range, so a batch needs no lock while it is
// written.
func (s *Sender) flush() {
	defer close(s.done)
	for {
		s.mu.Lock()
		n, head, closed := s.n, s.head, s.closed
		s.mu.Unlock()
		if n == 0 {
			if closed {
				return
			}
			<-s.kick
			continue
		}
		k := min(n, len(s.batch))
		for j := 0; j < k; j++ {
			i := head + j
			if i >= len(s.slots) {
				i -= len(s.slots)
			}
			s.batch[j] = Message{Buf: s.slots[i].buf, Addr: s.slots[i].to}
		}
		done := 0
		for done < k {
			w, err := s.c.WriteBatch(s.batch[done:k])
			s.sent.Add(uint64(w))
			done += w
			if err != nil {
				// Drop the frame that failed and go on: a
				// send error is the network's, not the queue's.
				s.errors.Add(1)
				last := err // only this copy escapes
				s.lastErr.Store(&last)
				done++
			}
		}
		for j := 0; j < k; j++ {
			s.batch[j] = Message{}
		}
		s.mu.Lock()
		s.head += k
		if s.head >= len(s.slots) {
			s.head -= len(s.slots)
		}
		s.n -= k
		s.mu.Unlock()
	}
}

// Sent is how many frames the sender wrote to the socket.
func (s *Sender) Sent() uint64 { return s.sent.Load() }

// Errors is how many frames a socket error dropped; LastError the latest
// such error (nil if none).
func (s *Sender) Errors() uint64 { return s.errors.Load() }

// LastError is the latest socket error that dropped a frame, nil if none.
func (s *Sender) LastError() error {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Queued is how many frames wait to be written.
func (s *Sender) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Close stops accepting frames, waits until the queued ones were written
// and stops the flusher. It does not close the Conn. Close twice is fine.
func (s *Sender) Close() {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	<-s.done
}
