package endpoint

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/sim"
)

// pingOnce pings from host src to host dst's address in plane on a fresh
// network, capturing host src's port in capPlane into w if w is set, and
// returns the RTT the pinger measured.
func pingOnce(t *testing.T, mode fabric.ForwardingMode, seed uint64, src, dst, plane, payload int, capPlane int, w *pcap.Writer) (time.Duration, *testNet) {
	t.Helper()
	n := newTestNet(t, mode, seed)
	if w != nil {
		n.hosts[src].NIC.Capture(capPlane, w)
	}
	var (
		rtt   time.Duration
		calls int
		ok    bool
	)
	err := n.hosts[src].Ping(n.topo.HostAddr(dst, plane), 7, 1, payload, 0, func(d time.Duration, k bool) {
		rtt, ok = d, k
		calls++
	})
	if err != nil {
		t.Fatal(err)
	}
	n.loop.Run()
	if calls != 1 || !ok {
		t.Fatalf("%v ping h%d→h%d plane %d: done called %d times, ok=%v", mode, src, dst, plane, calls, ok)
	}
	return rtt, n
}

func TestPingRTTExact(t *testing.T) {
	for _, mode := range modes() {
		for _, c := range []struct {
			name     string
			src, dst int
			sameT0   bool
		}{
			{"cross-T0", 0, 2, false},
			{"cross-T0-rev", 3, 1, false},
			{"same-T0", 0, 1, true},
		} {
			for _, plane := range []int{0, 3} {
				for _, payload := range []int{0, 56, 1000, 4000} {
					name := fmt.Sprintf("%v/%s/plane%d/payload%d", mode, c.name, plane, payload)
					t.Run(name, func(t *testing.T) {
						rtt, n := pingOnce(t, mode, 1, c.src, c.dst, plane, payload, 0, nil)
						f := echoFrame(payload, mode)
						want := oneWay(f, c.sameT0) + oneWay(f, c.sameT0) // request, then the same-size reply
						if rtt != want {
							t.Fatalf("rtt %v, want %v (frame %d B)", rtt, want, f)
						}
						// It really went through both netstacks and the plane's ports.
						s, d := n.hosts[c.src], n.hosts[c.dst]
						if got := d.Stack.Stats().ICMP.V6.PacketsReceived.EchoRequest.Value(); got != 1 {
							t.Errorf("destination netstack saw %d echo requests", got)
						}
						if got := s.Stack.Stats().ICMP.V6.PacketsReceived.EchoReply.Value(); got != 1 {
							t.Errorf("source netstack saw %d echo replies", got)
						}
						for _, h := range []*Host{s, d} {
							nc := h.NIC.Counters
							if nc.TxPackets != 1 || nc.RxPackets != 1 || nc.ToNetstack != 1 || nc.Malformed != 0 {
								t.Errorf("host %d counters %+v", h.ID, nc)
							}
							if mode == fabric.ForwardUSID && nc.Decap != 1 {
								t.Errorf("host %d: %d decapsulations", h.ID, nc.Decap)
							}
							for pl := 0; pl < n.topo.Planes; pl++ {
								want := uint64(0)
								if pl == plane {
									want = 1
								}
								if got := h.NIC.Port(pl).Counters.TxPackets; got != want {
									t.Errorf("host %d plane %d port sent %d frames, want %d", h.ID, pl, got, want)
								}
							}
						}
						if n.topo.Pool.Live != 0 {
							t.Errorf("%d packets leaked", n.topo.Pool.Live)
						}
					})
				}
			}
		}
	}
}

// TestPingSourceAddressPerPlane checks netstack picks the source address of
// the destination's plane (RFC 6724 longest matching prefix).
func TestPingSourceAddressPerPlane(t *testing.T) {
	for plane := 0; plane < testSpec.Planes; plane++ {
		var buf bytes.Buffer
		w, err := pcap.NewWriter(&buf, pcap.LinkTypeEthernet, 0)
		if err != nil {
			t.Fatal(err)
		}
		pingOnce(t, fabric.ForwardECMP, 1, 0, 2, plane, 8, plane, w)
		w.Flush()
		_, recs, err := pcap.ReadAll(&buf)
		if err != nil || len(recs) != 2 {
			t.Fatalf("plane %d: %d records, %v", plane, len(recs), err)
		}
		src := recs[0].Data[22:38]
		if want := testHostAddr(0, plane); !bytes.Equal(src, want[:]) {
			t.Fatalf("plane %d: request source %x, want %x", plane, src, want)
		}
	}
}

func testHostAddr(h, plane int) [16]byte {
	return fabric.HostAddr(plane, h/testSpec.HostsPerT0, h%testSpec.HostsPerT0)
}

func TestPingTimeout(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	n.topo.HostPorts[2][0].Tx.SetUp(false) // the reply cannot get back
	var got []string
	err := n.hosts[0].Ping(n.topo.HostAddr(2, 0), 1, 1, 8, 5*time.Millisecond, func(d time.Duration, ok bool) {
		got = append(got, fmt.Sprintf("%v %v @%v", d, ok, n.loop.Now()))
	})
	if err != nil {
		t.Fatal(err)
	}
	n.loop.Run()
	if len(got) != 1 || got[0] != "0s false @5ms" {
		t.Fatalf("done calls: %q", got)
	}
}

