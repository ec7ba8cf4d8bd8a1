//go:build linux

package tunnel

import (
	"fmt"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: Go's alignment pads it as C does on every
// Linux architecture (56+4+4 bytes on 64-bit, 28+4 on 32-bit).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// batchIO is the reusable state of one direction's recvmmsg/sendmmsg:
// grown to the largest batch seen, then allocation-free.
type batchIO struct {
	raw   syscall.RawConn
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	cnt   int // messages to pass
	done  int // messages the call handled
	errno syscall.Errno
	recvF func(fd uintptr) bool // bound once: no closure per call
	sendF func(fd uintptr) bool
}

func (c *Conn) setup() error {
	raw, err := c.uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("tunnel: socket: %w", err)
	}
	var family int
	cerr := raw.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		if err == nil {
			if _, ok := sa.(*unix.SockaddrInet6); ok {
				family = unix.AF_INET6
			}
		}
		// Root may exceed rmem_max/wmem_max; failures leave the
		// kernel's choice.
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, SocketBuffer)
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, SocketBuffer)
	})
	if cerr != nil {
		return fmt.Errorf("tunnel: socket: %w", cerr)
	}
	c.v6 = family == unix.AF_INET6
	c.rd.raw, c.wr.raw = raw, raw
	c.rd.recvF = c.rd.recv
	c.wr.sendF = c.wr.send
	return nil
}

func (b *batchIO) grow(n int) {
	if n > len(b.hdrs) {
		b.hdrs = make([]mmsghdr, n)
		b.iovs = make([]unix.Iovec, n)
		b.names = make([]unix.RawSockaddrInet6, n)
	}
}

func (b *batchIO) recv(fd uintptr) bool { return b.mmsg(fd, unix.SYS_RECVMMSG) }
func (b *batchIO) send(fd uintptr) bool { return b.mmsg(fd, unix.SYS_SENDMMSG) }

// mmsg makes one recvmmsg or sendmmsg (trap) call over the prepared
// headers, as raw.Read/Write want it: false to wait until the socket is
// ready again, true when done (b.done datagrams, or b.errno).
func (b *batchIO) mmsg(fd, trap uintptr) bool {
	for {
		r, _, e := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(b.cnt), 0, 0, 0)
		switch e {
		case 0:
			b.done, b.errno = int(r), 0
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait until readable (recv) or writable (send)
		}
		b.done, b.errno = 0, e
		return true
	}
}

// ReadBatch blocks until at least one datagram arrives, then fills as
// many of ms as are waiting (one recvmmsg): it returns how many, each
// with N and Addr set (a v4-mapped source is reported as IPv4). An error ends the batch (net.ErrClosed after
// Close).
func (c *Conn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	b := &c.rd
	b.grow(len(ms))
	for i := range ms {
		b.iovs[i] = unix.Iovec{}
		if len(ms[i].Buf) > 0 {
			b.iovs[i].Base = &ms[i].Buf[0]
			b.iovs[i].SetLen(len(ms[i].Buf))
		}
		b.hdrs[i] = mmsghdr{}
		h := &b.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = unix.SizeofSockaddrInet6
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	b.cnt = len(ms)
	if err := b.raw.Read(b.recvF); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, fmt.Errorf("tunnel: recvmmsg: %w", b.errno)
	}
	for i := 0; i < b.done; i++ {
		ms[i].N = int(b.hdrs[i].n)
		ms[i].Addr = sockaddrPort(&b.names[i])
	}
	return b.done, nil
}

// WriteBatch sends every message of ms (sendmmsg, repeated for what one
// call did not take) and returns how many were sent; on an error, the
// messages from the returned count on were not sent (a message whose
// Addr the socket cannot reach is reported after those before it went).
func (c *Conn) WriteBatch(ms []Message) (int, error) {
	b := &c.wr
	b.grow(len(ms))
	var bad error // a message without a valid destination: send those before it
	for i := range ms {
		to, err := c.dest(ms[i].Addr)
		if err != nil {
			ms, bad = ms[:i], err
			break
		}
		b.iovs[i] = unix.Iovec{}
		if len(ms[i].Buf) > 0 {
			b.iovs[i].Base = &ms[i].Buf[0]
			b.iovs[i].SetLen(len(ms[i].Buf))
		}
		b.hdrs[i] = mmsghdr{}
		h := &b.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = putSockaddr(&b.names[i], to)
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	sent := 0
	for sent < len(ms) {
		// Pass the rest: the header array from sent on.
		b.cnt = len(ms) - sent
		hdrs := b.hdrs
		b.hdrs = hdrs[sent:]
		err := b.raw.Write(b.sendF)
		b.hdrs = hdrs
		if err != nil {
			return sent, err
		}
		if b.errno != 0 {
			return sent, fmt.Errorf("tunnel: sendmmsg: %w", b.errno)
		}
		for i := sent; i < sent+b.done; i++ {
			ms[i].N = len(ms[i].Buf)
		}
		sent += b.done
	}
	return sent, bad
}

func sockaddrPort(sa *unix.RawSockaddrInet6) netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	port := uint16(p[0])<<8 | uint16(p[1])
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// putSockaddr writes a (already in the socket's family) into sa and
// returns its length.
func putSockaddr(sa *unix.RawSockaddrInet6, a netip.AddrPort) uint32 {
	*sa = unix.RawSockaddrInet6{}
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(a.Port()>>8), byte(a.Port())
	if a.Addr().Is4() {
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		sa4.Addr = a.Addr().As4()
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	sa.Addr = a.Addr().As16()
	return unix.SizeofSockaddrInet6
}

// Buffers is the socket's receive and send buffer sizes as the kernel
// reports them (Linux counts its bookkeeping too: about twice what was
// asked for).
func (c *Conn) Buffers() (rcv, snd int, err error) {
	cerr := c.rd.raw.Control(func(fd uintptr) {
		rcv, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err == nil {
			snd, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		}
	})
	if cerr != nil {
		return 0, 0, cerr
	}
	return rcv, snd, err
}
