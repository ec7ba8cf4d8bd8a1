package ib

import (
	"bytes"
	"testing"
)

// Fuzz targets, one per decoder: Parse never panics on any input, fails
// exactly when the input is short, and what it parses Puts back to the same
// bytes (every header here is a bijection on its bytes).

func FuzzParseBTH(f *testing.F) {
	f.Add(fullBTHBytes)
	f.Add([]byte{0xC6, 0, 0xFF, 0xFF, 0, 0, 0, 2, 0xE0, 0xFF, 0xFF, 0xFF, 1, 2})
	f.Add([]byte{0x81, 0, 0xFF, 0xFF, 0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h BTH
		err := h.Parse(b)
		if (err != nil) != (len(b) < BTHLen) {
			t.Fatalf("Parse of %d bytes: %v", len(b), err)
		}
		if err != nil {
			if h != (BTH{}) {
				t.Fatalf("failed Parse wrote %+v", h)
			}
			return
		}
		var o [BTHLen]byte
		if err := h.Put(o[:]); err != nil || !bytes.Equal(o[:], b[:BTHLen]) {
			t.Fatalf("re-Put %v: % x != % x", err, o, b[:BTHLen])
		}
	})
}

func FuzzParseRETH(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0x80, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r RETH
		err := r.Parse(b)
		if (err != nil) != (len(b) < RETHLen) {
			t.Fatalf("Parse of %d bytes: %v", len(b), err)
		}
		if err != nil {
			return
		}
		var o [RETHLen]byte
		if err := r.Put(o[:]); err != nil || !bytes.Equal(o[:], b[:RETHLen]) {
			t.Fatalf("re-Put %v: % x != % x", err, o, b[:RETHLen])
		}
	})
}

func FuzzParseAETH(f *testing.F) {
	f.Add([]byte{0x1F, 0, 0, 5})
	f.Add([]byte{0x62, 0x65, 0x43, 0x21, 0})
	f.Add([]byte{0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a AETH
		err := a.Parse(b)
		if (err != nil) != (len(b) < AETHLen) {
			t.Fatalf("Parse of %d bytes: %v", len(b), err)
		}
		if err != nil {
			return
		}
		// Exactly one class, unless reserved.
		n := 0
		for _, c := range []bool{a.IsACK(), a.IsRNR(), a.IsNAK()} {
			if c {
				n++
			}
		}
		if a.Valid() && n != 1 || a.Syndrome&0x60 == 0x40 && n != 0 {
			t.Fatalf("syndrome %#x: %d classes, valid %v", a.Syndrome, n, a.Valid())
		}
		var o [AETHLen]byte
		if err := a.Put(o[:]); err != nil || !bytes.Equal(o[:], b[:AETHLen]) {
			t.Fatalf("re-Put %v: % x != % x", err, o, b[:AETHLen])
		}
	})
}

func FuzzParseImmDt(f *testing.F) {
	f.Add([]byte{0xDE, 0xAD, 0xBE, 0xEF})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d ImmDt
		err := d.Parse(b)
		if (err != nil) != (len(b) < ImmDtLen) {
			t.Fatalf("Parse of %d bytes: %v", len(b), err)
		}
		if err != nil {
			return
		}
		var o [ImmDtLen]byte
		if err := d.Put(o[:]); err != nil || !bytes.Equal(o[:], b[:ImmDtLen]) {
			t.Fatalf("re-Put %v: % x != % x", err, o, b[:ImmDtLen])
		}
	})
}
