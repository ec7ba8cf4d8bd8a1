package tunnel

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// reader reads frames from c into a Receiver until c closes, counting
// accepted frames and checking each payload against pattern(n, seq).
type reader struct {
	accepted atomic.Uint64
	corrupt  atomic.Uint64
	lastFrom atomic.Pointer[netip.AddrPort]
	done     chan struct{}
}

func startReader(t *testing.T, c *Conn, r *Receiver, n int) *reader {
	rd := &reader{done: make(chan struct{})}
	go func() {
		defer close(rd.done)
		ms := make([]Message, 32)
		for i := range ms {
			ms[i].Buf = make([]byte, MaxFrame)
		}
		for {
			k, err := c.ReadBatch(ms)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("ReadBatch: %v", err)
				}
				return
			}
			for _, m := range ms[:k] {
				h, p, err := r.Receive(m.Buf[:m.N])
				if err != nil {
					continue
				}
				if !bytes.Equal(p, pattern(n, byte(h.Seq))) {
					rd.corrupt.Add(1)
				}
				from := m.Addr
				rd.lastFrom.Store(&from)
				rd.accepted.Add(1)
			}
		}
	}()
	return rd
}

// waitFor polls until cond or the deadline; it reports whether cond held.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return cond()
		}
		time.Sleep(100 * time.Microsecond)
	}
	return true
}

