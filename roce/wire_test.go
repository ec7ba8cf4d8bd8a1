package roce

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

var allOps = []uint8{OpWriteFirst, OpWriteMiddle, OpWriteLast, OpWriteLastImm, OpWriteOnly, OpWriteOnlyImm, OpAck, OpCNP}

func sampleHeader(op uint8) Header {
	h := Header{BTH: ib.BTH{Opcode: op, SE: op == OpWriteLastImm, PKey: DefaultPKey, DestQP: 0xabcdef, AckReq: op == OpWriteLast, PSN: 0x123456}, RETH: RETH{VA: 0x0102030405060708, RKey: 0x11223344, DMALen: 0x8000}, Imm: 0xdeadbeef, AETH: AETH{Syndrome: SyndromeNAK | NakPSNSeqError, MSN: 0x654321}}
	if op == OpCNP {
		h.BECN = true
	}
	return h
}

func TestCodecRoundTrip(t *testing.T) {
	buf := make([]byte, verbs.MaxTxBytes)
	for _, irn := range []bool{false, true} {
		for _, op := range allOps {
			sizes := []int{0}
			if IsWrite(op) {
				sizes = []int{0, 1, 2, 3, 4, 5, 1023, 4096}
			}
			for _, n := range sizes {
				for _, elide := range []bool{false, true} {
					h := sampleHeader(op)
					var payload []byte
					if !elide {
						payload = make([]byte, n)
						fill(payload, byte(n))
					}
					stored, wire, err := Encode(buf, &h, irn, payload, n)
					if err != nil {
						t.Fatalf("op %#x n %d: %v", op, n, err)
					}
					hl := HeaderLen(op, irn)
					pad := padOf(n)
					if wire != hl+n+pad+ICRCLen {
						t.Fatalf("op %#x n %d: wire %d", op, n, wire)
					}
					if want := wire; (elide && n > 0 && stored != hl) || (!(elide && n > 0) && stored != want) {
						t.Fatalf("op %#x n %d elide %v: stored %d", op, n, elide, stored)
					}
					p, err := Decode(buf[:stored], wire, irn)
					if err != nil {
						t.Fatalf("op %#x n %d: decode %v", op, n, err)
					}
					if p.PayloadLen != n || p.HdrLen != hl || int(p.PadCnt) != pad {
						t.Fatalf("op %#x n %d: decoded len %d hdr %d pad %d", op, n, p.PayloadLen, p.HdrLen, p.PadCnt)
					}
					want := h
					reth, imm, aeth, _, _ := layout(op, irn)
					want.HasRETH, want.HasImm, want.HasAETH = reth, imm, aeth
					want.PadCnt = uint8(pad)
					if !reth {
						want.RETH = RETH{}
					}
					if !imm {
						want.Imm = 0
					}
					if !aeth {
						want.AETH = AETH{}
					}
					if p.Header != want {
						t.Fatalf("op %#x: header\n got %+v\nwant %+v", op, p.Header, want)
					}
					if !elide && !bytes.Equal(p.Payload, payload) {
						t.Fatalf("op %#x n %d: payload differs", op, n)
					}
					if elide && n > 0 && (!p.Elided() || len(p.Payload) != 0) {
						t.Fatalf("op %#x n %d: elided payload %d bytes", op, n, len(p.Payload))
					}
				}
			}
		}
	}
}

