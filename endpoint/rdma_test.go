package endpoint

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/sim"
)

type rdmaRx struct {
	plane            int
	src, dst         [16]byte
	sport, dport     uint16
	flow             uint32
	tc               uint8
	udpLen, wireLen  int
	payload          []byte
	at               sim.Time
	elided, hasOuter bool
}

type recEngine struct {
	loop *sim.Loop
	got  []rdmaRx
}

func (e *recEngine) Receive(p *fabric.Packet, plane int) {
	d := p.Data
	r := rdmaRx{plane: plane, at: e.loop.Now(), wireLen: p.WireLen, elided: p.Flags&fabric.FlagElided != 0,
		tc: p.TrafficClass(), flow: p.FlowLabel(), hasOuter: p.NextHeader() != fabric.ProtoUDP}
	copy(r.src[:], p.Src())
	copy(r.dst[:], p.Dst())
	r.sport = binary.BigEndian.Uint16(d[54:])
	r.dport = binary.BigEndian.Uint16(d[56:])
	r.udpLen = int(binary.BigEndian.Uint16(d[58:]))
	r.payload = append([]byte(nil), d[62:]...)
	e.got = append(e.got, r)
	p.Release()
}

func TestRDMAPath(t *testing.T) {
	const payloadLen, stored = 4096 + 12 + 4, 16
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			n := newTestNet(t, mode, 3)
			src, dst := n.hosts[0], n.hosts[3] // different T0s
			eng := &recEngine{loop: n.loop}
			dst.NIC.RDMA = eng
			// Which T1 each packet crossed.
			var t1s []string
			for _, s := range n.topo.Switches {
				if s.Tier == 1 {
					s.Trace = func(sw *fabric.Switch, p *fabric.Packet, out *fabric.Port) { t1s = append(t1s, sw.Name) }
				}
			}
			type want struct {
				ev EV
				tc uint8
			}
			var sent []want
			for plane := 0; plane < 4; plane++ {
				for choice := 0; choice < 2; choice++ {
					ev := MakeEV(plane, choice, uint16(0xbe00+plane*16+choice))
					tc := uint8(fabric.DSCPTrimmable<<2 | fabric.ECNECT0)
					p, pl, err := src.NIC.AllocRDMA(RDMAHeader{DstHost: 3, EV: ev, TrafficClass: tc, PayloadLen: payloadLen, Stored: stored})
					if err != nil {
						t.Fatal(err)
					}
					if len(pl) != stored {
						t.Fatalf("payload slice %d bytes", len(pl))
					}
					for i := range pl {
						pl[i] = byte(ev) + byte(i)
					}
					src.NIC.SendRDMA(p)
					sent = append(sent, want{ev, tc})
					n.loop.Run() // one at a time, so the T1 trace lines up
				}
			}
			if len(eng.got) != len(sent) {
				t.Fatalf("engine got %d packets, want %d (counters %+v)", len(eng.got), len(sent), dst.NIC.Counters)
			}
			for i, w := range sent {
				r := eng.got[i]
				if r.plane != w.ev.Plane() {
					t.Errorf("pkt %d: plane %d, want %d", i, r.plane, w.ev.Plane())
				}
				if r.sport != w.ev.SrcPort() || r.dport != 4791 || r.flow != w.ev.FlowLabel() {
					t.Errorf("pkt %d: ports %d→%d flow %#x, want %d→4791 flow %#x", i, r.sport, r.dport, r.flow, w.ev.SrcPort(), w.ev.FlowLabel())
				}
				if got := EVFromWire(r.sport, r.flow); got != w.ev {
					t.Errorf("pkt %d: EV from wire %#x, want %#x", i, got, w.ev)
				}
				if r.tc != w.tc || r.hasOuter {
					t.Errorf("pkt %d: tc %#x (want %#x), outer header left: %v", i, r.tc, w.tc, r.hasOuter)
				}
				if r.src != n.topo.HostAddr(0, w.ev.Plane()) || r.dst != n.topo.HostAddr(3, w.ev.Plane()) {
					t.Errorf("pkt %d: %s → %s", i, fabric.AddrString(r.src), fabric.AddrString(r.dst))
				}
				if r.udpLen != 8+payloadLen || !r.elided || r.wireLen != 14+40+8+payloadLen+4 {
					t.Errorf("pkt %d: udp len %d, elided %v, wire len %d", i, r.udpLen, r.elided, r.wireLen)
				}
				for j, b := range r.payload {
					if b != byte(w.ev)+byte(j) {
						t.Fatalf("pkt %d: payload byte %d = %d", i, j, b)
					}
				}
				// Wire time: the elided payload counts; uSID frames carry 40 B more.
				frame := 14 + 40 + 8 + payloadLen
				if mode == fabric.ForwardUSID {
					frame += 40
				}
				if i == 0 {
					if want := sim.Time(oneWay(frame, false)); r.at != want {
						t.Errorf("pkt 0 arrived at %v, want %v", r.at, want)
					}
				}
				if mode == fabric.ForwardUSID {
					if wantT1 := fmt.Sprintf("p%d.t1.%d", w.ev.Plane(), w.ev.Choice()); t1s[i] != wantT1 {
						t.Errorf("pkt %d crossed %s, want %s (EV choice)", i, t1s[i], wantT1)
					}
				}
			}
			if c := dst.NIC.Counters; c.ToRDMA != uint64(len(sent)) || c.ToNetstack != 0 || c.Malformed != 0 {
				t.Errorf("dst counters %+v", c)
			}
			if c := src.NIC.Counters; c.RDMASent != uint64(len(sent)) || c.TxPackets != uint64(len(sent)) {
				t.Errorf("src counters %+v", c)
			}
			if n.topo.Pool.Live != 0 {
				t.Errorf("%d packets leaked", n.topo.Pool.Live)
			}
		})
	}
}