func TestLoopbackSenderToConn(t *testing.T) {
	fabric, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer fabric.Close()
	host, err := Dial(fabric.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if host.RemoteAddr() != fabric.LocalAddr() {
		t.Fatalf("host's remote %v, fabric at %v", host.RemoteAddr(), fabric.LocalAddr())
	}

	const frames, size = 10000, 1000
	k := HostKey(testSecret, 12)
	atFabric := NewReceiver(ToFabric, nil)
	atFabric.AddHost(k)
	rd := startReader(t, fabric, atFabric, size)

	counters := new(Counters)
	s := NewSender(host, 1024, counters)
	buf := make([]byte, 0, MaxFrame)
	full := 0
	// Keep at most inFlight frames between Send and the reader: on a
	// loaded machine (or GOMAXPROCS=1) an unpaced burst of 10 000 can
	// overflow even a 16 MiB socket buffer before the reader runs (seen:
	// 9102 of 10000 with -cpu 1). The lab's links are paced; so is this.
	const inFlight = 2048
	for seq := uint64(1); seq <= frames; seq++ {
		if seq > inFlight && !waitFor(10*time.Second, func() bool { return rd.accepted.Load()+inFlight >= seq }) {
			t.Fatalf("frame %d: the reader is stuck at %d", seq, rd.accepted.Load())
		}
		f := Seal(buf[:0], Header{Kind: KindData, Dir: ToFabric, Plane: 2, Host: 12, Session: 1, Seq: seq, WireLen: size + 4}, pattern(size, byte(seq)), k)
		for !s.Send(f, netip.AddrPort{}) { // the fabric: Dial's remote
			full++
			time.Sleep(50 * time.Microsecond)
		}
	}
	s.Close()
	if s.Sent() != frames || s.Errors() != 0 {
		t.Fatalf("sender wrote %d of %d, %d errors (%v)", s.Sent(), frames, s.Errors(), s.LastError())
	}
	if counters.Dropped(QueueFull) != uint64(full) {
		t.Fatalf("queue-full counted %d, Send refused %d", counters.Dropped(QueueFull), full)
	}
	waitFor(10*time.Second, func() bool { return rd.accepted.Load() == frames })
	// Loopback UDP may drop under load: give it up to 1%.
	got := rd.accepted.Load()
	t.Logf("%d of %d frames arrived intact; Send refused %d times (queue full)", got, frames, full)
	if got < frames*99/100 || rd.corrupt.Load() != 0 || atFabric.Counters().Total() != 0 {
		t.Fatalf("%d of %d frames arrived, %d corrupt, drops %v", got, frames, rd.corrupt.Load(), atFabric.Counters().Snapshot())
	}

	// The fabric answers from its listen address to where the frames came
	// from, and the host hears it.
	from := *rd.lastFrom.Load()
	if from.Port() != host.LocalAddr().Port() {
		t.Fatalf("frames came from %v, host socket at %v", from, host.LocalAddr())
	}
	atHost := NewReceiver(ToHost, nil)
	atHost.AddHost(k)
	hr := startReader(t, host, atHost, 32)
	ack := Seal(nil, Header{Kind: KindHelloAck, Dir: ToHost, Plane: 2, Host: 12, Session: 7, Seq: 32}, pattern(32, 32), k)
	if n, err := fabric.WriteBatch([]Message{{Buf: ack, Addr: from}}); n != 1 || err != nil {
		t.Fatalf("fabric WriteBatch: %d, %v", n, err)
	}
	if !waitFor(5*time.Second, func() bool { return hr.accepted.Load() == 1 }) {
		t.Fatalf("the host did not receive the fabric's answer (drops %v)", atHost.Counters().Snapshot())
	}
	fabric.Close()
	host.Close()
	<-rd.done
	<-hr.done
}

func TestIPv6Loopback(t *testing.T) {
	fabric, err := Listen("[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	defer fabric.Close()
	host, err := Dial(fabric.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	k := HostKey(testSecret, 1)
	f := Seal(nil, Header{Kind: KindHello, Dir: ToFabric, Host: 1, Session: 1, Seq: 1}, make([]byte, 32), k)
	if n, err := host.WriteBatch([]Message{{Buf: f}, {Buf: f}}); n != 2 || err != nil {
		t.Fatalf("WriteBatch: %d %v", n, err)
	}
	ms := []Message{{Buf: make([]byte, MaxFrame)}, {Buf: make([]byte, MaxFrame)}}
	fabric.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := 0
	for got < 2 {
		n, err := fabric.ReadBatch(ms[got:])
		if err != nil {
			t.Fatalf("ReadBatch after %d: %v", got, err)
		}
		got += n
	}
	for _, m := range ms {
		if !bytes.Equal(m.Buf[:m.N], f) || m.Addr.Port() != host.LocalAddr().Port() || !m.Addr.Addr().IsLoopback() {
			t.Fatalf("got %d bytes from %v", m.N, m.Addr)
		}
	}
}

// An IPv4 host reaching a fabric listening on the dual-stack wildcard:
// the source reads as plain IPv4 and the answer goes back to it.
func TestDualStackAnswer(t *testing.T) {
	fabric, err := Listen("[::]:0")
	if err != nil {
		t.Skipf("no IPv6 wildcard here: %v", err)
	}
	defer fabric.Close()
	host, err := Dial(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), fabric.LocalAddr().Port()).String())
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	f := []byte("ping")
	if _, err := host.WriteBatch([]Message{{Buf: f}}); err != nil {
		t.Fatal(err)
	}
	ms := []Message{{Buf: make([]byte, 100)}}
	fabric.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fabric.ReadBatch(ms); err != nil {
		t.Fatal(err)
	}
	if !ms[0].Addr.Addr().Is4() {
		t.Fatalf("source %v, want plain IPv4", ms[0].Addr)
	}
	if _, err := fabric.WriteBatch([]Message{{Buf: []byte("pong"), Addr: ms[0].Addr}}); err != nil {
		t.Fatal(err)
	}
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := host.ReadBatch(ms); err != nil || string(ms[0].Buf[:ms[0].N]) != "pong" {
		t.Fatalf("answer: %q %v", ms[0].Buf[:ms[0].N], err)
	}
}

func TestConnAddressErrors(t *testing.T) {
	for _, a := range []string{"", "localhost", "127.0.0.1", "300.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:-1"} {
		if c, err := Listen(a); err == nil {
			c.Close()
			t.Errorf("Listen(%q) accepted", a)
		}
	}
	for _, a := range []string{":0", "localhost:0", "0.0.0.0:0"} {
		c, err := Listen(a)
		if err != nil {
			t.Errorf("Listen(%q): %v", a, err)
			continue
		}
		if c.LocalAddr().Port() == 0 {
			t.Errorf("Listen(%q): no port", a)
		}
		c.Close()
	}
	for _, a := range []string{"", "127.0.0.1", "127.0.0.1:0", "0.0.0.0:5000", "no-such-host.invalid:5000"} {
		if c, err := Dial(a); err == nil {
			c.Close()
			t.Errorf("Dial(%q) accepted", a)
		}
	}
	c, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, _ := Listen("127.0.0.1:0")
	defer peer.Close()
	// A listening conn has no default destination: the messages before
	// the one without an address go, it and those after do not.
	n, err := c.WriteBatch([]Message{{Buf: []byte("a"), Addr: peer.LocalAddr()}, {Buf: []byte("b")}, {Buf: []byte("c"), Addr: peer.LocalAddr()}})
	if n != 1 || err == nil {
		t.Fatalf("WriteBatch with a message without address: %d, %v", n, err)
	}
	if _, err := c.WriteBatch([]Message{{Buf: []byte("x"), Addr: netip.MustParseAddrPort("[2001:db8::1]:5")}}); err == nil {
		t.Fatal("an IPv6 destination from an IPv4 socket was accepted")
	}
	if n, err := c.ReadBatch(nil); n != 0 || err != nil {
		t.Fatalf("ReadBatch(nil) = %d, %v", n, err)
	}
}

func TestSenderQueueFullAndClose(t *testing.T) {
	fabric, _ := Listen("127.0.0.1:0")
	defer fabric.Close()
	host, _ := Dial(fabric.LocalAddr().String())
	defer host.Close()
	counters := new(Counters)
	s := newSender(host, 4, counters) // no flusher yet: the queue only fills
	for i := 0; i < 4; i++ {
		if !s.Send([]byte{byte(i)}, netip.AddrPort{}) {
			t.Fatalf("frame %d refused with room in the queue", i)
		}
	}
	if s.Send([]byte{9}, netip.AddrPort{}) || counters.Dropped(QueueFull) != 1 || s.Queued() != 4 {
		t.Fatalf("full queue: queued %d, queue-full %d", s.Queued(), counters.Dropped(QueueFull))
	}
	go s.flush()
	s.Close() // drains
	if s.Sent() != 4 || s.Queued() != 0 {
		t.Fatalf("after Close: sent %d, queued %d", s.Sent(), s.Queued())
	}
	if s.Send([]byte{1}, netip.AddrPort{}) || counters.Dropped(QueueFull) != 2 {
		t.Fatal("Send after Close accepted")
	}
	s.Close()
	ms := make([]Message, 8)
	for i := range ms {
		ms[i].Buf = make([]byte, 16)
	}
	fabric.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := 0
	for got < 4 {
		n, err := fabric.ReadBatch(ms[got:])
		if err != nil {
			t.Fatalf("read after %d: %v", got, err)
		}
		got += n
	}
	for i := 0; i < 4; i++ {
		if ms[i].N != 1 || ms[i].Buf[0] != byte(i) {
			t.Fatalf("frame %d: %x, want in order", i, ms[i].Buf[:ms[i].N])
		}
	}
}

func TestSenderErrorsDropFrames(t *testing.T) {
	c, _ := Listen("127.0.0.1:0")
	s := NewSender(c, 8, nil)
	c.Close()
	s.Send([]byte("x"), netip.MustParseAddrPort("127.0.0.1:9"))
	s.Send([]byte("y"), netip.AddrPort{}) // no destination on a Listen conn
	s.Close()
	if s.Errors() != 2 || s.Sent() != 0 || s.LastError() == nil {
		t.Fatalf("errors %d, sent %d, last %v", s.Errors(), s.Sent(), s.LastError())
	}
}

// In steady state neither sending (Send and the flusher's WriteBatch)
// nor receiving (ReadBatch) allocates.
func TestSendReceiveAllocs(t *testing.T) {
	fabric, _ := Listen("127.0.0.1:0")
	defer fabric.Close()
	host, _ := Dial(fabric.LocalAddr().String())
	defer host.Close()
	s := NewSender(host, 64, nil)
	defer s.Close()
	f := Seal(nil, Header{Kind: KindData, Dir: ToFabric, Host: 1, Session: 1, Seq: 1}, pattern(1000, 0), HostKey(testSecret, 1))
	ms := make([]Message, 4)
	for i := range ms {
		ms[i].Buf = make([]byte, MaxFrame)
	}
	fabric.SetReadDeadline(time.Now().Add(30 * time.Second))
	round := func() {
		if !s.Send(f, netip.AddrPort{}) {
			panic("queue full")
		}
		if n, err := fabric.ReadBatch(ms); err != nil || n < 1 {
			panic(err)
		}
	}
	for range 100 {
		round()
	}
	if allocs := testing.AllocsPerRun(500, round); allocs != 0 {
		t.Fatalf("%v allocations per frame sent and received, want 0", allocs)
	}
}

func BenchmarkLoopbackThroughput(b *testing.B) {
	fabric, _ := Listen("127.0.0.1:0")
	defer fabric.Close()
	host, _ := Dial(fabric.LocalAddr().String())
	defer host.Close()
	const size = 1024
	k := HostKey(testSecret, 1)
	r := NewReceiver(ToFabric, nil)
	r.AddHost(k)
	var got atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		ms := make([]Message, SendBatch)
		for i := range ms {
			ms[i].Buf = make([]byte, MaxFrame)
		}
		for {
			n, err := fabric.ReadBatch(ms)
			if err != nil {
				return
			}
			for _, m := range ms[:n] {
				if _, _, err := r.Receive(m.Buf[:m.N]); err == nil {
					got.Add(1)
				}
			}
		}
	}()
	s := NewSender(host, 4096, nil)
	buf := make([]byte, 0, MaxFrame)
	payload := pattern(size, 0)
	var refused uint64
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		f := Seal(buf[:0], Header{Kind: KindData, Dir: ToFabric, Host: 1, Session: 1, Seq: uint64(i) + 1, WireLen: size}, payload, k)
		for !s.Send(f, netip.AddrPort{}) {
			refused++
			time.Sleep(20 * time.Microsecond)
		}
	}
	s.Close()
	waitFor(2*time.Second, func() bool { return got.Load() == uint64(b.N) })
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(got.Load())/el.Seconds(), "frames/s")
	b.ReportMetric(100*float64(uint64(b.N)-got.Load())/float64(b.N), "%lost")
	fabric.Close()
	<-done
}

