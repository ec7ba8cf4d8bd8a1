package roce

import (
	"encoding/binary"
	"errors"
)

// RoCEv2 opcodes (RC) this package speaks. Send, Read and atomics are not
// implemented (see the package documentation).
const (
	OpWriteFirst   uint8 = 0x06 // RDMA WRITE First (BTH + RETH + payload)
	OpWriteMiddle  uint8 = 0x07 // RDMA WRITE Middle (BTH + payload)
	OpWriteLast    uint8 = 0x08 // RDMA WRITE Last (BTH + payload)
	OpWriteLastImm uint8 = 0x09 // RDMA WRITE Last with Immediate (BTH + ImmDt + payload)
	OpWriteOnly    uint8 = 0x0A // RDMA WRITE Only (BTH + RETH + payload)
	OpWriteOnlyImm uint8 = 0x0B // RDMA WRITE Only with Immediate (BTH + RETH + ImmDt + payload)
	OpAck          uint8 = 0x11 // ACKNOWLEDGE (BTH + AETH)
	OpCNP          uint8 = 0x81 // RoCEv2 Congestion Notification Packet (BTH + 16 reserved bytes)
)

// Header lengths in bytes.
const (
	BTHLen         = 12
	RETHLen        = 16
	ImmLen         = 4
	AETHLen        = 4
	CNPReservedLen = 16
	ICRCLen        = 4
	// DefaultPKey is the default partition key (full membership).
	DefaultPKey = 0xFFFF
	// PSNMask keeps the 24 bits of a PSN.
	PSNMask = 0xFFFFFF
)

// AETH syndromes (bits 6..5 type; bits 4..0 credit count or NAK code).
const (
	SyndromeACK uint8 = 0x00 // 000xxxxx: ACK, low 5 bits = credit count
	SyndromeRNR uint8 = 0x20 // 001xxxxx: RNR NAK, low 5 bits = timer
	SyndromeNAK uint8 = 0x60 // 011xxxxx: NAK, low 5 bits = NAK code

	// CreditsInvalid is the ACK credit count meaning "no credit
	// information" (RDMA Write consumes no receive WQEs).
	CreditsInvalid uint8 = 0x1F

	NakPSNSeqError   uint8 = 0 // PSN sequence error
	NakInvalidReq    uint8 = 1 // invalid request
	NakRemoteAccess  uint8 = 2 // remote access error
	NakRemoteOpError uint8 = 3 // remote operational error
)

// Decoding errors (preallocated).
var (
	ErrShort    = errors.New("roce: packet shorter than its headers")
	ErrOpcode   = errors.New("roce: unsupported opcode")
	ErrTVer     = errors.New("roce: unsupported BTH transport version")
	ErrLength   = errors.New("roce: wire length inconsistent with headers, pad and ICRC")
	ErrPad      = errors.New("roce: pad count on a packet without payload")
	ErrSyndrome = errors.New("roce: reserved AETH syndrome")
	ErrBuf      = errors.New("roce: buffer too small")
	ErrPayload  = errors.New("roce: stored payload length differs from payload length")
)

// RETH is the RDMA Extended Transport Header.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// AETH is the ACK Extended Transport Header.
type AETH struct {
	Syndrome uint8
	MSN      uint32 // 24 bits
}

// IsNAK reports whether the syndrome is a NAK; Code returns its NAK code.
func (a AETH) IsNAK() bool { return a.Syndrome&0x60 == SyndromeNAK }

// IsACK reports whether the syndrome is a positive ACK.
func (a AETH) IsACK() bool { return a.Syndrome&0x60 == SyndromeACK }

// Code returns the low 5 bits of the syndrome: credit count or NAK code.
func (a AETH) Code() uint8 { return a.Syndrome & 0x1F }

// Header is a decoded BTH with the extension headers its opcode carries.
type Header struct {
	Opcode uint8
	SE     bool  // solicited event
	M      bool  // MigReq
	PadCnt uint8 // set by Encode from the payload length
	TVer   uint8 // always 0
	PKey   uint16
	FECN   bool
	BECN   bool
	DestQP uint32 // 24 bits
	AckReq bool
	PSN    uint32 // 24 bits

	HasRETH bool
	RETH    RETH
	HasImm  bool
	Imm     uint32
	HasAETH bool
	AETH    AETH
}