func TestPingSequence(t *testing.T) {
	// done may ping again; several outstanding seqs on one id.
	n := newTestNet(t, fabric.ForwardUSID, 1)
	h := n.hosts[0]
	dst := n.topo.HostAddr(3, 1)
	var rtts []time.Duration
	var next func(seq uint16)
	next = func(seq uint16) {
		if err := h.Ping(dst, 9, seq, 56, 0, func(d time.Duration, ok bool) {
			if !ok {
				t.Errorf("seq %d lost", seq)
				return
			}
			rtts = append(rtts, d)
			if seq < 5 {
				next(seq + 1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	next(1)
	if err := h.Ping(dst, 9, 100, 56, 0, func(time.Duration, bool) {}); err != nil {
		t.Fatal(err)
	}
	if err := h.Ping(dst, 9, 100, 56, 0, func(time.Duration, bool) {}); err == nil {
		t.Fatal("duplicate outstanding seq accepted")
	}
	n.loop.Run()
	if len(rtts) != 5 {
		t.Fatalf("got %d replies", len(rtts))
	}
	if len(h.pingers) != 1 {
		t.Fatalf("%d ping endpoints for one id", len(h.pingers))
	}
}

// capturePing runs the cross-T0 ping capturing host 0's plane-0 port and
// returns the pcap bytes.
func capturePing(t *testing.T, mode fabric.ForwardingMode, seed uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, pcap.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	pingOnce(t, mode, seed, 0, 2, 0, 56, 0, w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPingPcapTshark(t *testing.T) {
	tshark.Require(t)
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "ping.pcap")
			if err := os.WriteFile(file, capturePing(t, mode, 1), 0o644); err != nil {
				t.Fatal(err)
			}
			rows := tshark.Fields(t, file, "",
				"icmpv6.type", "ipv6.nxt", "icmpv6.checksum.status", "_ws.expert")
			if len(rows) != 2 {
				t.Fatalf("tshark decoded %d frames, want 2:\n%s", len(rows), tshark.Verbose(t, file))
			}
			types := map[string]bool{}
			for _, r := range rows {
				types[r[0]] = true
				if mode == fabric.ForwardUSID && !strings.HasPrefix(r[1], "41,58") {
					t.Errorf("ipv6.nxt %q, want 41 then 58", r[1])
				}
				if mode == fabric.ForwardECMP && r[1] != "58" {
					t.Errorf("ipv6.nxt %q, want 58", r[1])
				}
				if r[2] != "" && r[2] != "1" {
					t.Errorf("icmpv6 checksum status %q", r[2])
				}
				if r[3] != "" {
					t.Errorf("tshark expert info: %q\n%s", r[3], tshark.Verbose(t, file))
				}
			}
			if !types["128"] || !types["129"] {
				t.Fatalf("icmpv6 types %v, want 128 and 129", types)
			}
		})
	}
}

func TestPingDeterministicPcap(t *testing.T) {
	for _, mode := range modes() {
		a := capturePing(t, mode, 42)
		b := capturePing(t, mode, 42)
		if !bytes.Equal(a, b) {
			t.Fatalf("%v: two runs with the same seed differ", mode)
		}
		if len(a) < 24+2*16 {
			t.Fatalf("%v: pcap too short (%d B)", mode, len(a))
		}
	}
}

// TestPingFragmented: an echo larger than the MTU is fragmented by netstack
// (fragment ids from the seeded RNG) and reassembled at the far end.
func TestPingFragmented(t *testing.T) {
	for _, mode := range modes() {
		a := capturePingPayload(t, mode, 5, 9000)
		b := capturePingPayload(t, mode, 5, 9000)
		if !bytes.Equal(a, b) {
			t.Fatalf("%v: fragmented ping not deterministic", mode)
		}
		_, recs, err := pcap.ReadAll(bytes.NewReader(a))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 6 { // 3 fragments each way
			t.Fatalf("%v: %d frames captured, want 6", mode, len(recs))
		}
	}
}

func capturePingPayload(t *testing.T, mode fabric.ForwardingMode, seed uint64, payload int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := pcap.NewWriter(&buf, pcap.LinkTypeEthernet, 0)
	pingOnce(t, mode, seed, 0, 2, 0, payload, 0, w)
	w.Flush()
	return buf.Bytes()
}

func TestHostCloseAndTCP(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := fabric.BuildClos(loop, testSpec, fabric.DefaultOptions(fabric.ForwardECMP))
	if err != nil {
		t.Fatal(err)
	}
	g0 := runtime.NumGoroutine()
	hosts, err := NewHosts(loop, topo, HostOptions{TCP: true})
	if err != nil {
		t.Fatal(err)
	}
	if hosts[0].Stack.TransportProtocolInstance(tcp.ProtocolNumber) == nil {
		t.Fatal("TCP not registered")
	}
	for _, h := range hosts {
		h.Close()
		if h.NIC.IsAttached() {
			t.Fatal("NIC still attached after Close")
		}
	}
	for i := 0; i < 100 && runtime.NumGoroutine() > g0; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Errorf("%d goroutines left after Close (had %d)", g, g0)
	}
	// Frames arriving after Close are dropped, not delivered.
	n := &testNet{loop: loop, topo: topo, hosts: hosts}
	inject(n, 1, 0, validEcho(t, fabric.ForwardECMP), 0, 0)
	if c := hosts[1].NIC.Counters; c.ToNetstack != 0 || c.NoStack != 1 {
		t.Fatalf("counters %+v", c)
	}
}