// A host whose fabric is not listening gets no error on its socket: it
// keeps reading whatever else arrives (an unconnected socket hears no
// ICMP port-unreachable).
func TestHostSocketSurvivesAbsentFabric(t *testing.T) {
	gone, _ := Listen("127.0.0.1:0")
	addr := gone.LocalAddr()
	gone.Close()
	host, err := Dial(addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	for range 3 {
		if _, err := host.WriteBatch([]Message{{Buf: []byte("hello?")}}); err != nil {
			t.Fatalf("write to an absent fabric: %v", err)
		}
	}
	other, _ := Listen("127.0.0.1:0")
	defer other.Close()
	time.Sleep(10 * time.Millisecond) // let any ICMP errors come back first
	if _, err := other.WriteBatch([]Message{{Buf: []byte("later"), Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), host.LocalAddr().Port())}}); err != nil {
		t.Fatal(err)
	}
	ms := []Message{{Buf: make([]byte, 64)}}
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := host.ReadBatch(ms)
	if err != nil || n != 1 || string(ms[0].Buf[:ms[0].N]) != "later" {
		t.Fatalf("read after writing to an absent fabric: %d %q %v", n, ms[0].Buf[:ms[0].N], err)
	}
}

func TestSocketBuffers(t *testing.T) {
	c, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rcv, snd, err := c.Buffers()
	if err != nil {
		t.Fatal(err)
	}
	want := 1
	if os.Geteuid() == 0 {
		want = SocketBuffer // root forces past rmem_max/wmem_max
	}
	if rcv < want || snd < want {
		t.Fatalf("socket buffers rcv %d snd %d, want at least %d", rcv, snd, want)
	}
}
