package ib

import (
	"encoding/binary"
	"errors"
)

// The codec below owns the byte layout of the InfiniBand base transport
// header (BTH) and of the RETH, AETH and ImmDt extension headers, which
// RoCEv2 and MRC both carry. It does not know which opcode carries which
// extension header, nor what a transport does with a field: RoCE's layout
// table and MRC's own headers (METH, TSETH, SETH …) stay in their packages,
// and so does the policy of which reserved bits a receiver rejects.
//
// Every Put and Parse checks the slice length first and never panics; the
// only errors are the two preallocated below. Nothing allocates.

// Header lengths in bytes (IBA 1.4 vol. 1 §9.2–9.3; RoCEv2 Annex A17).
const (
	BTHLen   = 12 // base transport header
	RETHLen  = 16 // RDMA extended transport header
	AETHLen  = 4  // ACK extended transport header
	ImmDtLen = 4  // immediate data extended transport header
	ICRCLen  = 4  // invariant CRC trailer
)

// RC opcodes (BTH byte 0, IBA Table 38: transport 000 "Reliable
// Connection") that RoCEv2 and the IB verbs layer speak. Vendor opcodes
// (MRC's 0xC0..0xDF, RoCEv2's CNP 0x81) live with their transports.
const (
	OpRCWriteFirst   uint8 = 0x06 // RDMA WRITE First: BTH + RETH + payload
	OpRCWriteMiddle  uint8 = 0x07 // RDMA WRITE Middle: BTH + payload
	OpRCWriteLast    uint8 = 0x08 // RDMA WRITE Last: BTH + payload
	OpRCWriteLastImm uint8 = 0x09 // RDMA WRITE Last with Immediate: BTH + ImmDt + payload
	OpRCWriteOnly    uint8 = 0x0A // RDMA WRITE Only: BTH + RETH + payload
	OpRCWriteOnlyImm uint8 = 0x0B // RDMA WRITE Only with Immediate: BTH + RETH + ImmDt + payload
	OpRCAck          uint8 = 0x11 // Acknowledge: BTH + AETH
)

// Codec errors (preallocated: Put and Parse never allocate).
var (
	ErrShort  = errors.New("ib: header truncated")
	ErrBuffer = errors.New("ib: buffer too small for header")
)

// PutUint24 writes the low 24 bits of v big-endian into b[0:3] (PSNs, QPNs,
// MSNs). b must hold 3 bytes.
func PutUint24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

// Uint24 reads a big-endian 24-bit value from b[0:3]. b must hold 3 bytes.
func Uint24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

// BTH is the base transport header. Every one of its 96 bits is a field
// here, so Parse followed by Put reproduces the bytes exactly; which bits a
// receiver must find zero is the transport's rule, not the codec's.
//
//	byte 0      OpCode
//	byte 1      SE(7) M(6) PadCnt(5..4) TVer(3..0)
//	bytes 2..3  P_Key
//	byte 4      FECN(7) BECN(6) Resv6a(5..0)   (IBA: Resv8a)
//	bytes 5..7  DestQP
//	byte 8      A(7) Resv7(6..0)               (MRC: A rtx TS Resv5)
//	bytes 9..11 PSN
type BTH struct {
	Opcode uint8  // byte 0: OpCode (IBA)
	SE     bool   // byte 1 bit 7: Solicited Event (IBA "SE")
	MigReq bool   // byte 1 bit 6: migration request (IBA "M")
	PadCnt uint8  // byte 1 bits 5..4: pad bytes after the payload (IBA "PadCnt")
	TVer   uint8  // byte 1 bits 3..0: transport header version, 0 (IBA "TVer")
	PKey   uint16 // bytes 2..3: partition key (IBA "P_Key")
	FECN   bool   // byte 4 bit 7: forward ECN (RoCEv2 Annex A17 "FECN"; IBA Resv8a)
	BECN   bool   // byte 4 bit 6: backward ECN, set on CNPs (RoCEv2 Annex A17 "BECN")
	Resv6a uint8  // byte 4 bits 5..0: reserved, 0 (RoCEv2 Annex A17 "Resv6a")
	DestQP uint32 // bytes 5..7: destination QP, 24 bits (IBA "DestQP")
	AckReq bool   // byte 8 bit 7: acknowledge request (IBA "A")
	Rtx    bool   // byte 8 bit 6: retransmission (MRC; IBA Resv7 bit 6)
	TS     bool   // byte 8 bit 5: a TSETH follows the METH (MRC; IBA Resv7 bit 5)
	Resv5  uint8  // byte 8 bits 4..0: reserved, 0 (the rest of IBA "Resv7")
	PSN    uint32 // bytes 9..11: packet sequence number, 24 bits (IBA "PSN")
}

