package labfabric

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

// wait is the generous bound every poll in these tests has (a loaded
// 2-core machine).
const wait = 10 * time.Second

type rig struct {
	t     testing.TB
	lab   labspec.Lab
	f     *Fabric
	hosts []*SyntheticHost
	api   string
}

func newRig(t testing.TB, planes []int, hosts int, sets ...string) *rig {
	t.Helper()
	lab, err := labspec.Resolve("", append([]string{"fabric.preset=C", "fabric.planes=2", "fabric.hosts=8"}, sets...), 1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	f, err := New(Options{Lab: lab, Secret: testSecret, Listen: "127.0.0.1:0", API: "127.0.0.1:0", Planes: planes, Log: &syncWriter{w: &log}})
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	r := &rig{t: t, lab: lab, f: f, api: "http://" + f.APIAddr()}
	t.Cleanup(func() {
		for _, h := range r.hosts {
			h.Close()
		}
		f.Stop()
		if t.Failed() {
			t.Logf("fabric log:\n%s", log.String())
		}
	})
	for i := range hosts {
		h, err := NewSyntheticHost(lab, testSecret, i, f.TunnelAddr(), 64)
		if err != nil {
			t.Fatal(err)
		}
		r.hosts = append(r.hosts, h)
	}
	return r
}

type syncWriter struct {
	w io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) { return s.w.Write(b) } // logger serializes

func (r *rig) attach(planes ...int) {
	r.t.Helper()
	for _, h := range r.hosts {
		if err := h.Attach(planes, wait); err != nil {
			r.t.Fatalf("host %d: %v", h.ID, err)
		}
	}
}

func (r *rig) status() labapi.FabricStatus {
	r.t.Helper()
	var s labapi.FabricStatus
	r.getJSON(labapi.FabricStatusPath, &s)
	return s
}

func (r *rig) getJSON(path string, v any) {
	r.t.Helper()
	resp, err := http.Get(r.api + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		r.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		r.t.Fatal(err)
	}
}

// frame is a real IPv6/UDP frame from host src to host dst on plane.
func (r *rig) frame(src, dst, plane int, seq uint32) []byte {
	topo := r.f.topo
	pool := fabric.NewPool(topo.Pool.LargeCap)
	spec := fabric.FrameSpec{Src: topo.HostAddr(src, plane), Dst: topo.HostAddr(dst, plane), Sport: 1000 + uint16(seq), Flow: seq,
		DSCP: 0, ECN: 1, Payload: 200, Stored: -1, Seq: seq}
	if topo.Mode == fabric.ForwardUSID {
		o := topo.PathUSID(src, dst, plane, 0)
		spec.Outer = &o
	}
	p := fabric.BuildFrame(pool, spec)
	return append([]byte(nil), p.Data...)
}

// next waits for the next frame host h keeps.
func next(t *testing.T, h *SyntheticHost) Received {
	t.Helper()
	select {
	case fr := <-h.Frames():
		return fr
	case <-time.After(wait):
		t.Fatalf("host %d: no frame within %v", h.ID, wait)
		return Received{}
	}
}

// sameExceptHopAndECN compares frames but for the IPv6 hop limits and
// ECN bits (of every IPv6 header: the fabric decrements and marks them).
func sameExceptHopAndECN(a, b []byte, headers int) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = bytes.Clone(a), bytes.Clone(b)
	for i := range headers {
		off := fabric.EthHeaderLen + i*fabric.IPv6HeaderLen
		a[off+7], b[off+7] = 0, 0
		a[off+1] &^= 0x30
		b[off+1] &^= 0x30
	}
	return bytes.Equal(a, b)
}

