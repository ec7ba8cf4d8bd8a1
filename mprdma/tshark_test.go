package mprdma

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// TestWireTshark writes OrderRE's packets into a pcap in fabric frames
// (Ethernet / IPv6 between path addresses / UDP 4791) and checks that
// Wireshark decodes each as an InfiniBand RC packet, the OrderRE bits
// visible where RoCEv2 keeps reserved fields: a data packet flagged FReTx
// with its copy count (a requester's; built here as the requester's wire
// format says), and the responder's own bytes for an ACK registering its
// path, an FNACK and a NAK.
func TestWireTshark(t *testing.T) {
	tshark.Require(t)
	cfg := respConfig(SchemeOrderRE)
	cfg.LFast, cfg.Delta, cfg.OMax = 2, 1, 1
	h := newRespHarness(t, cfg, 0)

	// Host 0 (the requester) and host 5 (the responder, path addresses).
	src, dst := fabric.HostAddr(0, 0, 0), func(path int) [16]byte { return fabric.HostPathAddr(0, 1, 1, path) }
	const ev = 0x5a5ac123 // flow label 0x5a5a, UDP source port 0xc123

	type frame struct {
		b        []byte
		wire     int
		src, dst [16]byte
		ev       uint32
		dscp     uint8
	}
	var frames []frame
	add := func(b []byte, wire int, s, d [16]byte, ev uint32, dscp uint8) {
		frames = append(frames, frame{append([]byte(nil), b...), wire, s, d, ev, dscp})
	}

	// 1. The data packet: an FReTx of PSN 1 asking for 3 copies, sent to
	// path 2's address.
	s, w := h.encode(respData{psn: 1, flags: orderre.FlagFReTx, copies: 3, payload: respPattern(1, 64)})
	add(h.buf[:s], w, src, dst(2), ev, verbs.DSCPRoCE)

	// 2..4. The responder's ACK (register: PSN 0 arrived on path 1, fast;
	// CE-marked, so BECN echoes it),
	// then, with 1 lost, an FNACK for it; then a NAK (beyond the bitmap).
	h.recv(0, respData{psn: 0, path: 1, ev: ev, ce: true})
	for psn := uint32(2); psn <= 4; psn++ {
		h.recv(0, respData{psn: psn, path: 3, ev: ev})
	}
	h.recv(0, respData{psn: 200, path: 3, ev: ev})
	for {
		tx, ok := h.r.nextControl(0, h.ctl)
		if !ok {
			break
		}
		add(h.ctl[:tx.Len], tx.WireLen, dst(int(tx.SrcPath)-1), src, tx.EV, tx.DSCP)
	}
	var ack, fnack, nak int = -1, -1, -1
	for i, f := range frames[1:] {
		switch {
		case orderre.IsFNACK(f.b):
			fnack = i + 1
		case f.b[12] == 0x60:
			nak = i + 1
		case ack < 0 && orderre.Read(f.b).Flags == orderre.FlagRegister:
			ack = i + 1
		}
	}
	if ack < 0 || fnack < 0 || nak < 0 {
		t.Fatalf("the responder did not send an ACK, an FNACK and a NAK: ack %d fnack %d nak %d", ack, fnack, nak)
	}

	file := filepath.Join(t.TempDir(), "orderre.pcap")
	out, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pcap.NewWriter(out, pcap.LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	pool := fabric.NewPool(9216)
	hdr := fabric.EthHeaderLen + fabric.IPv6HeaderLen + fabric.UDPHeaderLen
	for i, f := range frames {
		p := fabric.BuildFrame(pool, fabric.FrameSpec{Src: f.src, Dst: f.dst, Sport: uint16(f.ev), Flow: f.ev >> 16, DSCP: f.dscp, Payload: f.wire, Stored: -1})
		copy(p.Data[hdr:], f.b)
		if err := pw.WritePacket(int64(i)*1000, p.Data, len(p.Data)); err != nil {
			t.Fatal(err)
		}
		p.Release()
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}

	// Wireshark's InfiniBand BTH has byte 4 as "Reserved" (8 bits; RoCEv2
	// puts FECN/BECN in its top bits, OrderRE an FReTx's copy count in its
	// low ones) and byte 8's low 7 bits as "Reserved (7 bits)" (OrderRE's
	// flags).
	fields := []string{"infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.destqp", "infiniband.reserved", "infiniband.bth.reserved7",
		"infiniband.reth.va", "infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.syndrome.opcode",
		"infiniband.aeth.syndrome.error_code", "infiniband.aeth.msn", "udp.srcport", "ipv6.src", "ipv6.dst"}
	rows := tshark.FieldsArgs(t, file, append(append([]string{}, tshark.DecodeRoCEv2...), tshark.IgnoreIPv6ZeroChecksum...), "", fields...)
	verbose := func() string {
		return tshark.VerboseArgs(t, file, append(append([]string{}, tshark.DecodeRoCEv2...), tshark.IgnoreIPv6ZeroChecksum...), "")
	}
	if len(rows) != len(frames) {
		t.Fatalf("%d rows for %d frames\n%s", len(rows), len(frames), verbose())
	}
	col := func(r []string, f string) string {
		for i, name := range fields {
			if name == f {
				return r[i]
			}
		}
		t.Fatalf("no field %s", f)
		return ""
	}
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("field %q: %v", s, err)
		}
		return v
	}
	// Every frame is an InfiniBand RC packet to the right QP.
	for i, r := range rows {
		if col(r, "udp.srcport") != strconv.Itoa(0xc123) || col(r, "infiniband.bth.opcode") == "" {
			t.Fatalf("frame %d not dissected as InfiniBand: %q\n%s", i, r, verbose())
		}
	}
	d := rows[0]
	if num(col(d, "infiniband.bth.opcode")) != uint64(roce.OpWriteOnly) || num(col(d, "infiniband.bth.psn")) != 1 ||
		num(col(d, "infiniband.bth.destqp")) != respLocalQPN || num(col(d, "infiniband.reth.dmalen")) != 64 ||
		num(col(d, "infiniband.reth.va")) != h.vaOf(1) || col(d, "ipv6.dst") != netip.AddrFrom16(dst(2)).String() {
		t.Fatalf("data packet: %q\n%s", d, verbose())
	}
	// The FReTx flag is BTH byte 8 bit 6 (Reserved (7 bits) = 0x40), the
	// copy count byte 4's low bits.
	if num(col(d, "infiniband.bth.reserved7")) != uint64(orderre.FlagFReTx) || col(d, "infiniband.reserved") != "03" {
		t.Fatalf("FReTx and its copies not in the reserved bits: %q\n%s", d, verbose())
	}
	// The ACK: syndrome 0x1F, cumulative PSN 0, MSN = the data PSN 0,
	// register in byte 8 bit 5, BECN in byte 4 bit 6, from path 1's address.
	a := rows[ack]
	if num(col(a, "infiniband.bth.opcode")) != uint64(roce.OpAck) || num(col(a, "infiniband.aeth.syndrome")) != 0x1f ||
		num(col(a, "infiniband.bth.psn")) != 0 || num(col(a, "infiniband.aeth.msn")) != 0 ||
		num(col(a, "infiniband.bth.destqp")) != respPeerQPN || num(col(a, "infiniband.bth.reserved7")) != uint64(orderre.FlagRegister) ||
		col(a, "infiniband.reserved") != "40" || col(a, "ipv6.src") != netip.AddrFrom16(dst(0)).String() {
		t.Fatalf("ACK: %q\n%s", a, verbose())
	}
	// The FNACK: a NAK whose code (16) Wireshark shows as unknown, the lost
	// PSN in the BTH, the cumulative ack in the MSN.
	fn := rows[fnack]
	if num(col(fn, "infiniband.aeth.syndrome")) != uint64(orderre.SyndromeFNACK) || col(fn, "infiniband.aeth.syndrome.opcode") != "3" ||
		col(fn, "infiniband.aeth.syndrome.error_code") != "16" || num(col(fn, "infiniband.bth.psn")) != 1 ||
		num(col(fn, "infiniband.aeth.msn")) != 0 || num(col(fn, "infiniband.bth.reserved7")) != 0 {
		t.Fatalf("FNACK: %q\n%s", fn, verbose())
	}
	// The NAK: PSN sequence error for ePSN 1, MSN = the packet beyond the bitmap.
	nk := rows[nak]
	if num(col(nk, "infiniband.aeth.syndrome")) != 0x60 || col(nk, "infiniband.aeth.syndrome.error_code") != "0" ||
		num(col(nk, "infiniband.bth.psn")) != 1 || num(col(nk, "infiniband.aeth.msn")) != 200 {
		t.Fatalf("NAK: %q\n%s", nk, verbose())
	}
}
