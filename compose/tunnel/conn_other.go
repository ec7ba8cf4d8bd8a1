//go:build !linux

package tunnel

import "net/netip"

// batchIO is empty where there is no recvmmsg/sendmmsg.
type batchIO struct{}

func (c *Conn) setup() error {
	c.v6 = c.local.Addr().Is6() && !c.local.Addr().Is4In6()
	return nil
}

// ReadBatch reads one datagram into ms[0] (no recvmmsg here).
func (c *Conn) ReadBatch(ms []Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	n, a, err := c.uc.ReadFromUDPAddrPort(ms[0].Buf)
	if err != nil {
		return 0, err
	}
	ms[0].N, ms[0].Addr = n, netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	return 1, nil
}

// WriteBatch sends the messages one by one (no sendmmsg here).
func (c *Conn) WriteBatch(ms []Message) (int, error) {
	for i := range ms {
		to, err := c.dest(ms[i].Addr)
		if err != nil {
			return i, err
		}
		n, err := c.uc.WriteToUDPAddrPort(ms[i].Buf, to)
		if err != nil {
			return i, err
		}
		ms[i].N = n
	}
	return len(ms), nil
}

// Buffers is not known here: it reports zeros.
func (c *Conn) Buffers() (rcv, snd int, err error) { return 0, 0, nil }
