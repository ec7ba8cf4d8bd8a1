package labfabric

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
)

// SyntheticHost is a stand-in for a `vcluster host` process speaking the
// tunnel protocol, for tests and `vcluster bench lab-fabric`: it says
// Hello on its planes, sends the Data frames it is given and counts (and,
// when asked, keeps) what the fabric sends it. It has no NIC and no
// transport.
type SyntheticHost struct {
	ID      int
	Session uint64
	conn    *tunnel.Conn
	fabric  netip.AddrPort
	key     *tunnel.Key
	digest  [32]byte
	planes  int
	recv    *tunnel.Receiver // reader goroutine

	mu  sync.Mutex
	seq []uint64 // per plane, ToFabric

	acked    []atomic.Bool
	received atomic.Uint64 // Data frames received
	frames   chan Received // nil: count only
	done     chan struct{}
}

// Received is a Data frame a synthetic host got.
type Received struct {
	Header  tunnel.Header
	Payload []byte
	At      time.Time
}

// NewSyntheticHost binds a UDP socket on loopback for host id of lab,
// with the lab's secret, talking to the fabric at fabricAddr. keep > 0
// keeps up to keep received frames for Frames (beyond: counted only).
func NewSyntheticHost(lab labspec.Lab, secret []byte, id int, fabricAddr netip.AddrPort, keep int) (*SyntheticHost, error) {
	listen := "127.0.0.1:0"
	if fabricAddr.Addr().Is6() && !fabricAddr.Addr().Is4In6() {
		listen = "[::1]:0"
	}
	c, err := tunnel.Listen(listen)
	if err != nil {
		return nil, err
	}
	planes := lab.Config.Fabric.Planes
	if planes < 1 {
		planes = 1
	}
	h := &SyntheticHost{ID: id, Session: uint64(time.Now().UnixNano()), conn: c, fabric: fabricAddr, key: tunnel.HostKey(secret, id),
		digest: lab.Digest, planes: planes, recv: tunnel.NewReceiver(tunnel.ToHost, nil), seq: make([]uint64, planes),
		acked: make([]atomic.Bool, planes), done: make(chan struct{})}
	h.recv.AddHost(h.key)
	if keep > 0 {
		h.frames = make(chan Received, keep)
	}
	go h.read()
	return h, nil
}

// Addr is the host's UDP address.
func (h *SyntheticHost) Addr() netip.AddrPort { return h.conn.LocalAddr() }

// Counters are the host's receive drops.
func (h *SyntheticHost) Counters() *tunnel.Counters { return h.recv.Counters() }

// Close closes the socket and waits for the reader.
func (h *SyntheticHost) Close() {
	h.conn.Close()
	<-h.done
}

// Seal builds a frame from this host (next seq of plane's stream).
func (h *SyntheticHost) Seal(dst []byte, k tunnel.Kind, plane int, payload []byte, wireLen uint32, flags uint8) []byte {
	h.mu.Lock()
	h.seq[plane]++
	s := h.seq[plane]
	h.mu.Unlock()
	return tunnel.Seal(dst, tunnel.Header{Kind: k, Dir: tunnel.ToFabric, Plane: uint8(plane), Host: uint16(h.ID),
		Session: h.Session, Seq: s, WireLen: wireLen, Flags: flags}, payload, h.key)
}

// SendRaw sends b to the fabric as it is.
func (h *SyntheticHost) SendRaw(b []byte) error {
	_, err := h.conn.WriteBatch([]tunnel.Message{{Buf: b, N: len(b), Addr: h.fabric}})
	return err
}

// SendBatch sends ms (their Addr set to the fabric's) in one call.
func (h *SyntheticHost) SendBatch(ms []tunnel.Message) (int, error) {
	for i := range ms {
		ms[i].Addr = h.fabric
	}
	return h.conn.WriteBatch(ms)
}

// Hello says Hello on every plane.
func (h *SyntheticHost) Hello() error {
	for pl := range h.planes {
		b := h.Seal(nil, tunnel.KindHello, pl, h.digest[:], 0, 0)
		if err := h.SendRaw(b); err != nil {
			return err
		}
	}
	return nil
}

// Attach says Hello every 50 ms until every plane in planes has its
// HelloAck or timeout passes.
func (h *SyntheticHost) Attach(planes []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := h.Hello(); err != nil {
			return err
		}
		poll := time.Now().Add(50 * time.Millisecond)
		for time.Now().Before(poll) {
			if h.Up(planes) {
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			return errors.New("no HelloAck from the fabric on every plane")
		}
	}
}

// Up reports whether every plane in planes had a HelloAck.
func (h *SyntheticHost) Up(planes []int) bool {
	for _, pl := range planes {
		if !h.acked[pl].Load() {
			return false
		}
	}
	return true
}

// SendData sends one Ethernet frame on plane (wire length: the frame's
// plus FCS unless wireLen says more).
func (h *SyntheticHost) SendData(plane int, frame []byte, wireLen int, flags uint8) error {
	wireLen = max(wireLen, len(frame)+fabric.FCSLen)
	b := h.Seal(nil, tunnel.KindData, plane, frame, uint32(wireLen), flags)
	return h.SendRaw(b)
}

// Received counts the Data frames that arrived.
func (h *SyntheticHost) Received() uint64 { return h.received.Load() }

// Frames is the channel of kept frames (nil when keep was 0).
func (h *SyntheticHost) Frames() <-chan Received { return h.frames }

func (h *SyntheticHost) read() {
	defer close(h.done)
	ms := make([]tunnel.Message, 32)
	for i := range ms {
		ms[i].Buf = make([]byte, tunnel.MaxFrame+1)
	}
	for {
		n, err := h.conn.ReadBatch(ms)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		for i := range n {
			hd, payload, err := h.recv.Receive(ms[i].Buf[:ms[i].N])
			if err != nil || int(hd.Plane) >= h.planes {
				continue
			}
			switch hd.Kind {
			case tunnel.KindHelloAck:
				h.acked[hd.Plane].Store(true)
			case tunnel.KindData:
				h.received.Add(1)
				if h.frames != nil {
					select {
					case h.frames <- Received{Header: hd, Payload: append([]byte(nil), payload...), At: time.Now()}:
					default:
					}
				}
			}
		}
	}
}
