package endpoint

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
)

// validEcho returns a well-formed ICMPv6 echo request frame from host 0 to
// host 1 (plane 0), as host 0's NIC would send it in mode.
func validEcho(t testing.TB, mode fabric.ForwardingMode) []byte {
	t.Helper()
	n := newTestNet(t, mode, 1)
	var buf bytes.Buffer
	w, _ := pcap.NewWriter(&buf, pcap.LinkTypeEthernet, 0)
	n.hosts[0].NIC.Capture(0, w)
	if err := n.hosts[0].Ping(n.topo.HostAddr(1, 0), 1, 1, 24, 0, func(time.Duration, bool) {}); err != nil {
		t.Fatal(err)
	}
	n.loop.Run()
	w.Flush()
	_, recs, err := pcap.ReadAll(&buf)
	if err != nil || len(recs) == 0 {
		t.Fatalf("no capture: %v", err)
	}
	return append([]byte(nil), recs[0].Data...)
}

// validRDMA returns a RoCEv2 frame from host 0 to host 1 (plane 0).
func validRDMA(t testing.TB, mode fabric.ForwardingMode, tc uint8) []byte {
	t.Helper()
	n := newTestNet(t, mode, 1)
	p, pl, err := n.hosts[0].NIC.AllocRDMA(RDMAHeader{DstHost: 1, EV: MakeEV(0, 0, 5), TrafficClass: tc, PayloadLen: 32, Stored: 32})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pl {
		pl[i] = byte(i)
	}
	b := append([]byte(nil), p.Data...)
	p.Release()
	return b
}

// inject hands frame b to host h's NIC as if it arrived on plane's port.
func inject(n *testNet, h, plane int, b []byte, flags uint8, wireLen int) {
	p := n.topo.Pool.Get(len(b))
	copy(p.Data, b)
	p.Flags = flags
	if wireLen > 0 {
		p.WireLen = wireLen
	}
	n.hosts[h].NIC.Ingress(p, n.topo.HostPorts[h][plane])
}

func TestIngressMalformed(t *testing.T) {
	for _, mode := range modes() {
		echo := validEcho(t, mode)
		rdma := validRDMA(t, mode, 0)
		mut := func(b []byte, f func(b []byte) []byte) []byte { return f(append([]byte(nil), b...)) }
		cases := map[string][]byte{
			"empty":           {},
			"eth only":        echo[:14],
			"truncated ipv6":  echo[:14+39],
			"not ipv6":        mut(echo, func(b []byte) []byte { b[12], b[13] = 0x08, 0x00; return b }),
			"wrong version":   mut(echo, func(b []byte) []byte { b[14] = 0x45; return b }),
			"lying length":    mut(echo, func(b []byte) []byte { binary.BigEndian.PutUint16(b[18:], uint16(len(b))); return b }),
			"truncated frame": echo[:len(echo)-1],
			"rdma short udp":  mut(rdma, func(b []byte) []byte { return b[:len(rdma)-32-5] }),
			"garbage":         bytes.Repeat([]byte{0xa5}, 200),
		}
		if mode == fabric.ForwardUSID {
			cases["truncated outer"] = echo[:14+40+20]
			cases["outer lies"] = mut(echo, func(b []byte) []byte { binary.BigEndian.PutUint16(b[18:], 40+uint16(len(b))); return b })
			cases["inner lies"] = mut(echo, func(b []byte) []byte { binary.BigEndian.PutUint16(b[58:], 1+binary.BigEndian.Uint16(b[58:])); return b })
			cases["inner version"] = mut(echo, func(b []byte) []byte { b[54] = 0x45; return b })
			cases["outer too short for inner"] = mut(echo, func(b []byte) []byte { binary.BigEndian.PutUint16(b[18:], 20); return b[:14+40+20] })
		}
		for name, b := range cases {
			n := newTestNet(t, mode, 1)
			n.hosts[1].NIC.RDMA = &discardEngine{}
			inject(n, 1, 0, b, 0, 0)
			n.loop.Run()
			c := n.hosts[1].NIC.Counters
			if c.Malformed != 1 || c.ToNetstack != 0 || c.ToRDMA != 0 {
				t.Errorf("%v %s: counters %+v", mode, name, c)
			}
			if n.topo.Pool.Live != 0 {
				t.Errorf("%v %s: %d packets leaked", mode, name, n.topo.Pool.Live)
			}
		}
		// The unmodified frames are accepted, also with trailing bytes.
		for name, b := range map[string][]byte{"echo": echo, "echo+pad": append(append([]byte(nil), echo...), 0, 0, 0), "rdma": rdma} {
			n := newTestNet(t, mode, 1)
			n.hosts[1].NIC.RDMA = &discardEngine{}
			inject(n, 1, 0, b, 0, 0)
			n.loop.Run()
			c := n.hosts[1].NIC.Counters
			if c.Malformed != 0 || c.ToNetstack+c.ToRDMA != 1 {
				t.Errorf("%v valid %s: counters %+v", mode, name, c)
			}
			if name != "rdma" && n.hosts[1].Stack.Stats().ICMP.V6.PacketsReceived.EchoRequest.Value() != 1 {
				t.Errorf("%v valid %s: not answered by netstack", mode, name)
			}
		}
	}
}

