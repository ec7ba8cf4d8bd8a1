package tunnel

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func reasonOf(t *testing.T, err error) Reason {
	t.Helper()
	var de *DropError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DropError", err, err)
	}
	return de.Reason
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := HostKey(testSecret, 513)
	for _, kind := range []Kind{KindData, KindHello, KindHelloAck} {
		for _, dir := range []Dir{ToFabric, ToHost} {
			for _, n := range []int{0, 1, 4096, 9000} {
				h := Header{Kind: kind, Dir: dir, Plane: 3, Host: 513, Session: 1<<62 + 12345, Seq: uint64(n) + 1, WireLen: uint32(n) + 4, Flags: 2}
				payload := pattern(n, byte(kind))
				prefix := []byte("prefix")
				f := Seal(append([]byte(nil), prefix...), h, payload, k)
				if !bytes.Equal(f[:len(prefix)], prefix) {
					t.Fatalf("Seal overwrote dst's bytes")
				}
				f = f[len(prefix):]
				if len(f) != HeaderLen+n+TagLen {
					t.Fatalf("%v n=%d: frame %d bytes, want %d", kind, n, len(f), HeaderLen+n+TagLen)
				}
				ph, err := Peek(f)
				if err != nil || ph != h {
					t.Fatalf("%v n=%d: Peek = %+v, %v; want %+v", kind, n, ph, err, h)
				}
				oh, op, err := Open(f, k)
				if err != nil {
					t.Fatalf("%v %v n=%d: Open: %v", kind, dir, n, err)
				}
				if oh != h || !bytes.Equal(op, payload) {
					t.Fatalf("%v n=%d: Open = %+v (%d bytes), want %+v (%d bytes)", kind, n, oh, len(op), h, n)
				}
				if n > 0 && &op[0] != &f[HeaderLen] {
					t.Fatalf("payload does not alias the frame")
				}
			}
		}
	}
}

// TestByteLayout builds a frame by the table in docs/lab-tunnel.md, with
// an HMAC computed here from the documented key derivation, and checks
// Seal produces exactly it.
func TestByteLayout(t *testing.T) {
	payload := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	h := Header{Kind: KindData, Dir: ToHost, Plane: 7, Host: 0x0102, Session: 0x1122334455667788, Seq: 0x0a0b0c0d0e0f1011, WireLen: 0x01020304, Flags: 0x06}
	want := []byte{0x56, 0x43, 1, 1, 1, 7, 0x01, 0x02,
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
		0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11,
		0x01, 0x02, 0x03, 0x04, 0x06, 0, 0, 5}
	want = append(want, payload...)
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte("vcluster-lab-tunnel-v1/host/258"))
	m = hmac.New(sha256.New, m.Sum(nil))
	m.Write(want)
	want = append(want, m.Sum(nil)[:16]...)
	got := Seal(nil, h, payload, HostKey(testSecret, 258))
	if !bytes.Equal(got, want) {
		t.Fatalf("Seal =\n%x\nwant\n%x", got, want)
	}
}

func TestTagCoversEveryByte(t *testing.T) {
	k := HostKey(testSecret, 9)
	h := Header{Kind: KindData, Dir: ToFabric, Plane: 1, Host: 9, Session: 77, Seq: 5, WireLen: 100, Flags: 0}
	f := Seal(nil, h, pattern(64, 1), k)
	for i := range f {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			g := append([]byte(nil), f...)
			g[i] ^= flip
			_, _, err := Open(g, k)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: accepted", i, flip)
			}
			if r := reasonOf(t, err); r != BadTag && r != Malformed {
				t.Fatalf("byte %d ^ %#x: reason %v, want bad-tag or malformed", i, flip, r)
			}
		}
	}
}

