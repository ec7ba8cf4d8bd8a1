package mrc

import (
	"bytes"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

func sampleBTH(op uint8) BTH {
	return BTH{Opcode: op, PKey: DefaultPKey, DestQP: 0xabcdef, AckReq: true, Rtx: true, TS: true, PSN: 0x123456}
}

func sampleData(op uint8, ts bool) DataHeader {
	h := DataHeader{
		BTH:   sampleBTH(op),
		METH:  METH{RQMSN: 0x1234, MSN: 0xfedc},
		TSETH: TSETH{TS: 0xbeef, Coarse: true},
		RETH:  RETH{VA: 0x1122334455667788, RKey: 0x99aabbcc, DMALen: 1 << 31},
	}
	h.BTH.TS = ts
	if !ts {
		h.TSETH = TSETH{}
	}
	if HasImm(op) {
		h.Imm = 0xdeadbeef
	}
	return h
}

// validPackets returns one encoded packet of every kind (the fuzz seeds).
func validPackets(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	buf := make([]byte, verbs.MaxTxBytes)
	for op := OpWriteFirst; op <= OpWriteOnlyImm; op++ {
		for _, ts := range []bool{false, true} {
			h := sampleData(op, ts)
			n, err := h.Encode(buf)
			if err != nil {
				t.Fatal(err)
			}
			name := "data" + string(rune('0'+op-OpWriteFirst))
			if ts {
				name += "ts"
			}
			out[name] = append([]byte(nil), buf[:n]...)
		}
	}
	n, _ := EncodeAck(buf, sampleBTH(0), AETH{Syndrome: AckSyndrome, MSN: 0x654321})
	out["ack"] = append([]byte(nil), buf[:n]...)
	s := SETH{M: PathSkipOnce, ProbeResp: true, RtxEcho: true, AckOffset: -7, EV: 0x12345678, CackPSN: 0xfffffe,
		MPR: 4, SackOffset: 17, Bitmap: 0x8000_0000_0000_0001}
	c := CCState{TSEcho: 0x4242, RestoreCwnd: true, OOOCount: 0x7fff, RcvCwndPen: 127, RcvdBytes: 0xabcdef}
	n, _ = EncodeSACK(buf, sampleBTH(0), &s, &c)
	out["sack"] = append([]byte(nil), buf[:n]...)
	n, _ = EncodeNACK(buf, sampleBTH(0), &NETH{Code: NackTrimmed, RtxEcho: true, TSEcho: 7, EV: 0xcafe0003, PSN: 42})
	out["nack"] = append([]byte(nil), buf[:n]...)
	n, _ = EncodeProbe(buf, sampleBTH(0), PETH{EV: 0x1003, Seq: 9, TS: 11})
	out["probe"] = append([]byte(nil), buf[:n]...)
	n, _ = EncodePortStatus(buf, 77, 0b1011)
	out["portstatus"] = append([]byte(nil), buf[:n]...)
	n, _ = EncodeEndpoint(buf, BTH{PKey: DefaultPKey}, true, EndpointHeader{Op: EndpointEVProbe, ReqID: 5, Status: 1})
	out["eresp"] = append([]byte(nil), buf[:n]...)
	return out
}

func TestBTHRoundTrip(t *testing.T) {
	for _, h := range []BTH{
		sampleBTH(OpSACK),
		{Opcode: OpWriteOnly, SE: true, MigReq: true, PadCnt: 3, PKey: 1, DestQP: 1, PSN: psnMask},
		{},
	} {
		var b [BTHLen]byte
		if err := h.Put(b[:]); err != nil {
			t.Fatal(err)
		}
		g, err := DecodeBTH(b[:])
		if err != nil || g != h {
			t.Fatalf("BTH round trip: %+v → %+v (%v)", h, g, err)
		}
		if qp, ok := verbs.DestQP(b[:]); !ok || qp != h.DestQP {
			t.Fatalf("verbs.DestQP = %#x, want %#x", qp, h.DestQP)
		}
	}
	if _, err := DecodeBTH(make([]byte, 11)); err != ErrShort {
		t.Fatalf("short BTH: %v", err)
	}
	b := make([]byte, 12)
	// TVer, FECN, BECN, Resv6a and the low five bits of Resv7: MRC sends
	// them 0 and rejects anything else.
	for _, c := range []struct{ off, val int }{{1, 1}, {1, 8}, {4, 0x80}, {4, 0x40}, {4, 1}, {8, 0x10}, {8, 1}} {
		clear(b)
		b[c.off] = byte(c.val)
		if _, err := DecodeBTH(b); err != ErrReserved {
			t.Errorf("reserved bit at byte %d: %v", c.off, err)
		}
	}
}

func TestDataRoundTrip(t *testing.T) {
	buf := make([]byte, 128)
	for op := OpWriteFirst; op <= OpWriteOnlyImm; op++ {
		for _, ts := range []bool{false, true} {
			h := sampleData(op, ts)
			n, err := h.Encode(buf)
			if err != nil || n != h.Len() {
				t.Fatalf("encode %#x: %d %v", op, n, err)
			}
			want := BTHLen + METHLen + RETHLen
			if ts {
				want += TSETHLen
			}
			if HasImm(op) {
				want += ImmLen
			}
			if n != want {
				t.Fatalf("op %#x ts %v: len %d want %d", op, ts, n, want)
			}
			var g DataHeader
			m, err := DecodeData(buf[:n], &g)
			if err != nil || m != n || g != h {
				t.Fatalf("round trip %#x: %+v\n→ %+v (%v)", op, h, g, err)
			}
			for k := 0; k < n; k++ {
				if _, err := DecodeData(buf[:k], &g); err == nil {
					t.Fatalf("op %#x truncated to %d accepted", op, k)
				}
			}
		}
	}
	// Byte offsets documented in doc.go.
	h := sampleData(OpWriteOnlyImm, true)
	h.Encode(buf)
	if buf[12] != 0x12 || buf[16] != 0xbe || buf[20] != 0x11 || buf[28] != 0x99 || buf[36] != 0xde {
		t.Fatalf("layout: % x", buf[:40])
	}
	var g DataHeader
	h = sampleData(OpWriteFirst, true)
	n, _ := h.Encode(buf)
	buf[BTHLen+METHLen+3] = 1
	if _, err := DecodeData(buf[:n], &g); err != ErrReserved {
		t.Fatalf("TSETH reserved: %v", err)
	}
	h.BTH.Opcode = OpSACK
	if _, err := h.Encode(buf); err != ErrOpcode {
		t.Fatalf("encode non-data opcode: %v", err)
	}
}

func TestControlRoundTrip(t *testing.T) {
	p := validPackets(t)
	if len(p["ack"]) != AckLen || len(p["sack"]) != SACKLen || len(p["nack"]) != NACKLen ||
		len(p["probe"]) != ProbeLen || len(p["portstatus"]) != EndpointLen {
		t.Fatal("control packet lengths")
	}
	bth, a, err := DecodeAck(p["ack"])
	if err != nil || bth.Opcode != OpAck || a.Syndrome != AckSyndrome || a.MSN != 0x654321 || bth.PSN != 0x123456 {
		t.Fatalf("ack: %+v %+v %v", bth, a, err)
	}
	_, s, c, err := DecodeSACK(p["sack"])
	ws := SETH{M: PathSkipOnce, ProbeResp: true, RtxEcho: true, AckOffset: -7, EV: 0x12345678, CackPSN: 0xfffffe,
		MPR: 4, SackOffset: 17, Bitmap: 0x8000_0000_0000_0001}
	wc := CCState{TSEcho: 0x4242, RestoreCwnd: true, OOOCount: 0x7fff, RcvCwndPen: 127, RcvdBytes: 0xabcdef}
	if err != nil || s != ws || c != wc {
		t.Fatalf("sack: %+v %+v %v", s, c, err)
	}
	_, n, err := DecodeNACK(p["nack"])
	if err != nil || n != (NETH{Code: NackTrimmed, RtxEcho: true, TSEcho: 7, EV: 0xcafe0003, PSN: 42}) {
		t.Fatalf("nack: %+v %v", n, err)
	}
	_, pr, err := DecodeProbe(p["probe"])
	if err != nil || pr != (PETH{EV: 0x1003, Seq: 9, TS: 11}) {
		t.Fatalf("probe: %+v %v", pr, err)
	}
	bth, resp, e, err := DecodeEndpoint(p["portstatus"])
	if err != nil || resp || bth.DestQP != verbs.EndpointQPN || e != (EndpointHeader{Op: EndpointPortStatus, ReqID: 77, PortStatusMask: 0b1011}) {
		t.Fatalf("port status: %+v %v %+v %v", bth, resp, e, err)
	}
	if qp, _ := verbs.DestQP(p["portstatus"]); qp != verbs.EndpointQPN {
		t.Fatalf("endpoint dest QP %d", qp)
	}
	_, resp, e, err = DecodeEndpoint(p["eresp"])
	if err != nil || !resp || e.Status != 1 || e.Op != EndpointEVProbe {
		t.Fatalf("endpoint response: %v %+v %v", resp, e, err)
	}
	// Truncation and wrong opcodes.
	decs := map[string]func([]byte) error{
		"ack":        func(b []byte) error { _, _, err := DecodeAck(b); return err },
		"sack":       func(b []byte) error { _, _, _, err := DecodeSACK(b); return err },
		"nack":       func(b []byte) error { _, _, err := DecodeNACK(b); return err },
		"probe":      func(b []byte) error { _, _, err := DecodeProbe(b); return err },
		"portstatus": func(b []byte) error { _, _, _, err := DecodeEndpoint(b); return err },
	}
	for name, dec := range decs {
		pk := p[name]
		for k := 0; k < len(pk); k++ {
			if dec(pk[:k]) == nil {
				t.Errorf("%s truncated to %d accepted", name, k)
			}
		}
		for other, ob := range p {
			if other != name && !(name == "portstatus" && other == "eresp") && dec(ob) == nil {
				t.Errorf("%s decoder accepted a %s packet", name, other)
			}
		}
	}
	// Garbled reserved fields.
	g := bytes.Clone(p["sack"])
	g[BTHLen+1] = 1
	if decs["sack"](g) != ErrReserved {
		t.Error("SETH reserved byte accepted")
	}
	g = bytes.Clone(p["sack"])
	g[BTHLen] |= 0xc0
	if decs["sack"](g) != ErrField {
		t.Error("SETH M=3 accepted")
	}
	g = bytes.Clone(p["nack"])
	g[BTHLen+8] = 1
	if decs["nack"](g) != ErrReserved {
		t.Error("NETH reserved accepted")
	}
	g = bytes.Clone(p["portstatus"])
	g[BTHLen+1] = 9 // op 9
	if decs["portstatus"](g) != ErrField {
		t.Error("unknown endpoint op accepted")
	}
	if _, err := EncodeSACK(make([]byte, 10), BTH{}, &s, &c); err != ErrBuffer {
		t.Error("short SACK buffer")
	}
}

// --- fuzz targets: decoders never panic; what decodes re-encodes to the same bytes.

func addSeeds(f *testing.F) {
	for _, p := range validPackets(f) {
		f.Add(p)
	}
}

func FuzzDecodeBTH(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeBTH(b)
		if err != nil {
			return
		}
		var o [BTHLen]byte
		h.Put(o[:])
		if !bytes.Equal(o[:], b[:BTHLen]) {
			t.Fatalf("BTH re-encode % x != % x", o, b[:BTHLen])
		}
	})
}