// TestIngressElidedToNetstack: a frame whose payload is elided cannot go
// up into netstack.
func TestIngressElidedToNetstack(t *testing.T) {
	echo := validEcho(t, fabric.ForwardECMP)
	n := newTestNet(t, fabric.ForwardECMP, 1)
	b := append([]byte(nil), echo[:len(echo)-10]...)
	inject(n, 1, 0, b, fabric.FlagElided, len(echo)+4)
	if c := n.hosts[1].NIC.Counters; c.Malformed != 1 || c.ToNetstack != 0 {
		t.Fatalf("counters %+v", c)
	}
}

func TestDecapECN(t *testing.T) {
	const (
		notECT = fabric.ECNNotECT
		ect1   = fabric.ECNECT1
		ect0   = fabric.ECNECT0
		ce     = fabric.ECNCE
		drop   = 0xff
	)
	// RFC 6040 section 4.2, Figure 4: rows inner, columns outer
	// (Not-ECT, ECT(0), ECT(1), CE).
	table := map[uint8][4]uint8{
		notECT: {notECT, notECT, notECT, drop},
		ect0:   {ect0, ect0, ect1, ce},
		ect1:   {ect1, ect1, ect1, ce},
		ce:     {ce, ce, ce, ce},
	}
	outers := [4]uint8{notECT, ect0, ect1, ce}
	for inner, row := range table {
		for i, outer := range outers {
			want := row[i]
			b := validRDMA(t, fabric.ForwardUSID, uint8(fabric.DSCPTrimmable<<2)|inner)
			// Set the outer ECN (bits 20..21 of the first word at 14).
			v := binary.BigEndian.Uint32(b[14:])
			v = v&^(3<<20) | uint32(outer)<<20
			binary.BigEndian.PutUint32(b[14:], v)
			n := newTestNet(t, fabric.ForwardUSID, 1)
			eng := &recEngine{loop: n.loop}
			n.hosts[1].NIC.RDMA = eng
			inject(n, 1, 0, b, 0, 0)
			c := n.hosts[1].NIC.Counters
			if want == drop {
				if c.ECNDrop != 1 || len(eng.got) != 0 {
					t.Errorf("inner %d outer %d: not dropped (%+v)", inner, outer, c)
				}
				continue
			}
			if len(eng.got) != 1 {
				t.Fatalf("inner %d outer %d: not delivered (%+v)", inner, outer, c)
			}
			if got := eng.got[0].tc; got != uint8(fabric.DSCPTrimmable<<2)|want {
				t.Errorf("inner %d outer %d: inner tc %#x, want ECN %d", inner, outer, got, want)
			}
			if n.topo.Pool.Live != 0 {
				t.Errorf("leak")
			}
		}
	}
}