// TestCodecLayout checks the bytes against the RoCEv2 field positions.
func TestCodecLayout(t *testing.T) {
	buf := make([]byte, 64)
	h := sampleHeader(OpWriteOnlyImm)
	h.AckReq, h.SE = true, true
	n, wire, err := Encode(buf, &h, false, []byte{1, 2, 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	b := buf[:n]
	if n != wire || n != 12+16+4+3+1+4 {
		t.Fatalf("len %d wire %d", n, wire)
	}
	if b[0] != 0x0B || b[1] != 0x80|1<<4 || binary.BigEndian.Uint16(b[2:]) != 0xFFFF || b[4] != 0 {
		t.Fatalf("BTH bytes 0..4: % x", b[:5])
	}
	if q, ok := verbs.DestQP(b); !ok || q != 0xabcdef {
		t.Fatalf("DestQP %#x", q)
	}
	if b[8] != 0x80 || b[9] != 0x12 || b[10] != 0x34 || b[11] != 0x56 {
		t.Fatalf("BTH bytes 8..11: % x", b[8:12])
	}
	if binary.BigEndian.Uint64(b[12:]) != 0x0102030405060708 || binary.BigEndian.Uint32(b[20:]) != 0x11223344 || binary.BigEndian.Uint32(b[24:]) != 0x8000 {
		t.Fatalf("RETH % x", b[12:28])
	}
	if binary.BigEndian.Uint32(b[28:]) != 0xdeadbeef {
		t.Fatalf("ImmDt % x", b[28:32])
	}
	if !bytes.Equal(b[32:], []byte{1, 2, 3, 0, 0, 0, 0, 0}) {
		t.Fatalf("payload, pad, ICRC % x", b[32:])
	}
	// ACK: BTH + AETH + ICRC = 20 bytes.
	h = Header{BTH: ib.BTH{Opcode: OpAck, PKey: DefaultPKey, DestQP: 7, PSN: 9}, AETH: AETH{Syndrome: SyndromeACK | CreditsInvalid, MSN: 5}}
	n, _, _ = Encode(buf, &h, false, nil, 0)
	if n != 20 || buf[12] != 0x1F || buf[13] != 0 || buf[14] != 0 || buf[15] != 5 {
		t.Fatalf("ACK % x", buf[:n])
	}
	// CNP: BTH (BECN) + 16 reserved + ICRC = 32 bytes.
	h = Header{BTH: ib.BTH{Opcode: OpCNP, PKey: DefaultPKey, DestQP: 7, BECN: true}}
	n, _, _ = Encode(buf, &h, false, nil, 0)
	if n != 32 || buf[0] != 0x81 || buf[4] != 0x40 || !bytes.Equal(buf[12:32], make([]byte, 20)) {
		t.Fatalf("CNP % x", buf[:n])
	}
}

// TestCodecIgnoresReservedBTHBits: a receiver ignores Resv6a and Resv7
// (IBA: "ignored on receipt"), and a sender writes them 0.
func TestCodecIgnoresReservedBTHBits(t *testing.T) {
	buf := make([]byte, 64)
	h := sampleHeader(OpAck)
	n, wire, err := Encode(buf, &h, false, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Decode(buf[:n], wire, false)
	if err != nil {
		t.Fatal(err)
	}
	if buf[4]&0x3F != 0 || buf[8]&0x7F != 0 {
		t.Fatalf("reserved bits sent: % x", buf[:12])
	}
	buf[4] |= 0x3F
	buf[8] |= 0x7F
	got, err := Decode(buf[:n], wire, false)
	if err != nil || got.Header != want.Header {
		t.Fatalf("with reserved bits set: %v\n got %+v\nwant %+v", err, got.Header, want.Header)
	}
}

func TestCodecMalformed(t *testing.T) {
	buf := make([]byte, 128)
	good := func(op uint8, n int) []byte {
		h := sampleHeader(op)
		var pl []byte
		if n > 0 {
			pl = make([]byte, n)
		}
		s, _, err := Encode(buf, &h, false, pl, n)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf[:s]...)
	}
	ack := good(OpAck, 0)
	only := good(OpWriteOnly, 5)
	mod := func(b []byte, f func([]byte)) []byte { c := append([]byte(nil), b...); f(c); return c }
	cases := []struct {
		name string
		b    []byte
		wire int
		err  error
	}{
		{"empty", nil, 0, ErrShort},
		{"short BTH", ack[:11], 11, ErrShort},
		{"short AETH", ack[:14], 20, ErrShort},
		{"short RETH", only[:20], len(only), ErrShort},
		{"opcode", mod(ack, func(b []byte) { b[0] = 0x04 }), 20, ErrOpcode},
		{"opcode RC read", mod(ack, func(b []byte) { b[0] = 0x0C }), 20, ErrOpcode},
		{"tver", mod(ack, func(b []byte) { b[1] |= 1 }), 20, ErrTVer},
		{"pad on ack", mod(ack, func(b []byte) { b[1] |= 0x10 }), 20, ErrLength},
		{"ack payload", append(append([]byte(nil), ack...), 0, 0, 0, 0), 24, ErrLength},
		{"no ICRC", ack[:16], 16, ErrLength},
		{"wire below stored", only, len(only) - 1, ErrLength},
		{"syndrome reserved", mod(ack, func(b []byte) { b[12] = 0x40 }), 20, ErrSyndrome},
		{"syndrome bit 7", mod(ack, func(b []byte) { b[12] = 0x80 }), 20, ErrSyndrome},
		{"pad without payload", mod(good(OpWriteOnly, 0), func(b []byte) { b[1] |= 0x30 }), 32, ErrLength},
		{"wire misaligned", only[:len(only)-1], len(only) - 1, ErrPad},
	}
	for _, c := range cases {
		_, err := Decode(c.b, c.wire, false)
		if err != c.err {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		}
	}
	h := sampleHeader(OpAck)
	if _, _, err := Encode(buf, &h, false, nil, 4); err != ErrLength {
		t.Errorf("ACK with payload: %v", err)
	}
	h = sampleHeader(0x0C)
	if _, _, err := Encode(buf, &h, false, nil, 0); err != ErrOpcode {
		t.Errorf("unsupported opcode: %v", err)
	}
	h = sampleHeader(OpWriteOnly)
	if _, _, err := Encode(buf[:40], &h, false, make([]byte, 100), 100); err != ErrBuf {
		t.Errorf("small buffer: %v", err)
	}
	if _, _, err := Encode(buf, &h, false, make([]byte, 3), 4); err != ErrPayload {
		t.Errorf("payload length: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	buf := make([]byte, 256)
	for _, op := range allOps {
		h := sampleHeader(op)
		n := 0
		if IsWrite(op) {
			n = 7
		}
		s, w, _ := Encode(buf, &h, false, make([]byte, n), n)
		f.Add(append([]byte(nil), buf[:s]...), w, false)
		s, w, _ = Encode(buf, &h, true, nil, n)
		f.Add(append([]byte(nil), buf[:s]...), w, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, wire int, irn bool) {
		p, err := Decode(b, wire, irn)
		if err != nil {
			return
		}
		// Re-encoding the decoded packet and decoding again is stable.
		var payload []byte
		if !p.Elided() {
			payload = p.Payload
		}
		out := make([]byte, p.HdrLen+p.PayloadLen+8)
		s, w, err := Encode(out, &p.Header, irn, payload, p.PayloadLen)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if w != wire {
			t.Fatalf("wire %d, was %d", w, wire)
		}
		q, err := Decode(out[:s], w, irn)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if q.Header != p.Header || q.PayloadLen != p.PayloadLen || !bytes.Equal(q.Payload, payload) {
			t.Fatalf("round trip\n got %+v\nwant %+v", q, p)
		}
	})
}

func FuzzDecodeEncode(f *testing.F) {
	f.Add(uint8(0), uint32(1), uint32(2), uint64(3), uint32(4), uint32(5), uint32(6), uint8(0), uint32(7), 100, true, false)
	f.Fuzz(func(t *testing.T, opi uint8, qpn, psn uint32, va uint64, rkey, dmalen, imm uint32, syn uint8, msn uint32, n int, stored, irn bool) {
		op := allOps[int(opi)%len(allOps)]
		if !IsWrite(op) {
			n = 0
		}
		if n < 0 || n > 4096 {
			n = 4096
		}
		syn &^= 0x80
		if syn&0x60 == 0x40 {
			syn &^= 0x40
		}
		h := Header{BTH: ib.BTH{Opcode: op, PKey: DefaultPKey, DestQP: qpn & PSNMask, PSN: psn & PSNMask, AckReq: n&1 == 1}, RETH: RETH{VA: va, RKey: rkey, DMALen: dmalen}, Imm: imm, AETH: AETH{Syndrome: syn, MSN: msn & PSNMask}}
		var payload []byte
		if stored {
			payload = make([]byte, n)
			fill(payload, byte(n))
		}
		buf := make([]byte, verbs.MaxTxBytes)
		s, w, err := Encode(buf, &h, irn, payload, n)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Decode(buf[:s], w, irn)
		if err != nil {
			t.Fatal(err)
		}
		if p.Opcode != op || p.DestQP != h.DestQP || p.PSN != h.PSN || p.AckReq != h.AckReq || p.PayloadLen != n {
			t.Fatalf("BTH %+v", p.Header)
		}
		if p.HasRETH && p.RETH != h.RETH || p.HasImm && p.Imm != imm || p.HasAETH && p.AETH != h.AETH {
			t.Fatalf("ext %+v", p.Header)
		}
		if stored && !bytes.Equal(p.Payload, payload) {
			t.Fatal("payload")
		}
	})
}

// FuzzDecodeReceive feeds arbitrary packets to connected QPs of both
// reliability modes: they must never panic.
func FuzzDecodeReceive(f *testing.F) {
	buf := make([]byte, 256)
	for _, op := range allOps {
		h := sampleHeader(op)
		h.DestQP = qpnB
		s, w, _ := Encode(buf, &h, false, make([]byte, 16), 16*b2i(IsWrite(op)))
		f.Add(append([]byte(nil), buf[:s]...), w, false, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, wire int, irn, ce bool) {
		c := DefaultConfig()
		if irn {
			c.Reliability = IRN
		}
		p := newPair(t, c)
		p.mb.Register(make([]byte, 1<<16))
		p.ma.Register(make([]byte, 1<<16))
		_ = p.a.Post(0, verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: 1, LocalVA: 0x10000, Length: 3 << 12, RemoteKey: 1, RemoteVA: 0x10000})
		p.drain(p.a)
		for _, q := range []*QP{p.a, p.b} {
			if len(b) >= 8 {
				b[5], b[6], b[7] = byte(q.qpn>>16), byte(q.qpn>>8), byte(q.qpn)
			}
			q.Receive(p.now, &verbs.Rx{Data: b, WireLen: wire, CE: ce})
			p.drain(q)
			q.Tick(1 << 40)
			p.drain(q)
			q.PollCompletions(nil)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// BenchmarkWire: Encode and Decode of the per-packet headers alone (a
// WRITE Middle with elided payload under IRN, and an ACK).
func BenchmarkWire(b *testing.B) {
	buf := make([]byte, 64)
	data, ack := sampleHeader(OpWriteMiddle), sampleHeader(OpAck)
	var p Packet
	b.ReportAllocs()
	for range b.N {
		s, w, _ := Encode(buf, &data, true, nil, 4096)
		if p.Decode(buf[:s], w, true) != nil {
			b.Fatal("data")
		}
		s, w, _ = Encode(buf, &ack, true, nil, 0)
		if p.Decode(buf[:s], w, true) != nil {
			b.Fatal("ack")
		}
	}
}