func TestFrameCrossesTheFabric(t *testing.T) {
	for _, fwd := range []string{"ecmp", "usid"} {
		t.Run(fwd, func(t *testing.T) {
			r := newRig(t, nil, 8, "fabric.forwarding="+fwd)
			r.attach(0, 1)
			for _, tc := range []struct{ src, dst, plane int }{{0, 1, 0}, {0, 1, 1}, {2, 6, 1}} {
				fr := r.frame(tc.src, tc.dst, tc.plane, 7)
				if err := r.hosts[tc.src].SendData(tc.plane, fr, len(fr)+fabric.FCSLen, 0); err != nil {
					t.Fatal(err)
				}
				got := next(t, r.hosts[tc.dst])
				if int(got.Header.Plane) != tc.plane || int(got.Header.Host) != tc.dst || got.Header.Dir != tunnel.ToHost {
					t.Errorf("%+v: header %+v", tc, got.Header)
				}
				headers := 1
				if fwd == "usid" {
					// The outer destination is the uSID path the switches
					// consume: compare the inner packet.
					headers = 2
					inner := fabric.EthHeaderLen + fabric.IPv6HeaderLen
					if len(got.Payload) != len(fr) || !sameExceptHopAndECN(append(fr[:fabric.EthHeaderLen:fabric.EthHeaderLen], fr[inner:]...),
						append(got.Payload[:fabric.EthHeaderLen:fabric.EthHeaderLen], got.Payload[inner:]...), 1) {
						t.Errorf("%+v: inner frame differs:\nsent %x\ngot  %x", tc, fr, got.Payload)
					}
				} else if !sameExceptHopAndECN(fr, got.Payload, headers) {
					t.Errorf("%+v: frame differs:\nsent %x\ngot  %x", tc, fr, got.Payload)
				}
				if fwd == "ecmp" {
					switches := 1 // via a T0 only
					if tc.src/4 != tc.dst/4 {
						switches = 3 // T0, T1, T0
					}
					if want := 64 - switches; int(got.Payload[fabric.EthHeaderLen+7]) != want {
						t.Errorf("%+v: hop limit %d, want %d", tc, got.Payload[fabric.EthHeaderLen+7], want)
					}
				}
				if int(got.Header.WireLen) != len(fr)+fabric.FCSLen {
					t.Errorf("%+v: wire length %d, want %d", tc, got.Header.WireLen, len(fr)+fabric.FCSLen)
				}
			}
			s := r.status()
			if len(s.Attached) != 16 || s.FramesIn < 3+16 || s.FramesOut < 3+16 {
				t.Errorf("status: %d attached, frames in %d out %d", len(s.Attached), s.FramesIn, s.FramesOut)
			}
		})
	}
}

