package ib

import (
	"bytes"
	"testing"
)

// Every BTH field at a distinct value; the bytes are worked out by hand
// from the layout in the BTH doc comment.
var (
	fullBTH = BTH{Opcode: 0x0B, SE: true, MigReq: false, PadCnt: 2, TVer: 0x5, PKey: 0xFFFE,
		FECN: true, BECN: false, Resv6a: 0x21, DestQP: 0xABCDEF, AckReq: true, Rtx: false, TS: true,
		Resv5: 0x11, PSN: 0x123456}
	fullBTHBytes = []byte{0x0B, 0x80 | 2<<4 | 0x5, 0xFF, 0xFE, 0x80 | 0x21, 0xAB, 0xCD, 0xEF,
		0x80 | 0x20 | 0x11, 0x12, 0x34, 0x56}
)

func TestBTHLayout(t *testing.T) {
	var b [BTHLen]byte
	if err := fullBTH.Put(b[:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[:], fullBTHBytes) {
		t.Fatalf("Put: % x\n want % x", b, fullBTHBytes)
	}
	var h BTH
	if err := h.Parse(fullBTHBytes); err != nil || h != fullBTH {
		t.Fatalf("Parse: %+v %v", h, err)
	}
	// Each flag alone lands on its own bit.
	flags := []struct {
		name string
		set  func(*BTH)
		off  int
		bit  byte
	}{
		{"SE", func(h *BTH) { h.SE = true }, 1, 0x80},
		{"MigReq", func(h *BTH) { h.MigReq = true }, 1, 0x40},
		{"FECN", func(h *BTH) { h.FECN = true }, 4, 0x80},
		{"BECN", func(h *BTH) { h.BECN = true }, 4, 0x40},
		{"AckReq", func(h *BTH) { h.AckReq = true }, 8, 0x80},
		{"Rtx", func(h *BTH) { h.Rtx = true }, 8, 0x40},
		{"TS", func(h *BTH) { h.TS = true }, 8, 0x20},
	}
	for _, f := range flags {
		var h BTH
		f.set(&h)
		var b [BTHLen]byte
		h.Put(b[:])
		want := make([]byte, BTHLen)
		want[f.off] = f.bit
		if !bytes.Equal(b[:], want) {
			t.Errorf("%s: % x", f.name, b)
		}
	}
}

func TestBTHMasksWideFields(t *testing.T) {
	h := BTH{PadCnt: 0xFF, TVer: 0xFF, Resv6a: 0xFF, Resv5: 0xFF, DestQP: 0xFF000001, PSN: 0xFFFFFFFF}
	var b [BTHLen]byte
	h.Put(b[:])
	want := []byte{0, 0x3F, 0, 0, 0x3F, 0, 0, 1, 0x1F, 0xFF, 0xFF, 0xFF}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("% x, want % x", b, want)
	}
}

func TestBTHBounds(t *testing.T) {
	for n := 0; n < BTHLen; n++ {
		if err := fullBTH.Put(make([]byte, n)); err != ErrBuffer {
			t.Errorf("Put into %d bytes: %v", n, err)
		}
		h := fullBTH
		if err := h.Parse(fullBTHBytes[:n]); err != ErrShort || h != fullBTH {
			t.Errorf("Parse of %d bytes: %v, header %+v", n, err, h)
		}
	}
	// Longer slices: only the first BTHLen bytes are touched.
	b := bytes.Repeat([]byte{0xEE}, BTHLen+3)
	fullBTH.Put(b)
	if !bytes.Equal(b[BTHLen:], []byte{0xEE, 0xEE, 0xEE}) {
		t.Fatalf("Put wrote past the BTH: % x", b)
	}
}

func TestRETH(t *testing.T) {
	r := RETH{VA: 0x0102030405060708, RKey: 0x11223344, DMALen: 0x80000000}
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x80, 0, 0, 0}
	var b [RETHLen]byte
	if err := r.Put(b[:]); err != nil || !bytes.Equal(b[:], want) {
		t.Fatalf("Put: % x %v", b, err)
	}
	var g RETH
	if err := g.Parse(want); err != nil || g != r {
		t.Fatalf("Parse: %+v %v", g, err)
	}
	for n := 0; n < RETHLen; n++ {
		if r.Put(make([]byte, n)) != ErrBuffer || g.Parse(want[:n]) != ErrShort || g != r {
			t.Errorf("RETH bounds at %d", n)
		}
	}
}