func TestRDMANoEngine(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	p, _, err := n.hosts[0].NIC.AllocRDMA(RDMAHeader{DstHost: 1, EV: 2, PayloadLen: 100, Stored: 100})
	if err != nil {
		t.Fatal(err)
	}
	n.hosts[0].NIC.SendRDMA(p)
	n.loop.Run()
	if c := n.hosts[1].NIC.Counters; c.NoRDMA != 1 || c.ToNetstack != 0 {
		t.Fatalf("counters %+v", c)
	}
	if n.topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", n.topo.Pool.Live)
	}
}

func TestRDMAAllocErrors(t *testing.T) {
	n := newTestNet(t, fabric.ForwardECMP, 1)
	nic := n.hosts[0].NIC
	for _, h := range []RDMAHeader{
		{DstHost: -1, PayloadLen: 10},
		{DstHost: 4, PayloadLen: 10},
		{DstHost: 1, PayloadLen: 10, Stored: 11},
		{DstHost: 1, PayloadLen: 70000},
		{DstHost: 1, PayloadLen: 20000, Stored: 20000},
	} {
		if _, _, err := nic.AllocRDMA(h); err == nil {
			t.Errorf("%+v accepted", h)
		}
	}
	if n.topo.Pool.Live != 0 {
		t.Fatalf("%d packets leaked", n.topo.Pool.Live)
	}
}

func TestRDMAAllocSendNoAllocs(t *testing.T) {
	for _, mode := range modes() {
		n := newTestNet(t, mode, 1)
		nic := n.hosts[0].NIC
		n.hosts[2].NIC.RDMA = &discardEngine{}
		h := RDMAHeader{DstHost: 2, EV: MakeEV(1, 1, 7), TrafficClass: fabric.ECNECT0, PayloadLen: 1000, Stored: 16}
		// Warm the pool and the loop's node table.
		for i := 0; i < 64; i++ {
			p, _, _ := nic.AllocRDMA(h)
			nic.SendRDMA(p)
		}
		n.loop.Run()
		allocs := testing.AllocsPerRun(100, func() {
			p, _, err := nic.AllocRDMA(h)
			if err != nil {
				t.Fatal(err)
			}
			nic.SendRDMA(p)
			n.loop.Run()
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per RDMA packet", mode, allocs)
		}
	}
}

type discardEngine struct{ n int }

func (e *discardEngine) Receive(p *fabric.Packet, _ int) { e.n++; p.Release() }

func TestRDMAPcapTshark(t *testing.T) {
	tshark.Require(t)
	for _, mode := range modes() {
		t.Run(mode.String(), func(t *testing.T) {
			loop := sim.NewLoop(sim.Options{Seed: 1})
			topo, err := fabric.BuildClos(loop, testSpec, fabric.DefaultOptions(mode))
			if err != nil {
				t.Fatal(err)
			}
			hosts, err := NewHosts(loop, topo, HostOptions{RDMAChecksum: true})
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "rdma.pcap")
			f, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := pcap.NewWriter(f, pcap.LinkTypeEthernet, 0)
			hosts[0].NIC.Capture(2, w)
			hosts[2].NIC.RDMA = &discardEngine{}
			ev := MakeEV(2, 1, 0x1234)
			p, pl, err := hosts[0].NIC.AllocRDMA(RDMAHeader{DstHost: 2, EV: ev, TrafficClass: fabric.DSCPTrimmable<<2 | fabric.ECNECT0, PayloadLen: 12 + 64 + 4, Stored: 12 + 64 + 4})
			if err != nil {
				t.Fatal(err)
			}
			pl[0] = 0x0a // BTH: RC RDMA WRITE Only
			pl[1] = 0x40 // migreq, pad 0, tver 0
			binary.BigEndian.PutUint16(pl[2:], 0xffff)
			binary.BigEndian.PutUint32(pl[4:], 0x000011) // dest QP
			binary.BigEndian.PutUint32(pl[8:], 1)        // PSN
			hosts[0].NIC.SendRDMA(p)
			loop.Run()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			rows := tshark.FieldsArgs(t, file, append(append([]string{}, tshark.DecodeRoCEv2...), tshark.CheckUDPChecksum...), "udp",
				"udp.srcport", "udp.dstport", "ipv6.flow", "udp.checksum.status", "ipv6.nxt", "ipv6.tclass")
			if len(rows) != 1 {
				t.Fatalf("%d UDP frames:\n%s", len(rows), tshark.Verbose(t, file))
			}
			r := rows[0]
			flows := r[2]
			if mode == fabric.ForwardUSID {
				flows = r[2][len(r[2])/2+1:] // "outer,inner": both carry the EV
			}
			fl, _ := strconv.ParseUint(flows, 0, 32)
			if r[0] != strconv.Itoa(int(ev.SrcPort())) || r[1] != "4791" || uint32(fl) != ev.FlowLabel() || r[3] != "1" {
				t.Fatalf("tshark row %q (EV %#x)\n%s", r, uint32(ev), tshark.Verbose(t, file))
			}
			if mode == fabric.ForwardUSID && r[4] != "41,17" {
				t.Fatalf("ipv6.nxt %q", r[4])
			}
		})
	}
}