// Every kind of bad frame is dropped and counted under its reason, and a
// valid frame afterwards still crosses.
func TestBadFramesAreCountedAndHarmless(t *testing.T) {
	r := newRig(t, []int{0}, 2, "fabric.forwarding=ecmp")
	h0, h1 := r.hosts[0], r.hosts[1]
	fr := r.frame(0, 1, 0, 1)

	// Data before Hello: unattached.
	if err := h0.SendData(0, fr, 0, 0); err != nil {
		t.Fatal(err)
	}
	r.waitDrop(tunnel.Unattached, 1)
	// A Hello with the wrong digest.
	bad := h0.Seal(nil, tunnel.KindHello, 0, make([]byte, 32), 0, 0)
	h0.SendRaw(bad)
	r.waitDrop(tunnel.Digest, 1)

	if err := h0.Attach([]int{0}, wait); err != nil {
		t.Fatal(err)
	}
	if err := h1.Attach([]int{0}, wait); err != nil {
		t.Fatal(err)
	}

	// Wrong secret: a host whose key differs.
	other, err := NewSyntheticHost(r.lab, []byte("another secret, 32 bytes long..."), 0, r.f.TunnelAddr(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.SendData(0, fr, 0, 0)
	r.waitDrop(tunnel.BadTag, 1)

	// Replay of a valid frame.
	valid := h0.Seal(nil, tunnel.KindData, 0, fr, uint32(len(fr)+4), 0)
	h0.SendRaw(valid)
	next(t, h1)
	h0.SendRaw(valid)
	r.waitDrop(tunnel.Replay, 1)

	// A stale session: an older start time than the attached one.
	oldH := &SyntheticHost{ID: 0, Session: h0.Session - 1, conn: h0.conn, fabric: h0.fabric, key: h0.key, seq: make([]uint64, 2), planes: 2}
	h0.SendRaw(oldH.Seal(nil, tunnel.KindData, 0, fr, 0, 0))
	r.waitDrop(tunnel.Stale, 1)

	// An unknown host id (≥ the config's hosts), and a plane this fabric
	// does not run.
	stranger := &SyntheticHost{ID: 100, Session: h0.Session, key: tunnel.HostKey(testSecret, 100), seq: make([]uint64, 2), planes: 2}
	h0.SendRaw(stranger.Seal(nil, tunnel.KindData, 0, fr, 0, 0))
	r.waitDrop(tunnel.UnknownHost, 1)
	h0.SendRaw(h0.Seal(nil, tunnel.KindHello, 1, h0.digest[:], 0, 0))
	r.waitDrop(tunnel.UnknownHost, 2)

	// Garbage.
	h0.SendRaw([]byte("this is not a tunnel frame at all, just bytes........"))
	h0.SendRaw(nil)
	r.waitDrop(tunnel.Malformed, 2)

	// Wrong direction: an authentic frame marked ToHost.
	wd := tunnel.Seal(nil, tunnel.Header{Kind: tunnel.KindData, Dir: tunnel.ToHost, Plane: 0, Host: 0, Session: h0.Session, Seq: 1 << 40}, fr, h0.key)
	h0.SendRaw(wd)
	r.waitDrop(tunnel.WrongDir, 1)

	// An inner frame too short to be Ethernet.
	h0.SendData(0, fr[:8], 0, 0)
	r.waitDrop(tunnel.Malformed, 3)

	// An inner frame larger than any the fabric carries.
	h0.SendData(0, make([]byte, r.f.topo.Pool.LargeCap+1), 0, 0)
	r.waitDrop(tunnel.Malformed, 4)

	// Still forwarding.
	fr2 := r.frame(0, 1, 0, 2)
	h0.SendData(0, fr2, len(fr2)+4, 0)
	got := next(t, h1)
	if !sameExceptHopAndECN(fr2, got.Payload, 1) {
		t.Errorf("after the bad frames: got %x, want %x", got.Payload, fr2)
	}
	s := r.status()
	for _, reason := range []tunnel.Reason{tunnel.Unattached, tunnel.Digest, tunnel.BadTag, tunnel.Replay, tunnel.Stale, tunnel.UnknownHost, tunnel.Malformed, tunnel.WrongDir} {
		if s.Drops[reason.String()] == 0 {
			t.Errorf("status drops: no %s: %v", reason, s.Drops)
		}
	}
	// /metrics has them too.
	m := r.get(labapi.MetricsPath)
	for _, want := range []string{`vcluster_tunnel_dropped_frames_total{reason="replay"} 1`, `vcluster_tunnel_dropped_frames_total{reason="bad-tag"} 1`,
		`vcluster_fabric_lag_seconds{quantile="0.99"}`, `vcluster_tunnel_port_frames_in_total{host="0",plane="0"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, m)
		}
	}
}

func (r *rig) get(path string) string {
	r.t.Helper()
	resp, err := http.Get(r.api + path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		r.t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	return string(b)
}

// waitDrop polls until reason has at least n drops.
func (r *rig) waitDrop(reason tunnel.Reason, n uint64) {
	r.t.Helper()
	deadline := time.Now().Add(wait)
	for r.f.counters.Dropped(reason) < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("%s drops: %d, want %d; all: %v", reason, r.f.counters.Dropped(reason), n, r.f.counters.Snapshot())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLiveFaultPlan(t *testing.T) {
	r := newRig(t, nil, 2, "fabric.forwarding=ecmp")
	r.attach(0, 1)
	post := func(plan string) (*http.Response, string) {
		resp, err := http.Post(r.api+labapi.FabricFaultsPath, "application/yaml", strings.NewReader(plan))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// Invalid plans name the problem.
	for _, tc := range []struct{ plan, want string }{
		{"events:\n  - at: 0s\n    kind: link_dwn\n    target: host:0\n", "link_dwn"},
		{"events:\n  - at: 0s\n    kind: link_down\n    target: switch:p9.t0.0\n", "p9"},
		{"not: [yaml", "request:1"},
	} {
		resp, body := post(tc.plan)
		if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("plan %q: %s %s, want 400 naming %q", tc.plan, resp.Status, body, tc.want)
		}
	}
	if s := r.status(); len(s.LinksDown) != 0 {
		t.Fatalf("links down before any fault: %v", s.LinksDown)
	}
	resp, body := post("events:\n  - at: 0s\n    duration: 1h\n    kind: link_down\n    target: link:h0/p0\n")
	if resp.StatusCode != 200 {
		t.Fatalf("POST plan: %s %s", resp.Status, body)
	}
	var fr labapi.FaultResponse
	if err := json.Unmarshal([]byte(body), &fr); err != nil || fr.Events != 1 || fr.StartNs <= 0 || !strings.Contains(fr.Summary, "link_down") {
		t.Fatalf("fault response %s (%v)", body, err)
	}
	deadline := time.Now().Add(wait)
	var s labapi.FabricStatus
	for {
		s = r.status()
		if len(s.LinksDown) > 0 && s.FaultEvents == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fault never showed: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, l := range s.LinksDown {
		if !strings.Contains(l, "h0/p0") {
			t.Errorf("link down %s is not host 0's plane-0 cable", l)
		}
	}
	if len(s.LinksDown) != 2 {
		t.Errorf("links down %v, want both directions of h0/p0's cable", s.LinksDown)
	}
	// Frames into the downed cable are counted there; plane 1 still works.
	fr0 := r.frame(0, 1, 0, 1)
	r.hosts[0].SendData(0, fr0, 0, 0)
	var down *fabric.Link
	r.f.Do(func() { down = r.f.topo.HostPorts[0][0].Tx })
	deadline = time.Now().Add(wait)
	for {
		var n uint64
		r.f.Do(func() { n = down.Counters.DroppedDown })
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s: DroppedDown %d, want 1", down.Name, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	fr1 := r.frame(0, 1, 1, 2)
	r.hosts[0].SendData(1, fr1, 0, 0)
	if got := next(t, r.hosts[1]); got.Header.Plane != 1 {
		t.Errorf("plane 1 frame arrived on plane %d", got.Header.Plane)
	}
	select {
	case got := <-r.hosts[1].Frames():
		t.Errorf("a frame crossed the downed cable: %+v", got.Header)
	default:
	}
	if g := r.get(labapi.FabricGraphPath + "?format=dot"); !strings.Contains(g, "DOWN") || !strings.Contains(g, "graph vcluster") {
		t.Errorf("graph does not mark the link down:\n%s", g)
	}
}

func TestCaptureStreamsPcapng(t *testing.T) {
	r := newRig(t, nil, 2, "fabric.forwarding=ecmp")
	r.attach(0, 1)
	resp, err := http.Get(r.api + labapi.FabricCapturePath + "?port=nosuch")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "h5/p2") {
		t.Errorf("unknown port: %s %s", resp.Status, b)
	}
	var names []string
	r.getJSON(labapi.FabricPortsPath, &names)
	if len(names) == 0 || !strings.Contains(strings.Join(names, " "), "h1/p0") {
		t.Fatalf("ports: %v", names)
	}

	// Two clients: the host port (seen at its T0) and the T0 port itself.
	var peer string
	r.f.Do(func() { peer = r.f.topo.HostPorts[1][0].Peer.Name })
	open := func(port string) io.ReadCloser {
		resp, err := http.Get(r.api + labapi.FabricCapturePath + "?port=" + port)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("capture %s: %s", port, resp.Status)
		}
		return resp.Body
	}
	a, bb := open("h1/p0"), open(peer)
	// Wait until both taps are in place.
	deadline := time.Now().Add(wait)
	for {
		var n int
		r.f.Do(func() {
			if pc := r.f.captures[r.f.topo.HostPorts[1][0].Peer]; pc != nil {
				n = len(pc.clients)
			}
		})
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capture clients: %d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	const frames = 3
	var sent [][]byte
	for i := range frames {
		fr := r.frame(0, 1, 0, uint32(i+1))
		sent = append(sent, fr)
		r.hosts[0].SendData(0, fr, 0, 0)
		next(t, r.hosts[1])
	}
	// Close the streams once the frames went through: a client that
	// leaves ends its stream; what was flushed parses.
	time.Sleep(100 * time.Millisecond) // the handler flushes after each batch
	check := func(name string, body io.ReadCloser, wantDir pcap.Direction) {
		buf := make([]byte, 1<<20)
		var got []byte
		stop := time.AfterFunc(wait, func() { body.Close() })
		defer stop.Stop()
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			f, err := pcap.Read(bytes.NewReader(got))
			if err == nil && len(f.Records) >= frames {
				if !f.NG || len(f.Interfaces) != 1 || f.Interfaces[0].Name != name {
					t.Errorf("%s: interfaces %+v", name, f.Interfaces)
				}
				for i, rec := range f.Records[:frames] {
					if rec.Dir != wantDir || !sameExceptHopAndECN(rec.Data, sent[i], 1) {
						t.Errorf("%s record %d: dir %v, %x; want %v %x", name, i, rec.Dir, rec.Data, wantDir, sent[i])
					}
					if rec.TS < time.Now().Add(-time.Minute).UnixNano() || rec.TS > time.Now().UnixNano() {
						t.Errorf("%s record %d: timestamp %v is not about now", name, i, time.Unix(0, rec.TS))
					}
				}
				body.Close()
				return
			}
			n, err := body.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		body.Close()
		t.Errorf("%s: no %d frames in the stream (%d bytes)", name, frames, len(got))
	}
	check("h1/p0", a, pcap.DirInbound) // the NIC receives them
	check(peer, bb, pcap.DirOutbound)  // the T0 port sends them
	// Both clients gone: the tap is removed.
	deadline = time.Now().Add(wait)
	for {
		var tapped bool
		r.f.Do(func() { tapped = r.f.captures[r.f.topo.HostPorts[1][0].Peer] != nil })
		if !tapped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the tap stayed after both clients left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