// Put writes h into b[:BTHLen]; fields wider than their bits are masked.
// It assembles two big-endian words (bytes 0..7 and 8..11) rather than
// twelve bytes: this runs once per packet sent.
func (h *BTH) Put(b []byte) error {
	if len(b) < BTHLen {
		return ErrBuffer
	}
	// Each flag ORs its bit in under a branch: a predictable branch per flag
	// is three instructions, fewer than choosing between 1<<n and 0 or
	// converting the bool (BenchmarkRoCEPacket, BenchmarkMRCPacket).
	b1 := (h.PadCnt&3)<<4 | h.TVer&0xF
	if h.SE {
		b1 |= 0x80
	}
	if h.MigReq {
		b1 |= 0x40
	}
	b4 := h.Resv6a & 0x3F
	if h.FECN {
		b4 |= 0x80
	}
	if h.BECN {
		b4 |= 0x40
	}
	b8 := h.Resv5 & 0x1F
	if h.AckReq {
		b8 |= 0x80
	}
	if h.Rtx {
		b8 |= 0x40
	}
	if h.TS {
		b8 |= 0x20
	}
	binary.BigEndian.PutUint64(b, uint64(h.Opcode)<<56|uint64(b1)<<48|uint64(h.PKey)<<32|
		uint64(b4)<<24|uint64(h.DestQP&PSNMask))
	binary.BigEndian.PutUint32(b[8:], uint32(b8)<<24|h.PSN&PSNMask)
	return nil
}

// Parse reads the BTH at the start of b into h. It fails only when b is
// shorter than BTHLen, leaving h unchanged. Like Put it reads two words;
// it stores field by field (a composite literal would be built on the
// stack and copied, a wide load over narrow stores).
func (h *BTH) Parse(b []byte) error {
	if len(b) < BTHLen {
		return ErrShort
	}
	w := binary.BigEndian.Uint64(b)
	x := binary.BigEndian.Uint32(b[8:])
	b1, b4, b8 := uint8(w>>48), uint8(w>>24), uint8(x>>24)
	h.Opcode = uint8(w >> 56)
	h.SE = b1&0x80 != 0
	h.MigReq = b1&0x40 != 0
	h.PadCnt = b1 >> 4 & 3
	h.TVer = b1 & 0xF
	h.PKey = uint16(w >> 32)
	h.FECN = b4&0x80 != 0
	h.BECN = b4&0x40 != 0
	h.Resv6a = b4 & 0x3F
	h.DestQP = uint32(w) & PSNMask
	h.AckReq = b8&0x80 != 0
	h.Rtx = b8&0x40 != 0
	h.TS = b8&0x20 != 0
	h.Resv5 = b8 & 0x1F
	h.PSN = x & PSNMask
	return nil
}

// RETH is the RDMA extended transport header: the remote buffer a WRITE
// targets.
//
//	bytes 0..7 VA, 8..11 R_Key, 12..15 DMA Length
type RETH struct {
	VA     uint64 // bytes 0..7: remote virtual address (IBA "VA")
	RKey   uint32 // bytes 8..11: remote key (IBA "R_Key")
	DMALen uint32 // bytes 12..15: length of the whole message (IBA "DMA Length")
}

