package tunnel

// STAND-IN (branch h-fabric): a minimal Conn and Sender behind the API
// helper T publishes, so labfabric compiles and tests before T's I/O lands.
// Delete this file when merging h-tunnel's conn.go.

import (
	"net"
	"net/netip"
	"sync"
)

// Conn wraps a UDP socket.
type Conn struct{ c *net.UDPConn }

// Listen binds addr.
func Listen(addr string) (*Conn, error) {
	a, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", a)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c}, nil
}

// Dial binds an unconnected socket of fabric's family.
func Dial(fabric string) (*Conn, error) {
	ap, err := netip.ParseAddrPort(fabric)
	if err != nil {
		return nil, err
	}
	if ap.Addr().Is4() {
		return Listen("0.0.0.0:0")
	}
	return Listen("[::]:0")
}

// LocalAddr is the bound address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// Message is one datagram.
type Message struct {
	Buf  []byte
	N    int
	Addr netip.AddrPort
}

// ReadBatch reads one datagram.
func (c *Conn) ReadBatch(ms []Message) (int, error) {
	n, a, err := c.c.ReadFromUDPAddrPort(ms[0].Buf)
	if err != nil {
		return 0, err
	}
	ms[0].N, ms[0].Addr = n, a
	return 1, nil
}

// WriteBatch writes each message.
func (c *Conn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		if _, err := c.c.WriteToUDPAddrPort(ms[i].Buf[:ms[i].N], ms[i].Addr); err != nil {
			return i, err
		}
	}
	return len(ms), nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// Sender queues frames for a background writer.
type Sender struct {
	c        *Conn
	counters *Counters
	q        chan Message
	free     chan []byte
	done     chan struct{}
	once     sync.Once
}

// NewSender starts the writer.
func NewSender(c *Conn, queue int, counters *Counters) *Sender {
	s := &Sender{c: c, counters: counters, q: make(chan Message, queue), free: make(chan []byte, queue), done: make(chan struct{})}
	go s.run()
	return s
}

// Send copies frame and queues it; false (QueueFull counted) when full.
func (s *Sender) Send(frame []byte, to netip.AddrPort) bool {
	var b []byte
	select {
	case b = <-s.free:
	default:
		b = make([]byte, MaxFrame)
	}
	n := copy(b, frame)
	select {
	case s.q <- Message{Buf: b, N: n, Addr: to}:
		return true
	default:
		s.counters.Drop(QueueFull)
		return false
	}
}

func (s *Sender) run() {
	defer close(s.done)
	ms := make([]Message, 1)
	for m := range s.q {
		ms[0] = m
		s.c.WriteBatch(ms)
		select {
		case s.free <- m.Buf:
		default:
		}
	}
}

// Close stops the writer after the queue drains.
func (s *Sender) Close() {
	s.once.Do(func() { close(s.q) })
	<-s.done
}
