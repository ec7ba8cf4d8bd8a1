package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
	"testing"
)

type closeRecorder struct {
	bytes.Buffer
	closed int
}

func (c *closeRecorder) Close() error { c.closed++; return nil }

func frameOf(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	var out closeRecorder
	w, err := NewWriter(&out, LinkTypeEthernet, 100)
	if err != nil {
		t.Fatal(err)
	}
	type pkt struct {
		ts      int64
		frame   []byte
		origLen int
	}
	pkts := []pkt{
		{0, frameOf(60, 1), 60},
		{1, frameOf(64, 2), 0},                     // origLen raised to len(frame)
		{999_999_999, frameOf(100, 3), 100},        // exactly snapLen
		{1_000_000_000, frameOf(150, 4), 150},      // truncated to snapLen
		{12_345_678_901_234, frameOf(10, 5), 9000}, // orig larger than captured
		{math.MaxUint32*1e9 + 999_999_999, nil, 0}, // largest timestamp, empty frame
		{42, frameOf(1, 6), 1},                     // time may go backwards; written as is
	}
	for _, p := range pkts {
		if err := w.WritePacket(p.ts, p.frame, p.origLen); err != nil {
			t.Fatalf("WritePacket(%d): %v", p.ts, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.closed != 1 {
		t.Fatalf("underlying Close called %d times, want 1", out.closed)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v, want ErrClosed", err)
	}
	if err := w.WritePacket(0, nil, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("WritePacket after Close = %v, want ErrClosed", err)
	}

	raw := out.Bytes()
	want := []byte{0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1, 0, 0, 0}
	if !bytes.Equal(raw[:24], want) {
		t.Fatalf("global header = % x, want % x", raw[:24], want)
	}

	lt, recs, err := ReadAll(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if lt != LinkTypeEthernet {
		t.Fatalf("link type %d", lt)
	}
	if len(recs) != len(pkts) {
		t.Fatalf("got %d records, want %d", len(recs), len(pkts))
	}
	for i, p := range pkts {
		r := recs[i]
		wantData := p.frame
		if len(wantData) > 100 {
			wantData = wantData[:100]
		}
		wantOrig := max(p.origLen, len(p.frame))
		if r.TS != p.ts || !bytes.Equal(r.Data, wantData) || r.OrigLen != wantOrig {
			t.Errorf("record %d = {TS %d, %d bytes, orig %d}, want {TS %d, %d bytes, orig %d}",
				i, r.TS, len(r.Data), r.OrigLen, p.ts, len(wantData), wantOrig)
		}
	}
}

func TestDefaultSnapLenAndRaw(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, LinkTypeRaw, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.SnapLen() != DefaultSnapLen || w.LinkType() != LinkTypeRaw {
		t.Fatalf("SnapLen %d LinkType %d", w.SnapLen(), w.LinkType())
	}
	big := frameOf(9000, 7)
	if err := w.WritePacket(5, big, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lt, recs, err := ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if lt != LinkTypeRaw || len(recs) != 1 || !bytes.Equal(recs[0].Data, big) || recs[0].TS != 5 {
		t.Fatalf("lt %d recs %d", lt, len(recs))
	}
}

func TestWritePacketErrors(t *testing.T) {
	w, err := NewWriter(io.Discard, LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WritePacket(-1, nil, 0); !errors.Is(err, ErrNegativeTimestamp) {
		t.Errorf("negative ts: %v", err)
	}
	if err := w.WritePacket((math.MaxUint32+1)*1e9, nil, 0); !errors.Is(err, ErrTimestampOverflow) {
		t.Errorf("overflow ts: %v", err)
	}
	if err := w.WritePacket(0, nil, math.MaxUint32+1); !errors.Is(err, ErrPacketTooLong) {
		t.Errorf("orig too long: %v", err)
	}
	if _, err := NewWriter(nil, LinkTypeEthernet, 0); err == nil {
		t.Error("NewWriter(nil) succeeded")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestWriteErrorPropagates(t *testing.T) {
	w, err := NewWriter(failWriter{}, LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err) // header is buffered, not yet written
	}
	if err := w.Flush(); err == nil {
		t.Fatal("Flush to failing writer succeeded")
	}
}

// microFile builds a microsecond-resolution file in the given byte order.
func microFile(order binary.ByteOrder, snap uint32, recs ...Record) []byte {
	b := make([]byte, 24)
	order.PutUint32(b[0:], MagicMicroseconds)
	order.PutUint16(b[4:], 2)
	order.PutUint16(b[6:], 4)
	order.PutUint32(b[16:], snap)
	order.PutUint32(b[20:], LinkTypeEthernet)
	for _, r := range recs {
		var h [16]byte
		order.PutUint32(h[0:], uint32(r.TS/1e9))
		order.PutUint32(h[4:], uint32(r.TS%1e9/1e3))
		order.PutUint32(h[8:], uint32(len(r.Data)))
		order.PutUint32(h[12:], uint32(r.OrigLen))
		b = append(b, h[:]...)
		b = append(b, r.Data...)
	}
	return b
}

func TestReadMicrosecondsBothOrders(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		in := []Record{{TS: 3_000_004_000, Data: []byte{1, 2, 3}, OrigLen: 3}, {TS: 7_000, Data: nil, OrigLen: 60}}
		lt, recs, err := ReadAll(bytes.NewReader(microFile(order, 65535, in...)))
		if err != nil {
			t.Fatalf("%v: %v", order, err)
		}
		if lt != LinkTypeEthernet || len(recs) != 2 {
			t.Fatalf("%v: lt %d, %d recs", order, lt, len(recs))
		}
		for i := range in {
			if recs[i].TS != in[i].TS || !bytes.Equal(recs[i].Data, in[i].Data) || recs[i].OrigLen != in[i].OrigLen {
				t.Errorf("%v: record %d = %+v, want %+v", order, i, recs[i], in[i])
			}
		}
	}
}

func validFile(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, LinkTypeEthernet, 128)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.WritePacket(int64(i)*1_500_000_001, frameOf(20+i, byte(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadAllRejectsMalformed(t *testing.T) {
	good := validFile(t)
	mut := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	le := binary.LittleEndian
	cases := map[string][]byte{
		"empty":             {},
		"short header":      good[:23],
		"bad magic":         mut(func(b []byte) []byte { b[0] = 0; return b }),
		"bad major":         mut(func(b []byte) []byte { le.PutUint16(b[4:], 1); return b }),
		"short record hdr":  good[:24+15],
		"truncated data":    good[:len(good)-1],
		"nsec out of range": mut(func(b []byte) []byte { le.PutUint32(b[24+4:], 1e9); return b }),
		"incl > snaplen":    mut(func(b []byte) []byte { le.PutUint32(b[24+8:], 129); le.PutUint32(b[24+12:], 129); return b }),
		"orig < incl":       mut(func(b []byte) []byte { le.PutUint32(b[24+12:], 1); return b }),
		"huge incl_len": mut(func(b []byte) []byte {
			le.PutUint32(b[16:], 0)
			le.PutUint32(b[24+8:], 0xffffffff)
			le.PutUint32(b[24+12:], 0xffffffff)
			return b
		}),
	}
	// A microsecond file whose fraction is 1e6 exactly.
	us := microFile(binary.BigEndian, 0, Record{Data: []byte{1}, OrigLen: 1})
	binary.BigEndian.PutUint32(us[24+4:], 1e6)
	cases["usec out of range"] = us
	for name, in := range cases {
		if _, _, err := ReadAll(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: ReadAll succeeded on malformed input", name)
		}
	}
	if _, recs, err := ReadAll(bytes.NewReader(good)); err != nil || len(recs) != 3 {
		t.Fatalf("good file: %d recs, %v", len(recs), err)
	}
}

func TestWritePacketZeroAllocs(t *testing.T) {
	w, err := NewWriter(io.Discard, LinkTypeEthernet, 0)
	if err != nil {
		t.Fatal(err)
	}
	small := frameOf(64, 1)
	jumbo := frameOf(9000, 2) // larger than the bufio buffer's free space at times
	var ts int64
	allocs := testing.AllocsPerRun(1000, func() {
		ts += 1234
		_ = w.WritePacket(ts, small, 0)
		_ = w.WritePacket(ts, jumbo, 9000)
	})
	if allocs != 0 {
		t.Fatalf("WritePacket allocates %v times per run, want 0", allocs)
	}
	allocs = testing.AllocsPerRun(100, func() { _ = w.WritePacket(-1, small, 0) })
	if allocs != 0 {
		t.Fatalf("WritePacket error path allocates %v times per run, want 0", allocs)
	}
}

func BenchmarkWritePacket(b *testing.B) {
	for _, size := range []int{64, 1500, 4200} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			w, err := NewWriter(io.Discard, LinkTypeEthernet, 0)
			if err != nil {
				b.Fatal(err)
			}
			frame := frameOf(size, 0)
			b.SetBytes(int64(size + recordHeaderLen))
			b.ReportAllocs()
			var ts int64
			for b.Loop() {
				ts += 100
				if err := w.WritePacket(ts, frame, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzReadAll(f *testing.F) {
	good := validFile(f)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add(good[:24])
	f.Add(microFile(binary.BigEndian, 0, Record{TS: 1e9, Data: []byte{1, 2}, OrigLen: 2}))
	f.Add(microFile(binary.LittleEndian, 16, Record{TS: 5e3, Data: frameOf(16, 9), OrigLen: 100}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		lt, recs, err := ReadAll(bytes.NewReader(in))
		if err != nil {
			return
		}
		// Whatever parses must survive a write/read round trip unchanged.
		var snap uint32 = 1
		for _, r := range recs {
			snap = max(snap, uint32(len(r.Data)))
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, lt, snap)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WritePacket(r.TS, r.Data, r.OrigLen); err != nil {
				t.Fatalf("rewrite %+v: %v", r, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		lt2, recs2, err := ReadAll(&buf)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if lt2 != lt || len(recs2) != len(recs) {
			t.Fatalf("re-read: lt %d/%d, %d/%d records", lt2, lt, len(recs2), len(recs))
		}
		for i := range recs {
			a, b := recs[i], recs2[i]
			if a.TS != b.TS || a.OrigLen != b.OrigLen || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("record %d changed: %+v -> %+v", i, a, b)
			}
		}
	})
}