func FuzzDecodeData(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h DataHeader
		n, err := DecodeData(b, &h)
		if err != nil {
			return
		}
		o := make([]byte, MaxDataHeaderLen)
		m, err := h.Encode(o)
		if err != nil || m != n || !bytes.Equal(o[:m], b[:n]) {
			t.Fatalf("data re-encode %v: % x != % x", err, o[:m], b[:n])
		}
	})
}

func FuzzDecodeAck(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		bth, a, err := DecodeAck(b)
		if err != nil {
			return
		}
		o := make([]byte, AckLen)
		EncodeAck(o, bth, a)
		if !bytes.Equal(o[:AckLen-ICRCLen], b[:AckLen-ICRCLen]) {
			t.Fatal("ack re-encode")
		}
	})
}

func FuzzDecodeSACK(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		bth, s, c, err := DecodeSACK(b)
		if err != nil {
			return
		}
		o := make([]byte, SACKLen)
		if _, err := EncodeSACK(o, bth, &s, &c); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(o[:SACKLen-ICRCLen], b[:SACKLen-ICRCLen]) {
			t.Fatal("sack re-encode")
		}
	})
}

func FuzzDecodeNACK(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		bth, n, err := DecodeNACK(b)
		if err != nil {
			return
		}
		o := make([]byte, NACKLen)
		EncodeNACK(o, bth, &n)
		if !bytes.Equal(o[:NACKLen-ICRCLen], b[:NACKLen-ICRCLen]) {
			t.Fatal("nack re-encode")
		}
	})
}

