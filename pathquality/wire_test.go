package pathquality

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"testing"
)

func sampleUpdate() Update {
	return Update{
		Origin:      OriginIGP,
		ASPath:      []uint32{ASBase + 7, ASBase + 3},
		NextHop:     [16]byte{0xfc, 0xbb, 0xbb, 0x00, 0x04, 0x01},
		Prefix:      SubnetPrefix(1, 5),
		PrefixLen:   SubnetPrefixLen,
		CommunityAS: ASTrans,
		Bandwidth:   BandwidthFromGbps(25),
	}
}

func TestEncodeUpdateLayout(t *testing.T) {
	u := sampleUpdate()
	u.ASPath = u.ASPath[:1]
	b := EncodeUpdate(u)
	// docs/pathquality.md's table: 80 bytes, attributes at 23, 27, 36, 69.
	if len(b) != 80 || b[23] != 0x40 || b[24] != 1 || b[28] != 2 || b[37] != 14 || b[38] != 30 ||
		b[60] != 64 || b[70] != 16 || binary.BigEndian.Uint32(b[32:]) != ASBase+7 ||
		!bytes.Equal(b[43:59], u.NextHop[:]) {
		t.Fatalf("layout differs from the documented table: % x", b)
	}
	for i := 0; i < 16; i++ {
		if b[i] != 0xff {
			t.Fatalf("marker byte %d = %#x", i, b[i])
		}
	}
	if n := int(binary.BigEndian.Uint16(b[16:])); n != len(b) {
		t.Fatalf("length field %d, message %d bytes", n, len(b))
	}
	if b[18] != 2 {
		t.Fatalf("type %d, want UPDATE", b[18])
	}
	if w := binary.BigEndian.Uint16(b[19:]); w != 0 {
		t.Fatalf("withdrawn length %d", w)
	}
	if al := int(binary.BigEndian.Uint16(b[21:])); al != len(b)-23 {
		t.Fatalf("attribute length %d, want %d", al, len(b)-23)
	}
	// The community is the last 8 bytes: 0x40 0x04, AS_TRANS, float32 bytes/s.
	c := b[len(b)-8:]
	if c[0] != 0x40 || c[1] != 0x04 || binary.BigEndian.Uint16(c[2:]) != ASTrans {
		t.Fatalf("community header % x", c[:4])
	}
	if g := float64(math.Float32frombits(binary.BigEndian.Uint32(c[4:]))) * 8 / 1e9; math.Abs(g-25) > 1e-6 {
		t.Fatalf("community carries %v Gb/s, want 25", g)
	}
	// MP_REACH_NLRI carries fd00:0:1:5::/64.
	want := []byte{0x80, 14, 2 + 1 + 1 + 16 + 1 + 1 + 8, 0, 2, 1, 16}
	if i := bytes.Index(b, want); i < 0 {
		t.Fatalf("no MP_REACH_NLRI header % x in % x", want, b)
	} else if nlri := b[i+len(want)+16:]; nlri[0] != 0 || nlri[1] != 64 ||
		!bytes.Equal(nlri[2:10], []byte{0xfd, 0, 0, 0, 0, 1, 0, 5}) {
		t.Fatalf("NLRI % x", nlri[:10])
	}
}

func TestUpdateRoundTrip(t *testing.T) {
	for _, u := range []Update{
		sampleUpdate(),
		{Origin: OriginIncomplete, ASPath: []uint32{1}, PrefixLen: 0},
		{ASPath: []uint32{ASBase}, Prefix: [16]byte{0x80}, PrefixLen: 1, Bandwidth: 1e12},
		{ASPath: make([]uint32, 255), Prefix: [16]byte{15: 1}, PrefixLen: 128},
	} {
		got, err := DecodeUpdate(EncodeUpdate(u))
		if err != nil {
			t.Fatalf("%+v: %v", u, err)
		}
		if !reflect.DeepEqual(got, u) {
			t.Fatalf("round trip: got %+v, want %+v", got, u)
		}
	}
}

func TestDecodeUpdateRejects(t *testing.T) {
	good := EncodeUpdate(sampleUpdate())
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for name, b := range map[string][]byte{
		"short":        good[:10],
		"marker":       mut(func(b []byte) []byte { b[3] = 0; return b }),
		"length":       mut(func(b []byte) []byte { b[17]++; return b }),
		"type":         mut(func(b []byte) []byte { b[18] = 4; return b }),
		"withdrawn":    mut(func(b []byte) []byte { b[20] = 1; return b }),
		"attrs length": mut(func(b []byte) []byte { b[22]--; return b }),
		"truncated":    mut(func(b []byte) []byte { b = b[:len(b)-1]; binary.BigEndian.PutUint16(b[16:], uint16(len(b))); return b }),
		"NaN bandwidth": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[len(b)-4:], math.Float32bits(float32(math.NaN())))
			return b
		}),
		"negative bandwidth": mut(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[len(b)-4:], math.Float32bits(-1))
			return b
		}),
		"community subtype": mut(func(b []byte) []byte { b[len(b)-7] = 0x05; return b }),
	} {
		if _, err := DecodeUpdate(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeUpdate: DecodeUpdate never panics, and what decodes encodes
// to a message that decodes to the same update.
func FuzzDecodeUpdate(f *testing.F) {
	f.Add(EncodeUpdate(sampleUpdate()))
	f.Add(EncodeUpdate(Update{ASPath: []uint32{1}, PrefixLen: 3, Prefix: [16]byte{0xe0}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := DecodeUpdate(b)
		if err != nil {
			return
		}
		again, err := DecodeUpdate(EncodeUpdate(u))
		if err != nil {
			t.Fatalf("re-encoded update does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, u) {
			t.Fatalf("round trip: %+v then %+v", u, again)
		}
	})
}
