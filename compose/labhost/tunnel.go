package labhost

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// planeExporter sends the frames host's NIC puts on one plane's link to
// the fabric (on the loop goroutine, at their arrival time: AtArrival).
type planeExporter struct {
	h     *Host
	plane int
}

func (x *planeExporter) ExportFrame(_ *fabric.Link, p *fabric.Packet, _ sim.Time) {
	h := x.h
	if len(p.Data) > tunnel.MaxPayload {
		h.drops.Drop(tunnel.Malformed)
		p.Release()
		return
	}
	h.send(tunnel.KindData, x.plane, uint32(p.WireLen), p.Flags, p.Data)
	p.Release()
}

// send seals one frame toward the fabric on plane (the loop goroutine:
// the plane's stream and the key are its own).
func (h *Host) send(k tunnel.Kind, plane int, wireLen uint32, flags uint8, payload []byte) {
	h.sealBuf = h.streams[plane].Seal(h.sealBuf[:0], k, wireLen, flags, payload, h.txKey)
	if h.sender.Send(h.sealBuf, h.fabricAddr[plane]) {
		h.framesOut.Add(1)
	}
}

// sendHellos says Hello on every plane, with the lab's digest.
func (h *Host) sendHellos() {
	for pl := 0; pl < h.planes; pl++ {
		h.send(tunnel.KindHello, pl, 0, 0, h.lab.Digest[:])
	}
}

// keepalive says Hello at once and then every period, until Close.
func (h *Host) keepalive(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if h.stopping.Load() {
			return
		}
		h.loop.Inject(h.sendHellos)
		h.reresolve()
		select {
		case <-t.C:
		case <-h.done:
			return
		}
	}
}

// reresolve looks a plane's fabric name up again while the plane has
// heard no HelloAck for AckLapse periods (its container may have come
// back on a new address); a changed address is handed to the loop.
func (h *Host) reresolve() {
	since := time.Now().UnixNano() - AckLapse*int64(h.helloEvery)
	for pl, name := range h.fabrics {
		if h.lastAck[pl].Load() >= since {
			continue
		}
		if _, err := netip.ParseAddrPort(name); err == nil {
			continue // a literal address never changes
		}
		ap, err := resolveAddrPort(name)
		if err != nil {
			continue
		}
		h.loop.Inject(func() {
			if h.fabricAddr[pl] != ap {
				h.log.Printf("fabric %s (plane %d) now at %s", name, pl, ap)
				h.fabricAddr[pl] = ap
			}
		})
	}
}

// rxFrame is one data frame received for the loop.
type rxFrame struct {
	plane   int
	off, n  int
	wireLen int
	flags   uint8
}

// rxBatch is the data frames of one ReadBatch, handed to the loop in one
// Inject.
type rxBatch struct {
	h      *Host
	buf    []byte
	frames []rxFrame
}

// run delivers the batch on the loop goroutine: each frame becomes a
// packet of its NIC port's pool arriving from the T0's link.
func (b *rxBatch) run() {
	h := b.h
	ports := h.cl.Topo.HostPorts[h.id]
	for _, f := range b.frames {
		pt := ports[f.plane]
		p := pt.Pool().Get(f.n)
		copy(p.Data, b.buf[f.off:f.off+f.n])
		p.WireLen, p.Flags = f.wireLen, f.flags
		pt.Peer.Tx.Arrive(p)
	}
	b.buf, b.frames = b.buf[:0], b.frames[:0]
	h.batches.Put(b)
}

// readTunnel receives the fabric's frames until the socket closes: it
// authenticates them, checks the replay windows, records HelloAcks and
// hands data frames to the loop one batch per read.
func (h *Host) readTunnel() {
	const batch = 64
	maxFrame := h.cl.Topo.Pool.LargeCap
	ms := make([]tunnel.Message, batch)
	for i := range ms {
		ms[i].Buf = make([]byte, 65536)
	}
	for {
		n, err := h.conn.ReadBatch(ms)
		if err != nil {
			if h.stopping.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			h.log.Printf("tunnel read: %v", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var b *rxBatch
		for i := 0; i < n; i++ {
			hd, payload, ok := h.accept(ms[i].Buf[:ms[i].N])
			if !ok {
				continue
			}
			h.framesIn.Add(1)
			switch hd.Kind {
			case tunnel.KindHelloAck:
				h.helloAck(int(hd.Plane), payload)
			case tunnel.KindData:
				// As the fabric checks what it takes: a whole Ethernet
				// header, a frame the pool holds, a wire length that
				// counts at least the bytes and the FCS.
				if len(payload) < fabric.EthHeaderLen || len(payload) > maxFrame ||
					int64(hd.WireLen) < int64(len(payload)+fabric.FCSLen) || int64(hd.WireLen) > int64(maxFrame+fabric.FCSLen) {
					h.drops.Drop(tunnel.Malformed)
					continue
				}
				if b == nil {
					b = h.batches.Get().(*rxBatch)
					b.h = h
				}
				b.frames = append(b.frames, rxFrame{plane: int(hd.Plane), off: len(b.buf), n: len(payload), wireLen: int(hd.WireLen), flags: hd.Flags})
				b.buf = append(b.buf, payload...)
			default:
				h.drops.Drop(tunnel.WrongDir) // a Hello is the host's to send
			}
		}
		if b != nil {
			h.loop.Inject(b.run)
		}
	}
}

// accept authenticates one frame from the fabric (tunnel.Receiver:
// direction, window, tag, in that order); a refused frame is counted by
// reason.
func (h *Host) accept(frame []byte) (tunnel.Header, []byte, bool) {
	hd, payload, err := h.rx.Receive(frame)
	if err != nil {
		return tunnel.Header{}, nil, false
	}
	if int(hd.Plane) >= h.planes {
		h.drops.Drop(tunnel.UnknownHost)
		return tunnel.Header{}, nil, false
	}
	return hd, payload, true
}

// helloAck records the fabric's answer on plane (reader goroutine).
func (h *Host) helloAck(plane int, digest []byte) {
	if !bytes.Equal(digest, h.lab.Digest[:]) {
		h.drops.Drop(tunnel.Digest)
		h.digestOnce.Do(func() {
			h.log.Printf("fabric %s: config digest differs: start it with the same config, sets and --plane-speed", h.fabricName)
		})
		return
	}
	wasUp := h.Up()
	h.lastAck[plane].Store(time.Now().UnixNano())
	if !wasUp && h.Up() {
		h.log.Printf("up: the fabric answered on all %d plane(s)", h.planes)
	}
}