func FuzzDecodeProbe(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		bth, p, err := DecodeProbe(b)
		if err != nil {
			return
		}
		o := make([]byte, ProbeLen)
		EncodeProbe(o, bth, p)
		if !bytes.Equal(o[:ProbeLen-ICRCLen], b[:ProbeLen-ICRCLen]) {
			t.Fatal("probe re-encode")
		}
	})
}

func FuzzDecodeEndpoint(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		bth, resp, e, err := DecodeEndpoint(b)
		if err != nil {
			return
		}
		o := make([]byte, EndpointLen)
		if _, err := EncodeEndpoint(o, bth, resp, e); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(o[:EndpointLen-ICRCLen], b[:EndpointLen-ICRCLen]) {
			t.Fatal("endpoint re-encode")
		}
	})
}

// FuzzReceive feeds arbitrary bytes to a connected QP: it must never panic.
func FuzzReceive(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var mem verbs.Memory
		mem.Register(make([]byte, 1<<16))
		q := New(DefaultConfig(), &mem, 0xabcdef, 1)
		q.Connect(verbs.QPAttrs{QPN: 0xabcdef, InitialPSN: 0x123450}, verbs.QPAttrs{Host: 1, QPN: 7, InitialPSN: 0x123450})
		q.Post(0, verbs.WorkRequest{ID: 1, LocalKey: 1, LocalVA: 0x10000, Length: 20000, RemoteKey: 1, RemoteVA: 0x10000})
		buf := make([]byte, verbs.MaxTxBytes)
		for {
			if _, ok := q.Send(0, 0xf, buf); !ok {
				break
			}
		}
		for _, trimmed := range []bool{false, true} {
			q.Receive(1000, &verbs.Rx{Data: b, WireLen: len(b) + 4096, EV: 3, Trimmed: trimmed, CE: len(b)%2 == 0})
			for {
				if _, ok := q.Send(2000, 0xf, buf); !ok {
					break
				}
			}
			q.Tick(1 << 40)
		}
	})
}

// BenchmarkWire: encode and decode of the per-packet headers alone (a
// WRITE Middle with TSETH, and a Transport ACK).
func BenchmarkWire(b *testing.B) {
	buf := make([]byte, 128)
	data := sampleData(OpWriteMiddle, true)
	var g DataHeader
	b.ReportAllocs()
	for range b.N {
		n, _ := data.Encode(buf)
		if _, err := DecodeData(buf[:n], &g); err != nil {
			b.Fatal(err)
		}
		EncodeAck(buf, sampleBTH(0), AETH{Syndrome: AckSyndrome, MSN: 7})
		if _, _, err := DecodeAck(buf[:AckLen]); err != nil {
			b.Fatal(err)
		}
	}
}