// FuzzNICIngress feeds arbitrary bytes as a received frame: the NIC (and
// netstack behind it) must count and drop what does not parse, never panic,
// and never leak a packet.
func FuzzNICIngress(f *testing.F) {
	for _, mode := range modes() {
		f.Add(validEcho(f, mode), uint8(0), uint16(0), mode == fabric.ForwardUSID)
		f.Add(validRDMA(f, mode, 2), uint8(0), uint16(0), mode == fabric.ForwardUSID)
		f.Add(validRDMA(f, mode, 3), uint8(fabric.FlagElided), uint16(5000), mode == fabric.ForwardUSID)
	}
	f.Add([]byte{}, uint8(0), uint16(0), false)
	f.Add(bytes.Repeat([]byte{0x86, 0xdd, 0x60, 0x29}, 40), uint8(1), uint16(0), true)
	nets := map[bool]*testNet{}
	f.Fuzz(func(t *testing.T, b []byte, flags uint8, wire uint16, usid bool) {
		n := nets[usid]
		if n == nil {
			mode := fabric.ForwardECMP
			if usid {
				mode = fabric.ForwardUSID
			}
			n = newTestNet(t, mode, 1)
			n.hosts[1].NIC.RDMA = &discardEngine{}
			nets[usid] = n
		}
		if len(b) > n.topo.Pool.LargeCap {
			b = b[:n.topo.Pool.LargeCap]
		}
		for variant := 0; variant < 2; variant++ {
			if variant == 1 {
				// Steer the input past the first checks.
				if len(b) < 15 {
					return
				}
				b = append([]byte(nil), b...)
				b[12], b[13] = 0x86, 0xdd
				b[14] = 0x60 | b[14]&0x0f
			}
			before := n.topo.Pool.Live
			inject(n, 1, int(flags>>4)%n.topo.Planes, b, flags&fabric.FlagElided, int(wire))
			n.loop.Run()
			if n.topo.Pool.Live != before {
				t.Fatalf("pool live %d → %d", before, n.topo.Pool.Live)
			}
		}
	})
}

// TestNetstackUDP sends a UDP datagram between two netstack sockets across
// the fabric: it arrives, and tshark finds its checksum valid.
func TestNetstackUDP(t *testing.T) {
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			n := newTestNet(t, mode, 1)
			var capBuf bytes.Buffer
			w, _ := pcap.NewWriter(&capBuf, pcap.LinkTypeEthernet, 0)
			n.hosts[0].NIC.Capture(1, w)
			var wqA, wqB waiter.Queue
			a, err := n.hosts[0].Stack.NewEndpoint(udp.ProtocolNumber, ipv6.ProtocolNumber, &wqA)
			if err != nil {
				t.Fatal(err)
			}
			b, err := n.hosts[3].Stack.NewEndpoint(udp.ProtocolNumber, ipv6.ProtocolNumber, &wqB)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Bind(tcpip.FullAddress{Port: 9000}); err != nil {
				t.Fatal(err)
			}
			msg := []byte("hello across the fabric")
			to := tcpip.FullAddress{Addr: tcpip.AddrFrom16(n.topo.HostAddr(3, 1)), Port: 9000}
			if _, err := a.Write(bytes.NewReader(msg), tcpip.WriteOptions{To: &to}); err != nil {
				t.Fatal(err)
			}
			n.loop.Run()
			var got bytes.Buffer
			res, rerr := b.Read(&got, tcpip.ReadOptions{NeedRemoteAddr: true})
			if rerr != nil || got.String() != string(msg) {
				t.Fatalf("read %q, %v", got.String(), rerr)
			}
			if res.RemoteAddr.Addr != tcpip.AddrFrom16(n.topo.HostAddr(0, 1)) {
				t.Fatalf("from %v", res.RemoteAddr.Addr)
			}
			w.Flush()
			if _, ok := tshark.Path(); !ok {
				return
			}
			file := filepath.Join(t.TempDir(), "udp.pcap")
			os.WriteFile(file, capBuf.Bytes(), 0o644)
			rows := tshark.FieldsArgs(t, file, tshark.CheckUDPChecksum, "udp", "udp.dstport", "udp.checksum.status")
			if len(rows) != 1 || rows[0][0] != "9000" || rows[0][1] != "1" {
				t.Fatalf("tshark: %q", rows)
			}
		})
	}
}
