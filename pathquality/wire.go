package pathquality

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The wire format of an advertisement is a BGP-4 UPDATE message (RFC
// 4271 §4.3) for one IPv6 prefix (MP_REACH_NLRI, RFC 4760) whose path
// bandwidth rides in a Link Bandwidth extended community
// (draft-ietf-idr-link-bandwidth: type 0x40, subtype 0x04, a 2-octet AS
// and an IEEE 754 float32 in bytes per second) — the stand-in for the
// seed's Path Bandwidth Extended Community. docs/pathquality.md has the
// byte layout. 4-octet AS numbers are assumed negotiated (RFC 6793), so
// AS_PATH carries 4-octet ASes and the community's 2-octet AS is AS_TRANS.

// BGP constants used by the encoding.
const (
	bgpMarkerLen  = 16
	bgpHeaderLen  = 19
	bgpTypeUpdate = 2
	bgpMaxLen     = 4096

	attrOrigin       = 1
	attrASPath       = 2
	attrMPReachNLRI  = 14
	attrExtCommunity = 16

	flagOptional   = 0x80
	flagTransitive = 0x40
	flagPartial    = 0x20
	flagExtLen     = 0x10

	asSequence  = 2
	afiIPv6     = 2
	safiUnicast = 1

	extTypeTwoOctetASNonTransitive = 0x40
	extSubtypeLinkBandwidth        = 0x04

	// ASTrans is RFC 6793's AS_TRANS, the 2-octet stand-in for a 4-octet AS.
	ASTrans = 23456
	// ASBase + a switch's device ID is its AS (private 4-octet range).
	ASBase = 4200000000
)

// Origin values (ORIGIN attribute).
const (
	OriginIGP        = 0
	OriginEGP        = 1
	OriginIncomplete = 2
)

// Update is one advertisement: a path bandwidth for one IPv6 prefix.
type Update struct {
	Origin    uint8
	ASPath    []uint32 // AS_SEQUENCE, sender first (1..255 ASes)
	NextHop   [16]byte // the sending switch's address (its uSID locator), or ::
	Prefix    [16]byte // bits beyond PrefixLen are zero
	PrefixLen uint8    // 0..128
	// CommunityAS is the link bandwidth community's 2-octet AS (ASTrans
	// for a 4-octet sender).
	CommunityAS uint16
	// Bandwidth is the path bandwidth in bytes per second, as on the wire
	// (finite, ≥ 0).
	Bandwidth float32
}

// Gbps returns the bandwidth in Gb/s (bytes/s × 8 / 1e9).
func (u Update) Gbps() float64 { return float64(u.Bandwidth) * 8 / 1e9 }

// BandwidthFromGbps converts Gb/s to the community's bytes per second.
func BandwidthFromGbps(g float64) float32 { return float32(g * 1e9 / 8) }

// EncodeUpdate encodes u as a BGP UPDATE message. u must be valid (see
// DecodeUpdate's checks); an invalid u panics, since only this package
// builds updates.
func EncodeUpdate(u Update) []byte {
	if err := u.check(); err != nil {
		panic("pathquality: EncodeUpdate: " + err.Error())
	}
	pb := prefixBytes(u.PrefixLen)
	asLen := 2 + 4*len(u.ASPath)
	mpLen := 2 + 1 + 1 + 16 + 1 + 1 + pb
	attrs := attrHeaderLen(1) + 1 + attrHeaderLen(asLen) + asLen + attrHeaderLen(mpLen) + mpLen + attrHeaderLen(8) + 8
	n := bgpHeaderLen + 2 + 2 + attrs
	b := make([]byte, 0, n)
	for range bgpMarkerLen {
		b = append(b, 0xff)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, bgpTypeUpdate)
	b = binary.BigEndian.AppendUint16(b, 0) // withdrawn routes length
	b = binary.BigEndian.AppendUint16(b, uint16(attrs))
	b = appendAttr(b, flagTransitive, attrOrigin, 1)
	b = append(b, u.Origin)
	b = appendAttr(b, flagTransitive, attrASPath, asLen)
	b = append(b, asSequence, byte(len(u.ASPath)))
	for _, as := range u.ASPath {
		b = binary.BigEndian.AppendUint32(b, as)
	}
	b = appendAttr(b, flagOptional, attrMPReachNLRI, mpLen)
	b = binary.BigEndian.AppendUint16(b, afiIPv6)
	b = append(b, safiUnicast, 16)
	b = append(b, u.NextHop[:]...)
	b = append(b, 0, u.PrefixLen) // reserved (SNPA count), then the NLRI
	b = append(b, u.Prefix[:pb]...)
	b = appendAttr(b, flagOptional|flagTransitive, attrExtCommunity, 8)
	b = append(b, extTypeTwoOctetASNonTransitive, extSubtypeLinkBandwidth)
	b = binary.BigEndian.AppendUint16(b, u.CommunityAS)
	b = binary.BigEndian.AppendUint32(b, math.Float32bits(u.Bandwidth))
	return b
}

// attrHeaderLen is an attribute header's size: 4 bytes with the extended
// length a value over 255 bytes needs, else 3.
func attrHeaderLen(n int) int {
	if n > 255 {
		return 4
	}
	return 3
}

// appendAttr appends an attribute header for a value of n bytes.
func appendAttr(b []byte, flags, typ uint8, n int) []byte {
	if n > 255 {
		return binary.BigEndian.AppendUint16(append(b, flags|flagExtLen, typ), uint16(n))
	}
	return append(b, flags, typ, byte(n))
}

func prefixBytes(bits uint8) int { return (int(bits) + 7) / 8 }

func (u Update) check() error {
	switch {
	case u.Origin > OriginIncomplete:
		return fmt.Errorf("origin %d, must be 0..2", u.Origin)
	case len(u.ASPath) < 1 || len(u.ASPath) > 255:
		return fmt.Errorf("AS_PATH of %d ASes, must be 1..255", len(u.ASPath))
	case u.PrefixLen > 128:
		return fmt.Errorf("prefix length %d, must be 0..128", u.PrefixLen)
	case math.IsNaN(float64(u.Bandwidth)) || math.IsInf(float64(u.Bandwidth), 0) || math.Signbit(float64(u.Bandwidth)):
		return fmt.Errorf("link bandwidth %v, must be finite and ≥ 0", u.Bandwidth)
	}
	pb := prefixBytes(u.PrefixLen)
	for i := pb; i < 16; i++ {
		if u.Prefix[i] != 0 {
			return errors.New("prefix has bits set beyond its length")
		}
	}
	if r := u.PrefixLen % 8; r != 0 && u.Prefix[pb-1]&(0xff>>r) != 0 {
		return errors.New("prefix has bits set beyond its length")
	}
	return nil
}

// DecodeUpdate decodes a BGP UPDATE message as EncodeUpdate writes it:
// no withdrawn routes, no IPv4 NLRI, and exactly the attributes ORIGIN,
// AS_PATH (one AS_SEQUENCE of 4-octet ASes), MP_REACH_NLRI (IPv6 unicast,
// a 16-byte next hop, one prefix) and EXTENDED_COMMUNITIES (one link
// bandwidth community), in any order, with or without extended lengths.
// Anything else is an error; it never panics.
func DecodeUpdate(b []byte) (Update, error) {
	var u Update
	if len(b) < bgpHeaderLen {
		return u, errors.New("bgp: short message")
	}
	for i := range bgpMarkerLen {
		if b[i] != 0xff {
			return u, errors.New("bgp: bad marker")
		}
	}
	n := int(binary.BigEndian.Uint16(b[16:]))
	if n != len(b) || n > bgpMaxLen {
		return u, fmt.Errorf("bgp: length field %d for a %d-byte message", n, len(b))
	}
	if b[18] != bgpTypeUpdate {
		return u, fmt.Errorf("bgp: message type %d, want UPDATE (2)", b[18])
	}
	body := b[bgpHeaderLen:]
	if len(body) < 4 {
		return u, errors.New("bgp: short UPDATE")
	}
	if w := binary.BigEndian.Uint16(body); w != 0 {
		return u, errors.New("bgp: withdrawn routes not supported")
	}
	al := int(binary.BigEndian.Uint16(body[2:]))
	attrs := body[4:]
	if al != len(attrs) {
		return u, errors.New("bgp: path attributes length disagrees with the message (IPv4 NLRI not supported)")
	}
	var seen uint32
	for len(attrs) > 0 {
		if len(attrs) < 3 {
			return u, errors.New("bgp: truncated attribute header")
		}
		flags, typ := attrs[0], attrs[1]
		var l, h int
		if flags&flagExtLen != 0 {
			if len(attrs) < 4 {
				return u, errors.New("bgp: truncated attribute header")
			}
			l, h = int(binary.BigEndian.Uint16(attrs[2:])), 4
		} else {
			l, h = int(attrs[2]), 3
		}
		if len(attrs) < h+l {
			return u, fmt.Errorf("bgp: attribute %d overruns the message", typ)
		}
		v := attrs[h : h+l]
		attrs = attrs[h+l:]
		if typ < 32 && seen&(1<<typ) != 0 {
			return u, fmt.Errorf("bgp: attribute %d repeated", typ)
		}
		var err error
		switch typ {
		case attrOrigin:
			err = u.decodeOrigin(flags, v)
		case attrASPath:
			err = u.decodeASPath(flags, v)
		case attrMPReachNLRI:
			err = u.decodeMPReach(flags, v)
		case attrExtCommunity:
			err = u.decodeExtCommunity(flags, v)
		default:
			err = fmt.Errorf("bgp: unsupported attribute %d", typ)
		}
		if err != nil {
			return Update{}, err
		}
		seen |= 1 << typ
	}
	const all = 1<<attrOrigin | 1<<attrASPath | 1<<attrMPReachNLRI | 1<<attrExtCommunity
	if seen != all {
		return Update{}, errors.New("bgp: UPDATE lacks ORIGIN, AS_PATH, MP_REACH_NLRI or the link bandwidth community")
	}
	if err := u.check(); err != nil {
		return Update{}, errors.New("bgp: " + err.Error())
	}
	return u, nil
}

// wellKnown checks a well-known attribute's flags (transitive, not
// optional, not partial).
func wellKnown(flags uint8) bool {
	return flags&(flagOptional|flagTransitive|flagPartial) == flagTransitive
}

func (u *Update) decodeOrigin(flags uint8, v []byte) error {
	if !wellKnown(flags) || len(v) != 1 || v[0] > OriginIncomplete {
		return errors.New("bgp: malformed ORIGIN")
	}
	u.Origin = v[0]
	return nil
}

func (u *Update) decodeASPath(flags uint8, v []byte) error {
	if !wellKnown(flags) || len(v) < 2 || v[0] != asSequence || v[1] == 0 || len(v) != 2+4*int(v[1]) {
		return errors.New("bgp: malformed AS_PATH (want one AS_SEQUENCE of 4-octet ASes)")
	}
	u.ASPath = make([]uint32, v[1])
	for i := range u.ASPath {
		u.ASPath[i] = binary.BigEndian.Uint32(v[2+4*i:])
	}
	return nil
}

func (u *Update) decodeMPReach(flags uint8, v []byte) error {
	if flags&(flagOptional|flagTransitive) != flagOptional {
		return errors.New("bgp: MP_REACH_NLRI flags")
	}
	if len(v) < 2+1+1+16+1+1 {
		return errors.New("bgp: short MP_REACH_NLRI")
	}
	if binary.BigEndian.Uint16(v) != afiIPv6 || v[2] != safiUnicast {
		return errors.New("bgp: MP_REACH_NLRI is not IPv6 unicast")
	}
	if v[3] != 16 {
		return fmt.Errorf("bgp: next hop of %d bytes, want 16", v[3])
	}
	copy(u.NextHop[:], v[4:20])
	if v[20] != 0 {
		return errors.New("bgp: MP_REACH_NLRI reserved byte set")
	}
	bits := v[21]
	if bits > 128 {
		return fmt.Errorf("bgp: prefix length %d", bits)
	}
	pb := prefixBytes(bits)
	if len(v) != 22+pb {
		return errors.New("bgp: MP_REACH_NLRI must carry exactly one prefix")
	}
	u.PrefixLen = bits
	copy(u.Prefix[:], v[22:])
	return nil
}

func (u *Update) decodeExtCommunity(flags uint8, v []byte) error {
	if flags&(flagOptional|flagTransitive) != flagOptional|flagTransitive {
		return errors.New("bgp: EXTENDED_COMMUNITIES flags")
	}
	if len(v) != 8 || v[0] != extTypeTwoOctetASNonTransitive || v[1] != extSubtypeLinkBandwidth {
		return errors.New("bgp: want exactly one link bandwidth extended community")
	}
	u.CommunityAS = binary.BigEndian.Uint16(v[2:])
	u.Bandwidth = math.Float32frombits(binary.BigEndian.Uint32(v[4:]))
	return nil
}