// Packet is a decoded packet: its headers, where the payload starts and
// how long it is on the wire.
type Packet struct {
	Header
	HdrLen     int    // BTH and extension headers
	PayloadLen int    // payload bytes on the wire, without pad
	Payload    []byte // the stored payload: shorter than PayloadLen (often empty) when elided
}

// Elided reports whether the payload is not (fully) stored.
func (p *Packet) Elided() bool { return len(p.Payload) < p.PayloadLen }

// layout returns which extension headers an opcode carries. rethEvery is
// the IRN extension: every WRITE packet carries a RETH with its own VA.
func layout(op uint8, rethEvery bool) (reth, imm, aeth bool, extra int, ok bool) {
	switch op {
	case OpWriteFirst, OpWriteOnly:
		return true, false, false, 0, true
	case OpWriteMiddle, OpWriteLast:
		return rethEvery, false, false, 0, true
	case OpWriteLastImm:
		return rethEvery, true, false, 0, true
	case OpWriteOnlyImm:
		return true, true, false, 0, true
	case OpAck:
		return false, false, true, 0, true
	case OpCNP:
		return false, false, false, CNPReservedLen, true
	}
	return false, false, false, 0, false
}

// HeaderLen returns the bytes of BTH and extension headers of an opcode, or
// 0 for an unsupported opcode.
func HeaderLen(op uint8, rethEvery bool) int {
	reth, imm, aeth, extra, ok := layout(op, rethEvery)
	if !ok {
		return 0
	}
	n := BTHLen + extra
	if reth {
		n += RETHLen
	}
	if imm {
		n += ImmLen
	}
	if aeth {
		n += AETHLen
	}
	return n
}

// IsWrite reports whether op is one of the RDMA WRITE opcodes.
func IsWrite(op uint8) bool { return op >= OpWriteFirst && op <= OpWriteOnlyImm }

// padOf returns the pad bytes that align a payload to 4 bytes.
func padOf(n int) int { return (4 - n&3) & 3 }

// Encode writes h (its extension headers chosen by h.Opcode; HasRETH,
// HasImm and HasAETH are ignored) followed by the payload, pad and a zero
// ICRC into buf. payloadLen is the payload's length on the wire; payload
// holds its bytes, or is nil to elide them, in which case only the headers
// are written (a packet without payload is always written whole). It
// returns the bytes written and the UDP payload length on the wire.
//
// The ICRC is written as four zero bytes: a placeholder, not the CRC32
// over the invariant fields (the simulated fabric never corrupts a frame
// it delivers, and the receiver does not check it).
func Encode(buf []byte, h *Header, rethEvery bool, payload []byte, payloadLen int) (stored, wireLen int, err error) {
	reth, imm, aeth, extra, ok := layout(h.Opcode, rethEvery)
	if !ok {
		return 0, 0, ErrOpcode
	}
	if payloadLen < 0 || (!IsWrite(h.Opcode) && payloadLen != 0) {
		return 0, 0, ErrLength
	}
	if payload != nil && len(payload) != payloadLen {
		return 0, 0, ErrPayload
	}
	hl := BTHLen + extra
	if reth {
		hl += RETHLen
	}
	if imm {
		hl += ImmLen
	}
	if aeth {
		hl += AETHLen
	}
	pad := padOf(payloadLen)
	wireLen = hl + payloadLen + pad + ICRCLen
	stored = hl
	if payload != nil || payloadLen == 0 {
		stored = wireLen
	}
	if len(buf) < stored {
		return 0, 0, ErrBuf
	}
	b := buf[:stored]
	b[0] = h.Opcode
	b1 := uint8(pad) << 4 // TVer 0
	if h.SE {
		b1 |= 0x80
	}
	if h.M {
		b1 |= 0x40
	}
	b[1] = b1
	binary.BigEndian.PutUint16(b[2:], h.PKey)
	b4 := uint8(0)
	if h.FECN {
		b4 |= 0x80
	}
	if h.BECN {
		b4 |= 0x40
	}
	b[4] = b4
	b[5], b[6], b[7] = byte(h.DestQP>>16), byte(h.DestQP>>8), byte(h.DestQP)
	b[8] = 0
	if h.AckReq {
		b[8] = 0x80
	}
	b[9], b[10], b[11] = byte(h.PSN>>16), byte(h.PSN>>8), byte(h.PSN)
	off := BTHLen
	if reth {
		binary.BigEndian.PutUint64(b[off:], h.RETH.VA)
		binary.BigEndian.PutUint32(b[off+8:], h.RETH.RKey)
		binary.BigEndian.PutUint32(b[off+12:], h.RETH.DMALen)
		off += RETHLen
	}
	if imm {
		binary.BigEndian.PutUint32(b[off:], h.Imm)
		off += ImmLen
	}
	if aeth {
		binary.BigEndian.PutUint32(b[off:], uint32(h.AETH.Syndrome)<<24|h.AETH.MSN&PSNMask)
		off += AETHLen
	}
	if extra > 0 {
		clear(b[off : off+extra])
		off += extra
	}
	if stored == wireLen {
		copy(b[off:], payload)
		clear(b[off+payloadLen:])
	}
	return stored, wireLen, nil
}

