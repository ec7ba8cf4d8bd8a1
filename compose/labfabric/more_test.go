package labfabric

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
)

// A host that restarts (a larger session) re-attaches: its replay
// window starts again and its frames cross; the old session's frames are
// stale.
func TestHostRestartReattaches(t *testing.T) {
	r := newRig(t, []int{0}, 2, "fabric.forwarding=ecmp")
	r.attach(0)
	fr := r.frame(0, 1, 0, 1)
	old := r.hosts[0].Seal(nil, tunnel.KindData, 0, fr, uint32(len(fr)+4), 0)
	r.hosts[0].SendRaw(old)
	next(t, r.hosts[1])

	// The restarted host 0: a new socket, a later session, seq from 1.
	h0, err := NewSyntheticHost(r.lab, testSecret, 0, r.f.TunnelAddr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer h0.Close()
	if h0.Session <= r.hosts[0].Session {
		h0.Session = r.hosts[0].Session + 1
	}
	// Data of the new session before its Hello: the fabric knows the old
	// session only.
	h0.SendData(0, fr, 0, 0)
	r.waitDrop(tunnel.Unattached, 1)
	if err := h0.Attach([]int{0}, wait); err != nil {
		t.Fatal(err)
	}
	fr2 := r.frame(0, 1, 0, 2)
	h0.SendData(0, fr2, 0, 0)
	if got := next(t, r.hosts[1]); !sameExceptHopAndECN(got.Payload, fr2, 1) {
		t.Errorf("after the restart: %x, want %x", got.Payload, fr2)
	}
	// Frames back to host 0 go to its new address.
	back := r.frame(1, 0, 0, 3)
	r.hosts[1].SendData(0, back, 0, 0)
	if got := next(t, h0); !sameExceptHopAndECN(got.Payload, back, 1) {
		t.Errorf("to the restarted host: %x, want %x", got.Payload, back)
	}
	// The old session's frames are stale now.
	r.hosts[0].SendRaw(r.hosts[0].Seal(nil, tunnel.KindData, 0, fr, uint32(len(fr)+4), 0))
	r.waitDrop(tunnel.Stale, 1)
	s := r.status()
	for _, a := range s.Attached {
		if a.Host == 0 && a.Addr != h0.Addr().String() {
			t.Errorf("host 0 attached at %s, want its new address %s", a.Addr, h0.Addr())
		}
	}
}

// Frames toward a host that never attached are dropped as unattached.
func TestFramesToUnattachedHost(t *testing.T) {
	r := newRig(t, []int{0}, 1, "fabric.forwarding=ecmp")
	r.attach(0)
	r.hosts[0].SendData(0, r.frame(0, 3, 0, 1), 0, 0)
	r.waitDrop(tunnel.Unattached, 1)
	if n := r.f.counters.Dropped(tunnel.Malformed); n != 0 {
		t.Errorf("malformed %d", n)
	}
}

func TestGraphSVG(t *testing.T) {
	r := newRig(t, []int{0}, 0)
	resp, err := http.Get(r.api + labapi.FabricGraphPath + "?format=svg")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Graphviz is installed here; without it the answer is 501 saying so.
	switch resp.StatusCode {
	case 200:
		if !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "p0.t0.0") {
			t.Errorf("svg: %.300s", b)
		}
	case 501:
		if !strings.Contains(string(b), "graphviz") {
			t.Errorf("501 without saying why: %s", b)
		}
	default:
		t.Errorf("svg: %s %s", resp.Status, b)
	}
	resp, err = http.Get(r.api + labapi.FabricGraphPath + "?format=png")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("format=png: %s, want 400", resp.Status)
	}
}

// Whatever an authenticated host puts inside a Data frame — any bytes,
// wire length and flags — the fabric neither panics nor stalls: it
// forwards, drops or counts it, and a valid frame still crosses after.
func FuzzInnerFrame(f *testing.F) {
	r := newRig(f, []int{0}, 0, "fabric.forwarding=ecmp")
	fx := r.f
	fx.Do(func() {
		for h := range 2 {
			pt := fx.ports[h][0]
			pt.attached, pt.session = true, 1
			pt.addr = fx.TunnelAddr() // frames out go to the fabric itself: counted there as wrong-dir
		}
	})
	valid := r.frame(0, 1, 0, 1)
	f.Add(valid, uint32(len(valid)+4), uint8(0))
	f.Add(valid[:20], uint32(100), uint8(fabric.FlagElided))
	f.Add(make([]byte, 14), uint32(18), uint8(0))
	f.Add(valid, uint32(1<<31), uint8(0xff))
	f.Fuzz(func(t *testing.T, payload []byte, wireLen uint32, flags uint8) {
		if len(payload) > tunnel.MaxPayload {
			payload = payload[:tunnel.MaxPayload]
		}
		var out0, out1 uint64
		err := fx.Do(func() {
			out0 = fx.ports[1][0].out
			now := fx.wall.Now()
			fx.handle(tunnel.Header{Kind: tunnel.KindData, Dir: tunnel.ToFabric, Host: 0, Plane: 0, Session: 1, Seq: 1, WireLen: wireLen, Flags: flags}, fx.TunnelAddr(), payload, now)
			fx.handle(tunnel.Header{Kind: tunnel.KindData, Dir: tunnel.ToFabric, Host: 0, Plane: 0, Session: 1, Seq: 2, WireLen: uint32(len(valid) + 4)}, fx.TunnelAddr(), valid, now)
		})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wait)
		for {
			fx.Do(func() { out1 = fx.ports[1][0].out })
			if out1 > out0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the valid frame after %x (wire %d, flags %#x) did not cross", payload, wireLen, flags)
			}
			time.Sleep(time.Millisecond)
		}
	})
}
