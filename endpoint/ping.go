package endpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/vcluster/vcluster/sim"
)

// DefaultPingTimeout is used when Ping is given no timeout.
const DefaultPingTimeout = time.Second

// pinger is one ICMPv6 ping endpoint of a host, bound to one identifier.
type pinger struct {
	h     *Host
	id    uint16
	ep    tcpip.Endpoint
	wq    waiter.Queue
	entry waiter.Entry
	pend  []pendingPing
	hdr   echoWriter
}

type pendingPing struct {
	seq   uint16
	sent  sim.Time
	timer sim.Timer
	done  func(time.Duration, bool)
}

// echoWriter keeps the first bytes (the ICMPv6 header) of a read.
type echoWriter struct {
	b [header.ICMPv6EchoMinimumSize]byte
	n int
}

func (w *echoWriter) Write(p []byte) (int, error) {
	if w.n < len(w.b) {
		w.n += copy(w.b[w.n:], p)
	}
	return len(p), nil
}

// Ping sends an ICMPv6 echo request with identifier id, sequence seq and
// payload bytes of data to dst through the host's netstack (a ping socket,
// as ping(8) uses), and calls done once: with the round-trip time in
// virtual time and ok when the reply arrives, or (0, false) after timeout
// (DefaultPingTimeout if 0). done runs on the loop, at the virtual time the
// reply was delivered to netstack (scheduled, not nested in the delivery).
// An identifier of 0 lets netstack pick one. The plane is the one of dst's
// address; the source is the host's address in that plane.
func (h *Host) Ping(dst [16]byte, id, seq uint16, payload int, timeout time.Duration, done func(rtt time.Duration, ok bool)) error {
	if payload < 0 {
		return errors.New("endpoint: negative ping payload")
	}
	if timeout <= 0 {
		timeout = DefaultPingTimeout
	}
	pg, err := h.pinger(id)
	if err != nil {
		return err
	}
	for i := range pg.pend {
		if pg.pend[i].seq == seq {
			return fmt.Errorf("endpoint: ping id %d seq %d already outstanding", pg.id, seq)
		}
	}
	msg := make([]byte, header.ICMPv6EchoMinimumSize+payload)
	icmpH := header.ICMPv6(msg)
	icmpH.SetType(header.ICMPv6EchoRequest)
	icmpH.SetIdent(pg.id)
	icmpH.SetSequence(seq)
	for i := header.ICMPv6EchoMinimumSize; i < len(msg); i++ {
		msg[i] = byte(i)
	}
	sent := h.loop.Now()
	pg.pend = append(pg.pend, pendingPing{seq: seq, sent: sent, done: done})
	to := tcpip.FullAddress{Addr: tcpip.AddrFrom16(dst)}
	if _, werr := pg.ep.Write(bytes.NewReader(msg), tcpip.WriteOptions{To: &to}); werr != nil {
		pg.remove(seq)
		return fmt.Errorf("endpoint: ping write: %s", werr)
	}
	// The reply may already have arrived (nothing in between delays it).
	for i := range pg.pend {
		if pg.pend[i].seq == seq {
			pg.pend[i].timer = h.loop.AfterFunc(timeout, func() {
				if d, ok := pg.remove(seq); ok {
					d(0, false)
				}
			})
		}
	}
	return nil
}

func (h *Host) pinger(id uint16) (*pinger, error) {
	if id != 0 {
		for _, pg := range h.pingers {
			if pg.id == id {
				return pg, nil
			}
		}
	}
	if h.Stack == nil {
		return nil, errors.New("endpoint: ping needs the host's netstack (built with NoNetstack)")
	}
	pg := &pinger{h: h}
	ep, err := h.Stack.NewEndpoint(icmp.ProtocolNumber6, ipv6.ProtocolNumber, &pg.wq)
	if err != nil {
		return nil, fmt.Errorf("endpoint: ping endpoint: %s", err)
	}
	if err := ep.Bind(tcpip.FullAddress{Port: id}); err != nil {
		ep.Close()
		return nil, fmt.Errorf("endpoint: ping bind id %d: %s", id, err)
	}
	la, err := ep.GetLocalAddress()
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("endpoint: ping endpoint: %s", err)
	}
	pg.ep, pg.id = ep, la.Port
	pg.entry.Init(pg, waiter.ReadableEvents)
	pg.wq.EventRegister(&pg.entry)
	h.pingers = append(h.pingers, pg)
	return pg, nil
}

// remove forgets the outstanding ping seq, stopping its timer.
func (pg *pinger) remove(seq uint16) (func(time.Duration, bool), bool) {
	for i := range pg.pend {
		if pg.pend[i].seq == seq {
			p := pg.pend[i]
			p.timer.Stop()
			pg.pend = append(pg.pend[:i], pg.pend[i+1:]...)
			return p.done, true
		}
	}
	return nil, false
}

// NotifyEvent implements waiter.EventListener: netstack calls it inline,
// on the loop goroutine, when an echo reply is queued on the endpoint.
func (pg *pinger) NotifyEvent(waiter.EventMask) {
	loop := pg.h.loop
	for {
		pg.hdr.n = 0
		if _, err := pg.ep.Read(&pg.hdr, tcpip.ReadOptions{}); err != nil {
			return
		}
		if pg.hdr.n < header.ICMPv6EchoMinimumSize {
			continue
		}
		m := pg.hdr.b[:]
		if m[0] != byte(header.ICMPv6EchoReply) || binary.BigEndian.Uint16(m[4:]) != pg.id {
			continue
		}
		seq := binary.BigEndian.Uint16(m[6:])
		for i := range pg.pend {
			if pg.pend[i].seq != seq {
				continue
			}
			rtt := loop.Now().Sub(pg.pend[i].sent)
			done, _ := pg.remove(seq)
			// Not nested in netstack's delivery: done may ping again.
			loop.AfterFunc(0, func() { done(rtt, true) })
			break
		}
	}
}
