package tunnel

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"strconv"
	"sync"
)

// Kind is what a frame carries.
type Kind uint8

const (
	KindData     Kind = 1 // an Ethernet frame, from the destination MAC on, no FCS
	KindHello    Kind = 2 // a host's 32-byte labspec digest
	KindHelloAck Kind = 3 // the fabric's 32-byte labspec digest
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindHello:
		return "hello"
	case KindHelloAck:
		return "hello-ack"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Dir is which way a frame travels; a receiver accepts only its own
// direction, so a frame reflected back at its sender is dropped.
type Dir uint8

const (
	ToFabric Dir = 0 // host → fabric
	ToHost   Dir = 1 // fabric → host
)

func (d Dir) String() string {
	switch d {
	case ToFabric:
		return "to-fabric"
	case ToHost:
		return "to-host"
	}
	return "dir(" + strconv.Itoa(int(d)) + ")"
}

const (
	Magic   = 0x5643 // "VC"
	Version = 1

	HeaderLen = 32
	TagLen    = 16
	// MaxFrame is the largest UDP payload IPv4 can carry (65535 minus
	// the 20-byte IPv4 and 8-byte UDP headers); IPv6 could carry 20
	// bytes more, but a frame must fit either.
	MaxFrame = 65507
	// MaxPayload is the largest payload a frame carries: MaxFrame less
	// header and tag (65459). Its 16-bit length field could say more,
	// but no such datagram could be sent.
	MaxPayload = MaxFrame - HeaderLen - TagLen

	// SecretMin is the minimum length of a lab secret, in bytes after
	// trimming whitespace.
	SecretMin = 16
)

// Header is a frame's fixed part (without magic, version, reserved byte
// and payload length, which Seal writes and Peek checks).
type Header struct {
	Kind    Kind
	Dir     Dir
	Plane   uint8
	Host    uint16
	Session uint64 // the sender's start time, Unix ns
	Seq     uint64 // per (session, host, plane, dir), from 1
	WireLen uint32 // the frame's wire length (FCS, elided payload included)
	Flags   uint8  // the packet's flags (trimmed, elided), passed through
}

// Key is one host's derived frame key, used for both directions of that
// host (the dir byte in the tagged header separates them). It caches two
// HMAC states, one for sealing and one for opening, each behind its own
// mutex: a Key is safe for concurrent use, and the loop goroutine
// sealing while a reader goroutine opens never contend.
type Key struct {
	host uint16
	seal macState
	open macState
}

type macState struct {
	mu  sync.Mutex
	h   hash.Hash
	sum [sha256.Size]byte
}

// keyLabel is the HMAC message a host key is derived from, followed by
// the host id in decimal.
const keyLabel = "vcluster-lab-tunnel-v1/host/"

// HostKey derives host's key: HMAC-SHA256(secret, keyLabel + decimal host).
// host must be a frame's host id, 0..65535 (a caller's bug otherwise: it
// panics).
func HostKey(secret []byte, host int) *Key {
	if host < 0 || host > 0xffff {
		panic("tunnel: HostKey: host " + strconv.Itoa(host) + " outside 0..65535")
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(keyLabel + strconv.Itoa(host)))
	derived := m.Sum(nil)
	k := &Key{host: uint16(host)}
	k.seal.h = hmac.New(sha256.New, derived)
	k.open.h = hmac.New(sha256.New, derived)
	return k
}

// Host is the host id the key was derived for.
func (k *Key) Host() uint16 { return k.host }

// tag writes the truncated HMAC of msg into out (TagLen bytes).
func (s *macState) tag(msg, out []byte) {
	s.mu.Lock()
	s.h.Reset()
	s.h.Write(msg)
	sum := s.h.Sum(s.sum[:0])
	copy(out, sum[:TagLen])
	s.mu.Unlock()
}

// verify reports whether tag is msg's truncated HMAC, in constant time.
func (s *macState) verify(msg, tag []byte) bool {
	s.mu.Lock()
	s.h.Reset()
	s.h.Write(msg)
	sum := s.h.Sum(s.sum[:0])
	ok := subtle.ConstantTimeCompare(sum[:TagLen], tag) == 1
	s.mu.Unlock()
	return ok
}

// LoadSecret reads a lab secret file: its content, whitespace trimmed,
// is the secret (hex text is fine: the text's bytes are the secret). It
// must be at least SecretMin bytes.
func LoadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tunnel: lab secret: %w", err)
	}
	s := bytes.TrimSpace(b)
	if len(s) < SecretMin {
		return nil, fmt.Errorf("tunnel: lab secret %s: %d bytes after trimming whitespace, need at least %d", path, len(s), SecretMin)
	}
	return s, nil
}

// NewSecret returns a fresh secret file's content: 32 random bytes as 64
// hex characters and a newline.
func NewSecret() ([]byte, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("tunnel: new secret: %w", err)
	}
	out := make([]byte, hex.EncodedLen(len(raw))+1)
	hex.Encode(out, raw[:])
	out[len(out)-1] = '\n'
	return out, nil
}