func TestMalformed(t *testing.T) {
	k := HostKey(testSecret, 1)
	good := Seal(nil, Header{Kind: KindData, Dir: ToFabric, Host: 1, Session: 1, Seq: 1}, pattern(20, 0), k)
	mod := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := map[string][]byte{
		"empty":          {},
		"short":          good[:HeaderLen+TagLen-1],
		"header only":    good[:HeaderLen],
		"bad magic":      mod(func(b []byte) []byte { b[0] = 'X'; return b }),
		"bad version":    mod(func(b []byte) []byte { b[2] = 2; return b }),
		"kind 0":         mod(func(b []byte) []byte { b[3] = 0; return b }),
		"kind 4":         mod(func(b []byte) []byte { b[3] = 4; return b }),
		"dir 2":          mod(func(b []byte) []byte { b[4] = 2; return b }),
		"reserved":       mod(func(b []byte) []byte { b[29] = 1; return b }),
		"seq 0":          mod(func(b []byte) []byte { clear(b[16:24]); return b }),
		"truncated":      good[:len(good)-1],
		"extended":       append(append([]byte(nil), good...), 0),
		"length says +1": mod(func(b []byte) []byte { b[31]++; return b }),
		"length says -1": mod(func(b []byte) []byte { b[31]--; return b }),
		"too long":       make([]byte, MaxFrame+1),
	}
	for name, b := range cases {
		if _, err := Peek(b); err == nil || reasonOf(t, err) != Malformed {
			t.Errorf("%s: Peek err %v, want malformed", name, err)
		}
		if _, _, err := Open(b, k); err == nil || reasonOf(t, err) != Malformed {
			t.Errorf("%s: Open err %v, want malformed", name, err)
		}
	}
	if _, _, err := Open(good, k); err != nil {
		t.Fatalf("the unmodified frame: %v", err)
	}
}

func TestBadTag(t *testing.T) {
	h := Header{Kind: KindData, Dir: ToFabric, Plane: 0, Host: 4, Session: 10, Seq: 1}
	f := Seal(nil, h, pattern(100, 3), HostKey(testSecret, 4))
	other := []byte("another-secret-of-enough-length")
	if _, _, err := Open(f, HostKey(other, 4)); err == nil || reasonOf(t, err) != BadTag {
		t.Fatalf("wrong secret: %v, want bad-tag", err)
	}
	if _, _, err := Open(f, HostKey(testSecret, 5)); err == nil || reasonOf(t, err) != BadTag {
		t.Fatalf("other host's key: %v, want bad-tag", err)
	}
	// Host 5 sealing a frame that claims to be host 4's.
	h5 := h
	forged := Seal(nil, h5, pattern(100, 3), HostKey(testSecret, 5))
	if _, _, err := Open(forged, HostKey(testSecret, 4)); err == nil || reasonOf(t, err) != BadTag {
		t.Fatalf("frame sealed with host 5's key claiming host 4: %v, want bad-tag", err)
	}
}

func TestHostKeyRange(t *testing.T) {
	for _, host := range []int{-1, 65536} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("HostKey(%d) did not panic", host)
				}
			}()
			HostKey(testSecret, host)
		}()
	}
	if HostKey(testSecret, 65535).Host() != 65535 {
		t.Fatal("host 65535")
	}
}

