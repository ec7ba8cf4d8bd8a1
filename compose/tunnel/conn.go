package tunnel

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// SocketBuffer is the send and receive buffer size Listen and Dial ask
// the kernel for (it may grant less: net.core.rmem_max / wmem_max, unless
// the process may force it).
const SocketBuffer = 8 << 20

// Conn is a UDP socket carrying tunnel frames, with batched reads and
// writes (recvmmsg/sendmmsg on Linux, one datagram per call elsewhere).
// ReadBatch may run in one goroutine while WriteBatch runs in another;
// neither may run concurrently with itself.
type Conn struct {
	uc     *net.UDPConn
	local  netip.AddrPort
	remote netip.AddrPort // Dial's fabric address; zero for Listen
	v6     bool           // an AF_INET6 socket: IPv4 peers are sent to as v4-mapped
	rd, wr batchIO
}

// Message is one datagram of a batch: Buf is the buffer to read into (use
// MaxFrame bytes; a longer datagram is truncated) or the frame to write,
// N the bytes read, Addr the peer (the source read, the destination to
// write; zero on a Dialed Conn's write means the fabric).
type Message struct {
	Buf  []byte
	N    int
	Addr netip.AddrPort
}

// Listen opens the fabric's socket on addr, host:port: "127.0.0.1:0"
// (port 0: the kernel picks one), "[::1]:7000", ":7000" (every address,
// IPv4 and IPv6).
func Listen(addr string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err == nil && addr == "" {
		err = errors.New("empty")
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen address %q: want host:port (e.g. 127.0.0.1:0, :7000): %v", addr, err)
	}
	uc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("tunnel: listen %s: %w", addr, err)
	}
	return newConn(uc, netip.AddrPort{})
}

// Dial opens a host's socket toward the fabric at fabric (ip:port or
// host:port). The socket is not connected: the fabric answers from its
// listen address, and an unconnected socket never reports a fabric not
// up yet as an error on the next read. It binds the wildcard address of
// the fabric's family, port chosen by the kernel.
func Dial(fabric string) (*Conn, error) {
	ua, err := net.ResolveUDPAddr("udp", fabric)
	if err != nil {
		return nil, fmt.Errorf("tunnel: fabric address %q: want host:port: %v", fabric, err)
	}
	ap := ua.AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if !ap.IsValid() || ap.Port() == 0 || ap.Addr().IsUnspecified() {
		return nil, fmt.Errorf("tunnel: fabric address %q: want a reachable host:port with port 1..65535", fabric)
	}
	network, laddr := "udp4", &net.UDPAddr{IP: net.IPv4zero}
	if ap.Addr().Is6() {
		network, laddr = "udp6", &net.UDPAddr{IP: net.IPv6unspecified}
	}
	uc, err := net.ListenUDP(network, laddr)
	if err != nil {
		return nil, fmt.Errorf("tunnel: dial %s: %w", fabric, err)
	}
	return newConn(uc, ap)
}

func newConn(uc *net.UDPConn, remote netip.AddrPort) (*Conn, error) {
	c := &Conn{uc: uc, remote: remote}
	c.local = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	_ = uc.SetReadBuffer(SocketBuffer)
	_ = uc.SetWriteBuffer(SocketBuffer)
	if err := c.setup(); err != nil {
		uc.Close()
		return nil, err
	}
	return c, nil
}

// LocalAddr is the socket's own address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// RemoteAddr is the fabric's address for a Dialed Conn, zero for Listen.
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// SetReadDeadline bounds ReadBatch (zero: no bound); a read past it
// fails with an error for which errors.Is(err, os.ErrDeadlineExceeded).
func (c *Conn) SetReadDeadline(t time.Time) error { return c.uc.SetReadDeadline(t) }

// Close closes the socket; a ReadBatch blocked on it returns an error
// for which errors.Is(err, net.ErrClosed).
func (c *Conn) Close() error { return c.uc.Close() }

var errNoAddr = errors.New("tunnel: write: message without a destination on a Listen conn")

// dest is where message m goes, in the socket's family.
func (c *Conn) dest(a netip.AddrPort) (netip.AddrPort, error) {
	if !a.IsValid() {
		if !c.remote.IsValid() {
			return netip.AddrPort{}, errNoAddr
		}
		a = c.remote
	}
	ip := a.Addr()
	if c.v6 {
		if ip.Is4() {
			ip = netip.AddrFrom16(ip.As16())
		}
	} else {
		ip = ip.Unmap()
		if !ip.Is4() {
			return netip.AddrPort{}, fmt.Errorf("tunnel: write to %s from an IPv4 socket", a)
		}
	}
	return netip.AddrPortFrom(ip, a.Port()), nil
}