// Seal appends the whole frame (header, payload, tag under k) to dst and
// returns it; it allocates nothing when dst has room for
// HeaderLen+len(payload)+TagLen more bytes. It panics on a caller's bug:
// a payload longer than MaxPayload, an unknown kind or direction.
func Seal(dst []byte, h Header, payload []byte, k *Key) []byte {
	if len(payload) > MaxPayload {
		panic("tunnel: Seal: payload of " + strconv.Itoa(len(payload)) + " bytes, max " + strconv.Itoa(MaxPayload))
	}
	if h.Kind < KindData || h.Kind > KindHelloAck || h.Dir > ToHost {
		panic("tunnel: Seal: invalid " + h.Kind.String() + " " + h.Dir.String())
	}
	n := len(payload)
	start := len(dst)
	total := HeaderLen + n + TagLen
	if cap(dst)-start < total {
		grown := make([]byte, start, start+total)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+total]
	f := dst[start:]
	binary.BigEndian.PutUint16(f[0:], Magic)
	f[2] = Version
	f[3] = byte(h.Kind)
	f[4] = byte(h.Dir)
	f[5] = h.Plane
	binary.BigEndian.PutUint16(f[6:], h.Host)
	binary.BigEndian.PutUint64(f[8:], h.Session)
	binary.BigEndian.PutUint64(f[16:], h.Seq)
	binary.BigEndian.PutUint32(f[24:], h.WireLen)
	f[28] = h.Flags
	f[29] = 0
	binary.BigEndian.PutUint16(f[30:], uint16(n))
	copy(f[HeaderLen:], payload)
	k.seal.tag(f[:HeaderLen+n], f[HeaderLen+n:])
	return dst
}

// The drop errors of Peek and Open. They are shared values (no
// allocation on a drop path an attacker can drive): compare by Reason,
// never modify them.
var (
	errShort    = &DropError{Malformed, "shorter than header and tag"}
	errLong     = &DropError{Malformed, "longer than MaxFrame"}
	errMagic    = &DropError{Malformed, "bad magic"}
	errVersion  = &DropError{Malformed, "unknown version"}
	errKind     = &DropError{Malformed, "unknown kind"}
	errDir      = &DropError{Malformed, "unknown direction"}
	errReserved = &DropError{Malformed, "reserved byte not zero"}
	errLength   = &DropError{Malformed, "payload length does not match the datagram"}
	errSeqZero  = &DropError{Malformed, "sequence number 0"}
	errTag      = &DropError{BadTag, "tag does not verify"}
	errKeyHost  = &DropError{BadTag, "key is for another host"}
	errWrongDir = &DropError{WrongDir, "frame travels the other way"}
	errUnknown  = &DropError{UnknownHost, "no key for this host id"}
	errReplay   = &DropError{Replay, "sequence number already seen"}
	errStale    = &DropError{Stale, "older session or sequence number below the window"}
)

// Peek parses and checks b's header without authenticating it (to choose
// the key by host id): the magic, version, kind, direction, reserved
// byte, a non-zero seq and that the payload length matches len(b).
// Errors are *DropError (Malformed).
func Peek(b []byte) (Header, error) {
	if len(b) < HeaderLen+TagLen {
		return Header{}, errShort
	}
	if len(b) > MaxFrame {
		return Header{}, errLong
	}
	if binary.BigEndian.Uint16(b[0:]) != Magic {
		return Header{}, errMagic
	}
	if b[2] != Version {
		return Header{}, errVersion
	}
	h := Header{
		Kind:    Kind(b[3]),
		Dir:     Dir(b[4]),
		Plane:   b[5],
		Host:    binary.BigEndian.Uint16(b[6:]),
		Session: binary.BigEndian.Uint64(b[8:]),
		Seq:     binary.BigEndian.Uint64(b[16:]),
		WireLen: binary.BigEndian.Uint32(b[24:]),
		Flags:   b[28],
	}
	if h.Kind < KindData || h.Kind > KindHelloAck {
		return Header{}, errKind
	}
	if h.Dir > ToHost {
		return Header{}, errDir
	}
	if b[29] != 0 {
		return Header{}, errReserved
	}
	if int(binary.BigEndian.Uint16(b[30:])) != len(b)-HeaderLen-TagLen {
		return Header{}, errLength
	}
	if h.Seq == 0 {
		return Header{}, errSeqZero
	}
	return h, nil
}

// Open checks b as Peek does and verifies its tag under k (a key derived
// for another host than the header's is BadTag). It returns the header
// and the payload, which aliases b. It checks neither the direction nor
// the replay window: Receiver does, or the caller with Window. Errors are
// *DropError (Malformed or BadTag).
func Open(b []byte, k *Key) (Header, []byte, error) {
	h, err := Peek(b)
	if err != nil {
		return Header{}, nil, err
	}
	if h.Host != k.host {
		return Header{}, nil, errKeyHost
	}
	n := len(b) - TagLen
	if !k.open.verify(b[:n], b[n:]) {
		return Header{}, nil, errTag
	}
	return h, b[HeaderLen:n], nil
}
