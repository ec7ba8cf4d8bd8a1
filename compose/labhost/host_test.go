package labhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/compose/tunnel"
)

// testLab is a 4-host, 4-plane lab (preset C) at 1 Gb/s per plane.
func testLab(t testing.TB, sets ...string) labspec.Lab {
	t.Helper()
	lab, err := labspec.Resolve("", append([]string{"fabric.preset=C", "fabric.hosts=4"}, sets...), labspec.DefaultPlaneBps)
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

func testSecret(t testing.TB) []byte {
	t.Helper()
	s, err := tunnel.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startHosts starts a fabric stand-in and hosts 0..n-1, and waits until
// every host is up.
func startHosts(t *testing.T, lab labspec.Lab, n int) (*testFabric, []*Host) {
	t.Helper()
	secret := testSecret(t)
	f := startTestFabric(t, lab, secret)
	var hs []*Host
	for id := range n {
		h, err := New(Options{ID: id, Lab: lab, Fabric: f.Addr(), Secret: secret, API: "127.0.0.1:0",
			Keepalive: 200 * time.Millisecond, Log: log.New(testWriter{t}, fmt.Sprintf("host %d: ", id), log.Lmicroseconds)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hs = append(hs, h)
	}
	for _, h := range hs {
		waitFor(t, 20*time.Second, fmt.Sprintf("host %d up", h.ID()), h.Up)
	}
	return f, hs
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func members(hs []*Host) []labapi.Peer {
	var ps []labapi.Peer
	for _, h := range hs {
		ps = append(ps, labapi.Peer{Host: h.ID(), API: h.APIAddr()})
	}
	return ps
}

func post(t testing.TB, api string, rq any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(rq)
	resp, err := http.Post("http://"+api+labapi.HostCollectivesPath, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, []byte(err.Error()) // a killed host's own request
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// runAll posts rq to every member at once and returns their answers.
func runAll(t *testing.T, hs []*Host, rq labapi.CollectiveRequest) []labapi.CollectiveResponse {
	t.Helper()
	out := make([]labapi.CollectiveResponse, len(hs))
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := post(t, h.APIAddr(), rq)
			if st != http.StatusOK {
				t.Errorf("host %d: HTTP %d: %s", h.ID(), st, body)
				return
			}
			if err := json.Unmarshal(body, &out[i]); err != nil {
				t.Errorf("host %d: %v: %s", h.ID(), err, body)
			}
		}()
	}
	wg.Wait()
	return out
}

func TestHostsAttachAndReportHealth(t *testing.T) {
	lab := testLab(t)
	f, hs := startHosts(t, lab, 2)
	resp, err := http.Get("http://" + hs[1].APIAddr() + labapi.HostHealthPath)
	if err != nil {
		t.Fatal(err)
	}
	var hh labapi.HostHealth
	json.NewDecoder(resp.Body).Decode(&hh)
	resp.Body.Close()
	if want := netip.AddrFrom16(hs[1].cl.Topo.HostAddr(1, 0)).String(); resp.StatusCode != 200 || hh.State != "up" || hh.Host != 1 || hh.Transport != "mrc" || hh.Address != want || hh.PID != os.Getpid() {
		t.Fatalf("health: HTTP %d %+v", resp.StatusCode, hh)
	}
	if hh.VirtualNs <= 0 {
		t.Fatalf("health: virtual time %d, want > 0 on a running loop", hh.VirtualNs)
	}
	if f.drops.Dropped(tunnel.Digest) != 0 || f.drops.Dropped(tunnel.BadTag) != 0 {
		t.Fatalf("fabric drops %v", f.drops.Snapshot())
	}
	// The fabric goes away: the host is no longer up.
	f.Close()
	waitFor(t, 10*time.Second, "host 1 no longer up without a fabric", func() bool { return !hs[1].Up() })
	if hh := hs[1].Health(); hh.State != "starting" {
		t.Fatalf("health without a fabric: %+v", hh)
	}
}

func TestHostWithOtherDigestStaysStarting(t *testing.T) {
	lab := testLab(t)
	secret := testSecret(t)
	f := startTestFabric(t, lab, secret)
	other := testLab(t, "seed=7")
	h, err := New(Options{ID: 0, Lab: other, Fabric: f.Addr(), Secret: secret, API: "127.0.0.1:0", Keepalive: 50 * time.Millisecond,
		Log: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	waitFor(t, 10*time.Second, "the fabric refusing the digest", func() bool { return f.drops.Dropped(tunnel.Digest) >= 2 })
	if h.Up() {
		t.Fatal("a host with another config's digest is up")
	}
	// A stranger's key: refused by tag.
	g, err := New(Options{ID: 1, Lab: lab, Fabric: f.Addr(), Secret: testSecret(t), API: "127.0.0.1:0", Keepalive: 50 * time.Millisecond,
		Log: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	waitFor(t, 10*time.Second, "the fabric refusing a stranger's tag", func() bool { return f.drops.Dropped(tunnel.BadTag) >= 2 })
	if g.Up() {
		t.Fatal("a host with another secret is up")
	}
}

func TestCollectiveRequestValidation(t *testing.T) {
	lab := testLab(t)
	_, hs := startHosts(t, lab, 1)
	h := hs[0]
	good := labapi.CollectiveRequest{ID: "v1", Op: "allreduce", Size: "1M",
		Peers: []labapi.Peer{{Host: 0, API: h.APIAddr()}, {Host: 1, API: "127.0.0.1:1"}}}
	for _, c := range []struct {
		name  string
		edit  func(*labapi.CollectiveRequest)
		field string
	}{
		{"no id", func(r *labapi.CollectiveRequest) { r.ID = "" }, "id:"},
		{"bad id", func(r *labapi.CollectiveRequest) { r.ID = "a/b" }, "id:"},
		{"op", func(r *labapi.CollectiveRequest) { r.Op = "allsum" }, "op:"},
		{"algorithm", func(r *labapi.CollectiveRequest) { r.Algorithm = "bogus" }, "algorithm:"},
		{"size text", func(r *labapi.CollectiveRequest) { r.Size = "lots" }, "size:"},
		{"size zero", func(r *labapi.CollectiveRequest) { r.Size = "0" }, "size:"},
		{"size huge", func(r *labapi.CollectiveRequest) { r.Size = "2G" }, "size:"},
		{"one peer", func(r *labapi.CollectiveRequest) { r.Peers = r.Peers[:1] }, "peers:"},
		{"not a member", func(r *labapi.CollectiveRequest) { r.Peers[0].Host = 2 }, "peers:"},
		{"twice", func(r *labapi.CollectiveRequest) { r.Peers[1].Host = 0 }, "peers[1].host:"},
		{"host range", func(r *labapi.CollectiveRequest) { r.Peers[1].Host = 4 }, "peers[1].host:"},
		{"negative host", func(r *labapi.CollectiveRequest) { r.Peers[1].Host = -1 }, "peers[1].host:"},
		{"api", func(r *labapi.CollectiveRequest) { r.Peers[1].API = "nowhere" }, "peers[1].api:"},
		{"transport", func(r *labapi.CollectiveRequest) { r.Transport = "roce" }, "transport:"},
		{"iters", func(r *labapi.CollectiveRequest) { r.Iters = -1 }, "iters:"},
		{"iters big", func(r *labapi.CollectiveRequest) { r.Iters = MaxIters + 1 }, "iters:"},
		{"warmup", func(r *labapi.CollectiveRequest) { r.Warmup = -2 }, "warmup:"},
		{"timeout", func(r *labapi.CollectiveRequest) { r.TimeoutMs = -5 }, "timeout_ms:"},
		{"timeout big", func(r *labapi.CollectiveRequest) { r.TimeoutMs = int(MaxTimeout.Milliseconds()) + 1 }, "timeout_ms:"},
	} {
		rq := good
		rq.Peers = append([]labapi.Peer(nil), good.Peers...)
		c.edit(&rq)
		st, body := post(t, h.APIAddr(), rq)
		var e labapi.Error
		json.Unmarshal(body, &e)
		if st != http.StatusBadRequest || !strings.HasPrefix(e.Error, c.field) {
			t.Errorf("%s: HTTP %d %q, want 400 naming %q", c.name, st, e.Error, c.field)
		}
	}
	// Past the registration budget: refused, naming the size.
	h.registered.Store(MaxRegisteredBytes - 1<<20)
	st, body := post(t, h.APIAddr(), good)
	if st != http.StatusInsufficientStorage || !strings.Contains(string(body), `"size: 1M needs 3M`) {
		t.Errorf("beyond the budget: HTTP %d %s, want 507 naming the size", st, body)
	}
	h.registered.Store(0)
	for _, body := range []string{"", "{", `{"id":"x","bogus":1}`, `[1,2]`, `{"id":"x"} {"id":"y"}`} {
		resp, err := http.Post("http://"+h.APIAddr()+labapi.HostCollectivesPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body %q: HTTP %d, want 400", body, resp.StatusCode)
		}
	}
}

// Collectives over four host instances through their HTTP APIs, each
// verified on every rank: MRC (allreduce, alltoall, allgather) and RoCE.
func TestCollectivesAcrossHostProcesses(t *testing.T) {
	for _, c := range []struct {
		name, op string
		sets     []string
	}{
		{"mrc-allreduce", "allreduce", nil},
		{"mrc-alltoall", "alltoall", nil},
		{"mrc-allgather", "allgather", nil},
		{"roce-allreduce", "allreduce", []string{"transport.kind=roce", "fabric.forwarding=ecmp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lab := testLab(t, c.sets...)
			_, hs := startHosts(t, lab, 4)
			checkCollective(t, hs, labapi.CollectiveRequest{ID: c.name, Op: c.op, Size: "256K", Peers: members(hs), Iters: 2, Warmup: 1,
				Transport: lab.Config.Transport.Kind, TimeoutMs: 60000})
		})
	}
}

func checkCollective(t *testing.T, hs []*Host, rq labapi.CollectiveRequest) {
	start := time.Now()
	out := runAll(t, hs, rq)
	t.Logf("%s over %d host instances: %v wall", rq.Op, len(hs), time.Since(start))
	for i, r := range out {
		t.Logf("host %d: %s (lag %+v)", i, r.Row, hs[i].Health().Lag)
		if r.Error != "" || !r.Verified || r.Wrong != 0 || r.FailedPeer != -1 {
			t.Errorf("host %d: %+v", i, r)
		}
		if r.Rank != i || r.Ranks != len(hs) || r.Op != rq.Op || r.Bytes != 256<<10 || r.TimeNs <= 0 || r.Row == "" || !strings.Contains(r.Row, "262144") {
			t.Errorf("host %d: row fields %+v", i, r)
		}
	}
	// The same id again is refused: ids name one run.
	if st, body := post(t, hs[0].APIAddr(), rq); st != http.StatusConflict {
		t.Errorf("reused id: HTTP %d %s, want 409", st, body)
	}
	// QPs: toward other members only, connected, carrying data; a
	// multipath QP lists its EVs, a single-plane one its plane.
	for _, h := range hs {
		qs, err := h.QPs()
		if err != nil {
			t.Fatal(err)
		}
		peers := map[int]bool{}
		for _, q := range qs {
			peers[q.Peer] = true
			multipath := len(q.EVs) > 0
			if q.State != "READY" || multipath == (q.Plane >= 0) || q.Plane >= 4 || q.Counters["bytes_completed"] == 0 && q.Counters["bytes_placed"] == 0 {
				t.Errorf("host %d QP %d: %+v", h.ID(), q.QPN, q)
			}
			t.Logf("host %d QP %d → host %d (plane %d): timeouts %d, retransmissions %d", h.ID(), q.QPN, q.Peer, q.Plane, q.Counters["timeouts"], q.Counters["retransmissions"])
		}
		if len(peers) == 0 || peers[h.ID()] {
			t.Errorf("host %d: QP peers %v", h.ID(), peers)
		}
	}
	// Metrics say what ran.
	resp, err := http.Get("http://" + hs[0].APIAddr() + labapi.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vcluster_collectives_total{result="ok"} 1`, `vcluster_tunnel_dropped_frames_total{reason="bad-tag"} 0`,
		`vcluster_host_up 1`, `vcluster_tunnel_frames_total{dir="in"}`, `vcluster_qps{state="READY"}`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestKilledPeerIsNamed(t *testing.T) {
	lab := testLab(t)
	_, hs := startHosts(t, lab, 3)
	rq := labapi.CollectiveRequest{ID: "kill1", Op: "allreduce", Size: "1M", Peers: members(hs), Iters: 200, TimeoutMs: 20000}
	out := make([]labapi.CollectiveResponse, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := post(t, hs[i].APIAddr(), rq)
			if st != 200 {
				t.Errorf("host %d: HTTP %d %s", i, st, body)
			}
			json.Unmarshal(body, &out[i])
		}()
	}
	go post(t, hs[2].APIAddr(), rq)
	// Kill host 2 once the QPs carry data.
	waitFor(t, 20*time.Second, "host 2 sending", func() bool {
		qs, _ := hs[2].QPs()
		for _, q := range qs {
			if q.Counters["bytes_completed"] > 0 {
				return true
			}
		}
		return false
	})
	killed := time.Now()
	hs[2].Close()
	wg.Wait()
	took := time.Since(killed)
	for i, r := range out {
		if r.Error == "" || r.FailedPeer != 2 || !strings.Contains(r.Error, "host 2") {
			t.Errorf("host %d after host 2 died: %+v", i, r)
		}
	}
	if took > 20*time.Second {
		t.Errorf("the failure took %v, more than the request's timeout", took)
	}
	t.Logf("failure noticed %v after the kill: %q", took, out[0].Error)
}
