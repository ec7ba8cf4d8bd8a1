package tunnel

import (
	"bytes"
	"testing"
)

func TestReceiverDrops(t *testing.T) {
	k1, k2 := HostKey(testSecret, 1), HostKey(testSecret, 2)
	r := NewReceiver(ToFabric, nil)
	r.AddHost(k1)
	r.AddHost(k2)
	c := r.Counters()
	frame := func(k *Key, dir Dir, plane uint8, session, seq uint64) []byte {
		return Seal(nil, Header{Kind: KindData, Dir: dir, Plane: plane, Host: k.Host(), Session: session, Seq: seq, WireLen: 64}, pattern(50, byte(seq)), k)
	}
	expect := func(name string, b []byte, want Reason) {
		t.Helper()
		before := c.Snapshot()
		h, p, err := r.Receive(b)
		after := c.Snapshot()
		if want == 0 {
			if err != nil {
				t.Fatalf("%s: %v, want accepted", name, err)
			}
			if !bytes.Equal(p, pattern(50, byte(h.Seq))) {
				t.Fatalf("%s: payload changed", name)
			}
		} else if err == nil || reasonOf(t, err) != want {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
		for _, rr := range Reasons() {
			d := after[rr.String()] - before[rr.String()]
			if (rr == want && d != 1) || (rr != want && d != 0) {
				t.Fatalf("%s: counter %v moved by %d", name, rr, d)
			}
		}
	}
	expect("first", frame(k1, ToFabric, 0, 100, 1), 0)
	expect("next", frame(k1, ToFabric, 0, 100, 2), 0)
	expect("replay", frame(k1, ToFabric, 0, 100, 2), Replay)
	expect("reordered", frame(k1, ToFabric, 0, 100, 4), 0)
	expect("late but in window", frame(k1, ToFabric, 0, 100, 3), 0)
	expect("other plane is its own stream", frame(k1, ToFabric, 1, 100, 1), 0)
	expect("other host is its own stream", frame(k2, ToFabric, 0, 5, 1), 0)
	expect("far ahead", frame(k1, ToFabric, 0, 100, 1000), 0)
	expect("below the window", frame(k1, ToFabric, 0, 100, 500), Stale)
	expect("older session", frame(k1, ToFabric, 0, 99, 2000), Stale)
	expect("reflected", frame(k1, ToHost, 0, 100, 1001), WrongDir)
	expect("unknown host", frame(HostKey(testSecret, 3), ToFabric, 0, 100, 1), UnknownHost)
	expect("wrong secret", frame(HostKey([]byte("not-the-lab-secret!!"), 1), ToFabric, 0, 100, 1001), BadTag)
	expect("host 2 posing as host 1", Seal(nil, Header{Kind: KindData, Dir: ToFabric, Host: 1, Session: 100, Seq: 1002}, pattern(50, byte(1002%256)), k2), BadTag)
	expect("malformed", []byte("hello"), Malformed)

	// A forged frame must not move the window: seq 5000 forged, then
	// the genuine 1001 (below 5000-127) is still accepted.
	forged := frame(k1, ToFabric, 0, 100, 5000)
	forged[len(forged)-1] ^= 1
	expect("forged far ahead", forged, BadTag)
	if w := r.Window(1, 0); w.Highest() != 1000 {
		t.Fatalf("a forged frame moved the window to %d", w.Highest())
	}
	expect("genuine after forgery", frame(k1, ToFabric, 0, 100, 1001), 0)
	// A forged restart neither.
	forged = frame(k1, ToFabric, 0, 200, 1)
	forged[HeaderLen] ^= 1
	expect("forged restart", forged, BadTag)
	expect("old session still current", frame(k1, ToFabric, 0, 100, 1002), 0)

	expect("restart", frame(k1, ToFabric, 0, 200, 1), 0)
	expect("pre-restart frame", frame(k1, ToFabric, 0, 100, 1003), Stale)
	expect("after restart", frame(k1, ToFabric, 0, 200, 2), 0)
	if w := r.Window(1, 0); w.Session() != 200 || w.Highest() != 2 {
		t.Fatalf("window after restart: session %d highest %d", w.Session(), w.Highest())
	}
}

func TestReceiverToHost(t *testing.T) {
	k := HostKey(testSecret, 7)
	r := NewReceiver(ToHost, nil)
	r.AddHost(k)
	ack := Seal(nil, Header{Kind: KindHelloAck, Dir: ToHost, Host: 7, Session: 1, Seq: 1}, make([]byte, 32), k)
	h, p, err := r.Receive(ack)
	if err != nil || h.Kind != KindHelloAck || len(p) != 32 {
		t.Fatalf("hello-ack: %+v %d %v", h, len(p), err)
	}
	hello := Seal(nil, Header{Kind: KindHello, Dir: ToFabric, Host: 7, Session: 1, Seq: 2}, make([]byte, 32), k)
	if _, _, err := r.Receive(hello); err == nil || reasonOf(t, err) != WrongDir {
		t.Fatalf("a host's own hello reflected back: %v", err)
	}
}

func TestReceiverAllocs(t *testing.T) {
	k := HostKey(testSecret, 1)
	r := NewReceiver(ToFabric, nil)
	r.AddHost(k)
	h := Header{Kind: KindData, Dir: ToFabric, Host: 1, Session: 1, Seq: 1}
	buf := make([]byte, 0, 2048)
	r.Receive(Seal(buf[:0], h, pattern(1000, 0), k))
	allocs := testing.AllocsPerRun(100, func() {
		h.Seq++
		if _, _, err := r.Receive(Seal(buf[:0], h, pattern(0, 0), k)); err != nil {
			panic(err)
		}
		if _, _, err := r.Receive(Seal(buf[:0], h, nil, k)); err == nil {
			panic("replay accepted")
		}
	})
	if allocs != 0 {
		t.Fatalf("Receive: %v allocations per frame, want 0", allocs)
	}
}

func TestStreamNumbersFrames(t *testing.T) {
	k := HostKey(testSecret, 3)
	r := NewReceiver(ToFabric, nil)
	r.AddHost(k)
	s := Stream{Host: 3, Plane: 1, Dir: ToFabric, Session: 42}
	hello := s.Seal(nil, KindHello, 0, 0, make([]byte, 32), k)
	data := s.Seal(nil, KindData, 64, 2, pattern(50, 2), k)
	for i, f := range [][]byte{hello, data} {
		h, _, err := r.Receive(f)
		if err != nil || h.Seq != uint64(i+1) || h.Session != 42 || h.Plane != 1 || h.Host != 3 {
			t.Fatalf("frame %d: %+v %v", i, h, err)
		}
	}
	if s.Sent() != 2 {
		t.Fatalf("sent %d", s.Sent())
	}
	if _, _, err := r.Receive(data); err == nil || reasonOf(t, err) != Replay {
		t.Fatalf("the same frame twice: %v", err)
	}
	// A restarted sender: a later session starts again at 1.
	s2 := Stream{Host: 3, Plane: 1, Dir: ToFabric, Session: 43}
	if h, _, err := r.Receive(s2.Seal(nil, KindHello, 0, 0, make([]byte, 32), k)); err != nil || h.Seq != 1 {
		t.Fatalf("restart: %+v %v", h, err)
	}
}