// Put writes r into b[:RETHLen].
func (r *RETH) Put(b []byte) error {
	if len(b) < RETHLen {
		return ErrBuffer
	}
	b = b[:RETHLen]
	binary.BigEndian.PutUint64(b, r.VA)
	binary.BigEndian.PutUint32(b[8:], r.RKey)
	binary.BigEndian.PutUint32(b[12:], r.DMALen)
	return nil
}

// Parse reads the RETH at the start of b into r (unchanged on error).
func (r *RETH) Parse(b []byte) error {
	if len(b) < RETHLen {
		return ErrShort
	}
	b = b[:RETHLen]
	r.VA = binary.BigEndian.Uint64(b)
	r.RKey = binary.BigEndian.Uint32(b[8:])
	r.DMALen = binary.BigEndian.Uint32(b[12:])
	return nil
}

// AETH syndromes (IBA §9.7.5.1.1): bit 7 reserved, bits 6..5 the class,
// bits 4..0 a credit count (ACK), timer (RNR NAK) or NAK code.
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

	syndromeClass    uint8 = 0x60
	syndromeReserved uint8 = 0x40 // class 10: reserved
)

// AETH is the ACK extended transport header.
//
//	byte 0 syndrome, bytes 1..3 MSN (24 bits)
type AETH struct {
	Syndrome uint8  // byte 0: ACK/NAK class and code (IBA "Syndrome")
	MSN      uint32 // bytes 1..3: message sequence number, 24 bits (IBA "MSN")
}

// IsACK reports whether the syndrome is a positive ACK.
func (a AETH) IsACK() bool { return a.Syndrome&syndromeClass == SyndromeACK }

// IsRNR reports whether the syndrome is a receiver-not-ready NAK.
func (a AETH) IsRNR() bool { return a.Syndrome&syndromeClass == SyndromeRNR }

// IsNAK reports whether the syndrome is a NAK; Code returns its NAK code.
func (a AETH) IsNAK() bool { return a.Syndrome&syndromeClass == SyndromeNAK }

// Code returns the low 5 bits of the syndrome: credit count, RNR timer or
// NAK code.
func (a AETH) Code() uint8 { return a.Syndrome & 0x1F }

// Valid reports whether the syndrome is not reserved: bit 7 clear and the
// class not 10.
func (a AETH) Valid() bool {
	return a.Syndrome&0x80 == 0 && a.Syndrome&syndromeClass != syndromeReserved
}

// Put writes a into b[:AETHLen]; the MSN is masked to 24 bits.
func (a *AETH) Put(b []byte) error {
	if len(b) < AETHLen {
		return ErrBuffer
	}
	b[0] = a.Syndrome
	PutUint24(b[1:], a.MSN)
	return nil
}

// Parse reads the AETH at the start of b into a (unchanged on error).
func (a *AETH) Parse(b []byte) error {
	if len(b) < AETHLen {
		return ErrShort
	}
	a.Syndrome = b[0]
	a.MSN = Uint24(b[1:4])
	return nil
}

// ImmDt is the immediate data extended transport header: 4 bytes the
// responder hands to the receive completion (IBA "Immediate Data").
type ImmDt uint32

// Put writes d into b[:ImmDtLen].
func (d ImmDt) Put(b []byte) error {
	if len(b) < ImmDtLen {
		return ErrBuffer
	}
	binary.BigEndian.PutUint32(b, uint32(d))
	return nil
}

// Parse reads the ImmDt at the start of b into d (unchanged on error).
func (d *ImmDt) Parse(b []byte) error {
	if len(b) < ImmDtLen {
		return ErrShort
	}
	*d = ImmDt(binary.BigEndian.Uint32(b))
	return nil
}