func TestSealPanicsOnCallerBugs(t *testing.T) {
	k := HostKey(testSecret, 1)
	for name, f := range map[string]func(){
		"payload too long": func() { Seal(nil, Header{Kind: KindData, Host: 1, Seq: 1}, make([]byte, MaxPayload+1), k) },
		"kind 0":           func() { Seal(nil, Header{Kind: 0, Host: 1, Seq: 1}, nil, k) },
		"dir 2":            func() { Seal(nil, Header{Kind: KindData, Dir: 2, Host: 1, Seq: 1}, nil, k) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	// The largest payload fits a UDP datagram.
	f := Seal(nil, Header{Kind: KindData, Host: 1, Seq: 1}, make([]byte, MaxPayload), k)
	if len(f) != MaxFrame {
		t.Fatalf("largest frame %d bytes, want %d", len(f), MaxFrame)
	}
	if _, _, err := Open(f, k); err != nil {
		t.Fatalf("largest frame: %v", err)
	}
}

func TestSealOpenAllocs(t *testing.T) {
	k := HostKey(testSecret, 2)
	h := Header{Kind: KindData, Dir: ToFabric, Host: 2, Session: 1, Seq: 1, WireLen: 4200}
	payload := pattern(4096, 0)
	buf := make([]byte, 0, MaxFrame)
	var sink int
	allocs := testing.AllocsPerRun(200, func() {
		f := Seal(buf[:0], h, payload, k)
		_, p, err := Open(f, k)
		if err != nil {
			panic(err)
		}
		sink += len(p)
	})
	if allocs != 0 {
		t.Fatalf("Seal+Open: %v allocations per frame, want 0", allocs)
	}
	// A drop allocates nothing either (an attacker drives that path).
	bad := Seal(nil, h, payload, k)
	bad[40] ^= 1
	allocs = testing.AllocsPerRun(200, func() {
		if _, _, err := Open(bad, k); err == nil {
			panic("accepted")
		}
	})
	if allocs != 0 {
		t.Fatalf("Open of a forged frame: %v allocations, want 0", allocs)
	}
	if sink == 0 {
		t.Fatal("no payload")
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s, err := LoadSecret(write("ok", "  0123456789abcdef\n"))
	if err != nil || string(s) != "0123456789abcdef" {
		t.Fatalf("LoadSecret = %q, %v", s, err)
	}
	p := write("short", "0123456789abcde\n\n")
	_, err = LoadSecret(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), "15 bytes") {
		t.Fatalf("short secret: %v; want the file, the length and the minimum 16", err)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := LoadSecret(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing secret: %v", err)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSecret()
	if len(a) != 65 || a[64] != '\n' || strings.Trim(string(a[:64]), "0123456789abcdef") != "" {
		t.Fatalf("NewSecret = %q, want 64 hex chars and a newline", a)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two secrets are equal")
	}
	p := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(p, a, 0o600)
	s, err := LoadSecret(p)
	if err != nil || len(s) != 64 {
		t.Fatalf("a new secret does not load: %q, %v", s, err)
	}
}

func TestReasons(t *testing.T) {
	rs := Reasons()
	if len(rs) != 9 {
		t.Fatalf("%d reasons, want 9", len(rs))
	}
	seen := map[string]bool{}
	var c Counters
	for i, r := range rs {
		name := r.String()
		if seen[name] || name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz-") != "" {
			t.Fatalf("reason %d: name %q (duplicate or not lower-case-hyphen)", r, name)
		}
		seen[name] = true
		for j := 0; j <= i; j++ {
			c.Drop(r)
		}
	}
	c.Drop(0)
	c.Drop(200)
	snap := c.Snapshot()
	if len(snap) != len(rs) {
		t.Fatalf("snapshot has %d labels, want %d", len(snap), len(rs))
	}
	var total uint64
	for i, r := range rs {
		if snap[r.String()] != uint64(i+1) || c.Dropped(r) != uint64(i+1) {
			t.Fatalf("%v: snapshot %d, dropped %d, want %d", r, snap[r.String()], c.Dropped(r), i+1)
		}
		total += uint64(i + 1)
	}
	if c.Total() != total {
		t.Fatalf("total %d, want %d", c.Total(), total)
	}
	if Reason(0).String() != "unknown-reason" || c.Dropped(0) != 0 {
		t.Fatal("reason 0")
	}
	if e := (&DropError{BadTag, "x"}); !strings.Contains(e.Error(), "bad-tag") {
		t.Fatalf("DropError text %q", e.Error())
	}
}

// FuzzOpen: Open never panics, every refusal is a *DropError, and an
// accepted frame re-seals to exactly its bytes.
func FuzzOpen(f *testing.F) {
	k := HostKey(testSecret, 3)
	for i, kind := range []Kind{KindData, KindHello, KindHelloAck} {
		f.Add(Seal(nil, Header{Kind: kind, Dir: Dir(i % 2), Plane: uint8(i), Host: 3, Session: 99, Seq: uint64(i + 1), WireLen: 60}, pattern(i*20, 1), k))
	}
	f.Add(Seal(nil, Header{Kind: KindData, Host: 4, Session: 1, Seq: 1}, []byte("other host"), HostKey(testSecret, 4)))
	f.Add([]byte{})
	f.Add([]byte{0x56, 0x43, 1})
	f.Add(make([]byte, HeaderLen+TagLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, p, err := Open(b, k)
		if err != nil {
			var de *DropError
			if !errors.As(err, &de) || (de.Reason != Malformed && de.Reason != BadTag) {
				t.Fatalf("error %v is not a malformed/bad-tag *DropError", err)
			}
			return
		}
		again := Seal(nil, h, p, k)
		if !bytes.Equal(again, b) {
			t.Fatalf("re-sealed\n%x\nwant\n%x", again, b)
		}
	})
}

// FuzzPeek: Peek never panics, and an accepted header says what the
// bytes say.
func FuzzPeek(f *testing.F) {
	k := HostKey(testSecret, 3)
	f.Add(Seal(nil, Header{Kind: KindHello, Dir: ToFabric, Host: 3, Session: 5, Seq: 1}, make([]byte, 32), k))
	f.Add(Seal(nil, Header{Kind: KindData, Dir: ToHost, Plane: 255, Host: 65535, Session: 1 << 63, Seq: 1 << 40, WireLen: 9018, Flags: 2}, pattern(9000, 0), k))
	f.Add([]byte("VC"))
	f.Add(make([]byte, 48))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Peek(b)
		if err != nil {
			var de *DropError
			if !errors.As(err, &de) || de.Reason != Malformed {
				t.Fatalf("error %v is not a malformed *DropError", err)
			}
			return
		}
		if len(b) != HeaderLen+int(binary.BigEndian.Uint16(b[30:]))+TagLen || h.Host != binary.BigEndian.Uint16(b[6:]) ||
			h.Seq != binary.BigEndian.Uint64(b[16:]) || h.Seq == 0 || h.Kind < KindData || h.Kind > KindHelloAck || h.Dir > ToHost {
			t.Fatalf("Peek accepted %x as %+v", b, h)
		}
	})
}

func BenchmarkSealOpen(b *testing.B) {
	k := HostKey(testSecret, 2)
	h := Header{Kind: KindData, Dir: ToFabric, Host: 2, Session: 1, Seq: 1, WireLen: 4200}
	payload := pattern(4096, 0)
	buf := make([]byte, 0, MaxFrame)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		f := Seal(buf[:0], h, payload, k)
		if _, _, err := Open(f, k); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzSealOpen: any header Seal accepts opens to itself, and changing
// any one byte of the frame is refused.
func FuzzSealOpen(f *testing.F) {
	f.Add(uint8(1), uint8(0), uint8(0), uint16(1), uint64(1), uint64(1), uint32(64), uint8(0), []byte("payload"), uint16(3), uint8(1))
	f.Add(uint8(3), uint8(1), uint8(255), uint16(65535), uint64(1<<63), uint64(1<<63), uint32(1<<31), uint8(2), make([]byte, 32), uint16(40), uint8(0x80))
	f.Fuzz(func(t *testing.T, kind, dir, plane uint8, host uint16, session, seq uint64, wire uint32, flags uint8, payload []byte, at uint16, flip uint8) {
		if kind < 1 || kind > 3 || dir > 1 || seq == 0 || len(payload) > MaxPayload {
			return
		}
		k := HostKey(testSecret, int(host))
		h := Header{Kind: Kind(kind), Dir: Dir(dir), Plane: plane, Host: host, Session: session, Seq: seq, WireLen: wire, Flags: flags}
		fr := Seal(nil, h, payload, k)
		gh, gp, err := Open(fr, k)
		if err != nil || gh != h || !bytes.Equal(gp, payload) {
			t.Fatalf("round trip: %+v %v, want %+v", gh, err, h)
		}
		if flip == 0 {
			return
		}
		fr[int(at)%len(fr)] ^= flip
		if _, _, err := Open(fr, k); err == nil {
			t.Fatalf("byte %d ^ %#x accepted", int(at)%len(fr), flip)
		}
	})
}

// TestDocVector checks the test vector printed in docs/lab-tunnel.md.
func TestDocVector(t *testing.T) {
	doc, err := os.ReadFile("../../docs/lab-tunnel.md")
	if err != nil {
		t.Fatalf("docs/lab-tunnel.md: %v", err)
	}
	const begin, end = "<!-- vector begin -->", "<!-- vector end -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/lab-tunnel.md has no %s ... %s block", begin, end)
	}
	var hexText strings.Builder
	for _, line := range strings.Split(s[i+len(begin):j], "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "```") {
			continue
		}
		if k := strings.Index(line, "  "); k >= 0 { // "hex  comment"
			line = line[:k]
		}
		hexText.WriteString(strings.ReplaceAll(line, " ", ""))
	}
	want, err := hex.DecodeString(hexText.String())
	if err != nil {
		t.Fatalf("the vector is not hex: %v", err)
	}
	payload := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	h := Header{Kind: KindData, Dir: ToHost, Plane: 7, Host: 258, Session: 0x1122334455667788, Seq: 0x0a0b0c0d0e0f1011, WireLen: 0x01020304, Flags: 0x06}
	got := Seal(nil, h, payload, HostKey([]byte("0123456789abcdef0123456789abcdef"), 258))
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/lab-tunnel.md's vector\n%x\nSeal gives\n%x", want, got)
	}
}