func TestAETH(t *testing.T) {
	a := AETH{Syndrome: SyndromeNAK | NakRemoteAccess, MSN: 0xFF654321}
	var b [AETHLen]byte
	if err := a.Put(b[:]); err != nil || !bytes.Equal(b[:], []byte{0x62, 0x65, 0x43, 0x21}) {
		t.Fatalf("Put: % x %v", b, err)
	}
	var g AETH
	if err := g.Parse(b[:]); err != nil || g != (AETH{Syndrome: 0x62, MSN: 0x654321}) {
		t.Fatalf("Parse: %+v %v", g, err)
	}
	for n := 0; n < AETHLen; n++ {
		if a.Put(make([]byte, n)) != ErrBuffer || g.Parse(b[:n]) != ErrShort || g.MSN != 0x654321 {
			t.Errorf("AETH bounds at %d", n)
		}
	}
	classes := []struct {
		syn           uint8
		ack, rnr, nak bool
		valid         bool
		code          uint8
		comment       string
	}{
		{SyndromeACK | CreditsInvalid, true, false, false, true, 0x1F, "ACK, no credits"},
		{SyndromeACK | 3, true, false, false, true, 3, "ACK, 3 credits"},
		{SyndromeRNR | 0x0E, false, true, false, true, 0x0E, "RNR NAK"},
		{SyndromeNAK | NakPSNSeqError, false, false, true, true, 0, "PSN sequence error"},
		{SyndromeNAK | NakRemoteOpError, false, false, true, true, 3, "remote op error"},
		{0x40, false, false, false, false, 0, "reserved class 10"},
		{0x80 | SyndromeACK, true, false, false, false, 0, "bit 7 set"},
	}
	for _, c := range classes {
		a := AETH{Syndrome: c.syn}
		if a.IsACK() != c.ack || a.IsRNR() != c.rnr || a.IsNAK() != c.nak || a.Valid() != c.valid || a.Code() != c.code {
			t.Errorf("%s (%#x): ack %v rnr %v nak %v valid %v code %d", c.comment, c.syn,
				a.IsACK(), a.IsRNR(), a.IsNAK(), a.Valid(), a.Code())
		}
	}
}

func TestImmDt(t *testing.T) {
	var b [ImmDtLen]byte
	if err := ImmDt(0xDEADBEEF).Put(b[:]); err != nil || !bytes.Equal(b[:], []byte{0xDE, 0xAD, 0xBE, 0xEF}) {
		t.Fatalf("Put: % x %v", b, err)
	}
	var d ImmDt
	if err := d.Parse(b[:]); err != nil || d != 0xDEADBEEF {
		t.Fatalf("Parse: %#x %v", d, err)
	}
	for n := 0; n < ImmDtLen; n++ {
		if ImmDt(1).Put(make([]byte, n)) != ErrBuffer || d.Parse(b[:n]) != ErrShort || d != 0xDEADBEEF {
			t.Errorf("ImmDt bounds at %d", n)
		}
	}
}

func TestUint24(t *testing.T) {
	b := []byte{9, 9, 9, 9}
	PutUint24(b, 0xFFABCDEF)
	if !bytes.Equal(b, []byte{0xAB, 0xCD, 0xEF, 9}) || Uint24(b) != 0xABCDEF {
		t.Fatalf("% x", b)
	}
}

// The per-packet path must not allocate: neither Put nor Parse, nor their
// errors.
func TestCodecAllocs(t *testing.T) {
	buf := make([]byte, 64)
	var (
		h BTH
		r RETH
		a AETH
		d ImmDt
	)
	if n := testing.AllocsPerRun(100, func() {
		fullBTH.Put(buf)
		h.Parse(buf)
		r.Put(buf[BTHLen:])
		r.Parse(buf[BTHLen:])
		a.Put(buf[BTHLen:])
		a.Parse(buf[BTHLen:])
		ImmDt(7).Put(buf[BTHLen:])
		d.Parse(buf[BTHLen:])
		_ = h.Parse(buf[:3])
		_ = r.Put(buf[:3])
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
