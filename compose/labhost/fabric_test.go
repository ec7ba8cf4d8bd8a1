package labhost

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

// testFabric is a minimal `vcluster fabric` for the tests: the lab's
// switches on a real-time loop, every host port's T0→NIC link exported to
// the attached host's tunnel address, the host's frames arriving on its
// NIC→T0 link. It speaks the shared protocol (Hello → HelloAck, digests,
// sessions, replay windows, drops by reason).
type testFabric struct {
	t      testing.TB
	lab    labspec.Lab
	secret []byte
	loop   *sim.Loop
	topo   *fabric.Topology
	conn   *tunnel.Conn
	sender *tunnel.Sender
	drops  tunnel.Counters

	mu    sync.Mutex
	addr  map[[2]int]netip.AddrPort // (host, plane) → attached address
	sess  map[[2]int]uint64
	rxWin map[[2]int]*tunnel.Window

	// loop goroutine
	txKeys  []*tunnel.Key
	txSeq   map[[2]int]uint64
	sealBuf []byte

	framesIn atomic.Uint64
	stop     atomic.Bool
	done     chan struct{}
	readDone chan struct{}
}

func startTestFabric(t testing.TB, lab labspec.Lab, secret []byte) *testFabric {
	t.Helper()
	c := lab.Config
	loop := sim.NewLoop(sim.Options{Seed: c.Seed, Wall: wallclock.New(), RealTime: true, Slowdown: c.Run.RealtimeSlowdown})
	topo, err := cluster.BuildTopology(loop, c)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tunnel.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &testFabric{t: t, lab: lab, secret: secret, loop: loop, topo: topo, conn: conn,
		addr: map[[2]int]netip.AddrPort{}, sess: map[[2]int]uint64{}, rxWin: map[[2]int]*tunnel.Window{},
		txSeq: map[[2]int]uint64{}, sealBuf: make([]byte, 0, 1<<16), done: make(chan struct{}), readDone: make(chan struct{})}
	f.sender = tunnel.NewSender(conn, 4096, &f.drops)
	for h := 0; h < topo.Hosts; h++ {
		f.txKeys = append(f.txKeys, tunnel.HostKey(secret, h))
		for pl, pt := range topo.HostPorts[h] {
			pt.Peer.Tx.SetExporter(fabric.AtArrival(loop, &testFabricExporter{f: f, host: h, plane: pl}))
		}
	}
	go func() {
		defer close(f.done)
		loop.RunWhile(func() bool { return !f.stop.Load() })
	}()
	go f.read()
	t.Cleanup(f.Close)
	return f
}

func (f *testFabric) Addr() string { return f.conn.LocalAddr().String() }

func (f *testFabric) Close() {
	if f.stop.Swap(true) {
		return
	}
	f.loop.Inject(func() {})
	<-f.done
	f.sender.Close()
	f.conn.Close()
	<-f.readDone
}

type testFabricExporter struct {
	f           *testFabric
	host, plane int
}

func (x *testFabricExporter) ExportFrame(_ *fabric.Link, p *fabric.Packet, _ sim.Time) {
	x.f.send(x.host, x.plane, tunnel.Header{Kind: tunnel.KindData, WireLen: uint32(p.WireLen), Flags: p.Flags}, p.Data)
	p.Release()
}

// send seals and sends one frame toward (host, plane) on the loop goroutine.
func (f *testFabric) send(host, plane int, hd tunnel.Header, payload []byte) {
	k := [2]int{host, plane}
	f.mu.Lock()
	to, ok := f.addr[k]
	f.mu.Unlock()
	if !ok {
		f.drops.Drop(tunnel.Unattached)
		return
	}
	f.txSeq[k]++
	hd.Dir, hd.Host, hd.Plane, hd.Session, hd.Seq = tunnel.ToHost, uint16(host), uint8(plane), 1, f.txSeq[k]
	f.sealBuf = tunnel.Seal(f.sealBuf[:0], hd, payload, f.txKeys[host])
	f.sender.Send(f.sealBuf, to)
}

func (f *testFabric) read() {
	defer close(f.readDone)
	ms := make([]tunnel.Message, 32)
	for i := range ms {
		ms[i].Buf = make([]byte, 65536)
	}
	keys := map[int]*tunnel.Key{}
	for {
		n, err := f.conn.ReadBatch(ms)
		if err != nil {
			if f.stop.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		type frame struct {
			host, plane, wire int
			flags             uint8
			data              []byte
		}
		var batch []frame
		for _, m := range ms[:n] {
			b := m.Buf[:m.N]
			hd, err := tunnel.Peek(b)
			if err != nil {
				var de *tunnel.DropError
				if errors.As(err, &de) {
					f.drops.Drop(de.Reason)
				}
				continue
			}
			if int(hd.Host) >= f.topo.Hosts || int(hd.Plane) >= f.topo.Planes {
				f.drops.Drop(tunnel.UnknownHost)
				continue
			}
			k := keys[int(hd.Host)]
			if k == nil {
				k = tunnel.HostKey(f.secret, int(hd.Host))
				keys[int(hd.Host)] = k
			}
			hd, payload, err := tunnel.Open(b, k)
			if err != nil {
				var de *tunnel.DropError
				if errors.As(err, &de) {
					f.drops.Drop(de.Reason)
				}
				continue
			}
			if hd.Dir != tunnel.ToFabric {
				f.drops.Drop(tunnel.WrongDir)
				continue
			}
			key := [2]int{int(hd.Host), int(hd.Plane)}
			f.mu.Lock()
			w := f.rxWin[key]
			if w == nil || hd.Session > f.sess[key] && hd.Kind == tunnel.KindHello {
				w = &tunnel.Window{}
				f.rxWin[key] = w
			}
			r := w.Check(hd.Session, hd.Seq)
			if r == 0 {
				w.Commit(hd.Session, hd.Seq)
			}
			f.mu.Unlock()
			if r != 0 {
				f.drops.Drop(r)
				continue
			}
			f.framesIn.Add(1)
			switch hd.Kind {
			case tunnel.KindHello:
				if !bytes.Equal(payload, f.lab.Digest[:]) {
					f.drops.Drop(tunnel.Digest)
					continue
				}
				f.mu.Lock()
				f.addr[key], f.sess[key] = m.Addr, hd.Session
				f.mu.Unlock()
				host, plane := key[0], key[1]
				f.loop.Inject(func() { f.send(host, plane, tunnel.Header{Kind: tunnel.KindHelloAck}, f.lab.Digest[:]) })
			case tunnel.KindData:
				f.mu.Lock()
				_, attached := f.addr[key]
				f.mu.Unlock()
				if !attached {
					f.drops.Drop(tunnel.Unattached)
					continue
				}
				batch = append(batch, frame{key[0], key[1], int(hd.WireLen), hd.Flags, append([]byte(nil), payload...)})
			}
		}
		if len(batch) > 0 {
			f.loop.Inject(func() {
				for _, fr := range batch {
					pt := f.topo.HostPorts[fr.host][fr.plane]
					p := pt.Peer.Pool().Get(len(fr.data))
					copy(p.Data, fr.data)
					p.WireLen, p.Flags = fr.wire, fr.flags
					pt.Tx.Arrive(p)
				}
			})
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