// Decode parses a UDP payload (BTH onwards). b holds the stored bytes and
// wireLen the UDP payload length on the wire; b may be shorter than
// wireLen when the payload was elided, but must hold all headers.
// rethEvery selects the IRN layout (a RETH on every WRITE packet). Decode
// never panics; malformed input yields an error.
func (p *Packet) Decode(b []byte, wireLen int, rethEvery bool) error {
	if len(b) < BTHLen {
		return ErrShort
	}
	if wireLen < len(b) {
		return ErrLength
	}
	h := &p.Header
	h.Opcode = b[0]
	reth, imm, aeth, extra, ok := layout(h.Opcode, rethEvery)
	if !ok {
		return ErrOpcode
	}
	h.SE = b[1]&0x80 != 0
	h.M = b[1]&0x40 != 0
	h.PadCnt = b[1] >> 4 & 3
	h.TVer = b[1] & 0xF
	if h.TVer != 0 {
		return ErrTVer
	}
	h.PKey = binary.BigEndian.Uint16(b[2:])
	h.FECN = b[4]&0x80 != 0
	h.BECN = b[4]&0x40 != 0
	h.DestQP = uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7])
	h.AckReq = b[8]&0x80 != 0
	h.PSN = uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
	off := BTHLen
	need := off + extra
	if reth {
		need += RETHLen
	}
	if imm {
		need += ImmLen
	}
	if aeth {
		need += AETHLen
	}
	if len(b) < need {
		return ErrShort
	}
	h.HasRETH, h.HasImm, h.HasAETH = reth, imm, aeth
	h.RETH, h.Imm, h.AETH = RETH{}, 0, AETH{}
	if reth {
		h.RETH.VA = binary.BigEndian.Uint64(b[off:])
		h.RETH.RKey = binary.BigEndian.Uint32(b[off+8:])
		h.RETH.DMALen = binary.BigEndian.Uint32(b[off+12:])
		off += RETHLen
	}
	if imm {
		h.Imm = binary.BigEndian.Uint32(b[off:])
		off += ImmLen
	}
	if aeth {
		v := binary.BigEndian.Uint32(b[off:])
		h.AETH.Syndrome = uint8(v >> 24)
		h.AETH.MSN = v & PSNMask
		if h.AETH.Syndrome&0x80 != 0 || h.AETH.Syndrome&0x60 == 0x40 {
			return ErrSyndrome
		}
		off += AETHLen
	}
	off += extra
	p.HdrLen = off
	pl := wireLen - off - int(h.PadCnt) - ICRCLen
	if pl < 0 {
		return ErrLength
	}
	if !IsWrite(h.Opcode) {
		if pl != 0 {
			return ErrLength
		}
		if h.PadCnt != 0 {
			return ErrPad
		}
	}
	if pl == 0 && h.PadCnt != 0 {
		return ErrPad
	}
	if (pl+int(h.PadCnt))&3 != 0 {
		return ErrPad // payload and pad must fill whole 4-byte words: wire length a multiple of 4
	}
	p.PayloadLen = pl
	end := off + pl
	if end > len(b) {
		end = len(b)
	}
	p.Payload = b[off:end]
	return nil
}

// Decode is Packet.Decode returning the packet by value.
func Decode(b []byte, wireLen int, rethEvery bool) (Packet, error) {
	var p Packet
	err := p.Decode(b, wireLen, rethEvery)
	return p, err
}
