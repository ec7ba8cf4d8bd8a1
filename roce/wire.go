package roce

import (
	"errors"

	"github.com/vcluster/vcluster/ib"
)

// RoCEv2 opcodes (RC) this package speaks. Send, Read and atomics are not
// implemented (see the package documentation). All but the CNP are
// InfiniBand's RC opcodes (package ib).
const (
	OpWriteFirst   = ib.OpRCWriteFirst   // RDMA WRITE First (BTH + RETH + payload)
	OpWriteMiddle  = ib.OpRCWriteMiddle  // RDMA WRITE Middle (BTH + payload)
	OpWriteLast    = ib.OpRCWriteLast    // RDMA WRITE Last (BTH + payload)
	OpWriteLastImm = ib.OpRCWriteLastImm // RDMA WRITE Last with Immediate (BTH + ImmDt + payload)
	OpWriteOnly    = ib.OpRCWriteOnly    // RDMA WRITE Only (BTH + RETH + payload)
	OpWriteOnlyImm = ib.OpRCWriteOnlyImm // RDMA WRITE Only with Immediate (BTH + RETH + ImmDt + payload)
	OpAck          = ib.OpRCAck          // ACKNOWLEDGE (BTH + AETH)

	OpCNP uint8 = 0x81 // RoCEv2 Congestion Notification Packet (BTH + 16 reserved bytes)
)

// Header lengths in bytes.
const (
	BTHLen         = ib.BTHLen
	RETHLen        = ib.RETHLen
	ImmLen         = ib.ImmDtLen
	AETHLen        = ib.AETHLen
	CNPReservedLen = 16
	ICRCLen        = ib.ICRCLen
	// DefaultPKey is the default partition key (full membership).
	DefaultPKey = 0xFFFF
	// PSNMask keeps the 24 bits of a PSN.
	PSNMask = ib.PSNMask
)

// AETH syndromes (bits 6..5 type; bits 4..0 credit count or NAK code):
// InfiniBand's, from package ib.
const (
	SyndromeACK = ib.SyndromeACK // 000xxxxx: ACK, low 5 bits = credit count
	SyndromeRNR = ib.SyndromeRNR // 001xxxxx: RNR NAK, low 5 bits = timer
	SyndromeNAK = ib.SyndromeNAK // 011xxxxx: NAK, low 5 bits = NAK code

	// CreditsInvalid is the ACK credit count meaning "no credit
	// information" (RDMA Write consumes no receive WQEs).
	CreditsInvalid = ib.CreditsInvalid

	NakPSNSeqError   = ib.NakPSNSeqError   // PSN sequence error
	NakInvalidReq    = ib.NakInvalidReq    // invalid request
	NakRemoteAccess  = ib.NakRemoteAccess  // remote access error
	NakRemoteOpError = ib.NakRemoteOpError // remote operational error
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
type RETH = ib.RETH

// AETH is the ACK Extended Transport Header (IsACK, IsNAK and Code classify
// its syndrome).
type AETH = ib.AETH

// Header is a decoded BTH with the extension headers its opcode carries.
// Its BTH fields are those of ib.BTH that RoCEv2 uses.
type Header struct {
	// BTH is the base transport header; RoCEv2 uses Opcode, SE, MigReq,
	// PadCnt (set by Encode from the payload length), TVer (always 0),
	// PKey, FECN, BECN, DestQP, AckReq and PSN. Decode zeroes the reserved
	// bits (Resv6a, Resv7: Rtx, TS, Resv5), which receivers ignore.
	ib.BTH

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

// putBTH writes the BTH of h with pad count pad (TVer 0, reserved bits 0)
// into b, which holds BTHLen bytes. It assigns fields rather than build a
// composite literal, which the compiler would make on the stack and copy.
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
	// The lengths are checked above: no Put below can fail.
	h.PadCnt = uint8(pad)
	h.BTH.Put(b)
	off := BTHLen
	if reth {
		h.RETH.Put(b[off:])
		off += RETHLen
	}
	if imm {
		ib.ImmDt(h.Imm).Put(b[off:])
		off += ImmLen
	}
	if aeth {
		h.AETH.Put(b[off:])
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
	h := &p.Header
	if h.BTH.Parse(b) != nil {
		return ErrShort
	}
	if wireLen < len(b) {
		return ErrLength
	}
	reth, imm, aeth, extra, ok := layout(h.Opcode, rethEvery)
	if !ok {
		return ErrOpcode
	}
	if h.TVer != 0 {
		return ErrTVer
	}
	h.Resv6a, h.Rtx, h.TS, h.Resv5 = 0, false, false, 0 // reserved: ignored
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
	// len(b) >= need: no Parse below can fail.
	if reth {
		h.RETH.Parse(b[off:])
		off += RETHLen
	}
	if imm {
		var d ib.ImmDt
		d.Parse(b[off:])
		h.Imm = uint32(d)
		off += ImmLen
	}
	if aeth {
		h.AETH.Parse(b[off:])
		if !h.AETH.Valid() {
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
