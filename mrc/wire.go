package mrc

import (
	"encoding/binary"
	"errors"

	"github.com/vcluster/vcluster/ib"
	"github.com/vcluster/vcluster/verbs"
)

// MRC opcodes (BTH byte 0).
const (
	OpWriteFirst   uint8 = 0xC6
	OpWriteMiddle  uint8 = 0xC7
	OpWriteLast    uint8 = 0xC8
	OpWriteLastImm uint8 = 0xC9
	OpWriteOnly    uint8 = 0xCA
	OpWriteOnlyImm uint8 = 0xCB
	OpAck          uint8 = 0xD1 // Transport ACK (AETH)
	OpEndpointReq  uint8 = 0xD8 // endpoint request (ERTH), BTH dest QP = EndpointQPN
	OpEndpointResp uint8 = 0xD9 // endpoint response (EETH)
	OpSACK         uint8 = 0xDC // reliability SACK (SETH + CC_STATE)
	OpNACK         uint8 = 0xDD // reliability NACK (NETH)
	OpProbe        uint8 = 0xDE // reliability probe (PETH)
)

// Header lengths in bytes. BTH, RETH, ImmDt, AETH and ICRC are
// InfiniBand's (package ib); the rest are MRC's.
const (
	BTHLen     = ib.BTHLen
	METHLen    = 4
	TSETHLen   = 4
	RETHLen    = ib.RETHLen
	ImmLen     = ib.ImmDtLen
	AETHLen    = ib.AETHLen
	SETHLen    = 28
	CCStateLen = 8
	NETHLen    = 12
	PETHLen    = 8
	ERTHLen    = 12
	ICRCLen    = ib.ICRCLen

	// AckLen, SACKLen, NACKLen, ProbeLen and EndpointLen are the full
	// control packet sizes (BTH, extension header(s) and ICRC).
	AckLen      = BTHLen + AETHLen + ICRCLen
	SACKLen     = BTHLen + SETHLen + CCStateLen + ICRCLen
	NACKLen     = BTHLen + NETHLen + ICRCLen
	ProbeLen    = BTHLen + PETHLen + ICRCLen
	EndpointLen = BTHLen + ERTHLen + ICRCLen

	// MaxDataHeaderLen is the longest data header: BTH+METH+TSETH+RETH+ImmDt.
	MaxDataHeaderLen = BTHLen + METHLen + TSETHLen + RETHLen + ImmLen
)

// DefaultPKey is the partition key MRC packets carry.
const DefaultPKey = 0xFFFF

// Path-feedback values of SETH.M.
const (
	PathNone       uint8 = 0 // no path feedback
	PathSkipOnce   uint8 = 1 // forward path ECN-marked: skip this EV once
	PathAlwaysSkip uint8 = 2 // responder judges the EV bad
)

// NACK reason codes (NETH byte 0; values agree with UET PDS).
const (
	NackTrimmed        uint8 = 0x01
	NackTrimmedLastHop uint8 = 0x02
	NackNoBitmap       uint8 = 0x06
	NackNoPktBuffer    uint8 = 0x07
	NackNoResource     uint8 = 0x0A
	NackPSNOutOfWindow uint8 = 0x0B
	NackUnexpEvent     uint8 = 0x19
)

// AETH syndromes. A Transport ACK carries AckSyndrome (ACK, credit field
// 0x1F: MRC has no end-to-end credits). Semantic errors travel as an AETH
// NAK on the Transport ACK (opcode 0xD1), as in InfiniBand RC: MRC keeps
// reliability (SACK/NACK: "the packet arrived") apart from semantics
// (Transport ACK: "what the responder did with it").
const (
	AckSyndrome          = ib.SyndromeACK | ib.CreditsInvalid   // 0b000_11111: ACK, credits "invalid"
	NakRemoteAccessError = ib.SyndromeNAK | ib.NakRemoteAccess  // 0b011_00010: bad R_Key or range → verbs.StatusRemoteAccess
	NakRemoteOpError     = ib.SyndromeNAK | ib.NakRemoteOpError // 0b011_00011: remote operational error → verbs.StatusRemoteOp
)

// Endpoint operations (ERTH Op).
const (
	EndpointPortStatus uint16 = 1 // Port Status Update: PortStatusMask is valid
	EndpointEVProbe    uint16 = 2 // EV probe (reachability / RTT)
)

// Decoder errors (preallocated; decoders never allocate or panic).
var (
	ErrShort    = errors.New("mrc: packet truncated")
	ErrOpcode   = errors.New("mrc: unexpected opcode")
	ErrReserved = errors.New("mrc: reserved bits set")
	ErrField    = errors.New("mrc: invalid field value")
	ErrBuffer   = errors.New("mrc: buffer too small")
)

const psnMask = ib.PSNMask

// BTH is the base transport header (ib.BTH). MRC uses it so:
//
//	byte 0      opcode
//	byte 1      SE(7) M(6) PadCnt(5..4) TVer(3..0); MRC sends 0, TVer must be 0
//	bytes 2..3  P_Key
//	byte 4      reserved (0): MRC sets neither FECN nor BECN
//	bytes 5..7  destination QP (24 bits; verbs.DestQP reads it)
//	byte 8      AckReq(7) rtx(6) TS(5), bits 4..0 reserved (0)
//	bytes 9..11 PSN (24 bits)
//
// rtx and TS take the two high bits of the IBA "Resv7" field next to the
// AckReq bit: rtx marks a retransmission, TS says a TSETH follows the METH.
// DecodeBTH rejects every other reserved bit.
type BTH = ib.BTH

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func putPSN(b []byte, psn uint32) { ib.PutUint24(b, psn) }

func getPSN(b []byte) uint32 { return ib.Uint24(b) }

// DecodeBTH parses the BTH at the start of b.
func DecodeBTH(b []byte) (BTH, error) {
	var h BTH
	err := parseBTH(&h, b)
	return h, err
}

// parseBTH parses the BTH at the start of b into h and enforces MRC's
// reserved bits; on error h is zero. The decoders parse straight into
// their result with it: the BTH is not built once and then copied.
func parseBTH(h *BTH, b []byte) error {
	if h.Parse(b) != nil {
		*h = BTH{}
		return ErrShort
	}
	if h.TVer != 0 || h.FECN || h.BECN || h.Resv6a != 0 || h.Resv5 != 0 {
		*h = BTH{}
		return ErrReserved
	}
	return nil
}

// IsDataOpcode reports whether op is one of the six WRITE opcodes.
func IsDataOpcode(op uint8) bool { return op >= OpWriteFirst && op <= OpWriteOnlyImm }

// HasImm reports whether a data opcode carries ImmDt.
func HasImm(op uint8) bool { return op == OpWriteLastImm || op == OpWriteOnlyImm }

// IsLast reports whether a data opcode ends a message.
func IsLast(op uint8) bool { return op >= OpWriteLast && op <= OpWriteOnlyImm }

// METH is the message extension header: RQMSN counts WriteImm messages
// (the responder's receive-queue message sequence), MSN all messages.
//
//	bytes 0..1 RQMSN, bytes 2..3 MSN
type METH struct {
	RQMSN uint16
	MSN   uint16
}

// TSETH is the transmit timestamp extension header.
//
//	bytes 0..1 timestamp; byte 2 bit 7 resolution (0: 128 ns units,
//	1: 1 µs units), bits 6..0 reserved; byte 3 reserved
type TSETH struct {
	TS     uint16
	Coarse bool
}

// RETH is the RDMA extension header (ib.RETH), present in every MRC data
// packet: VA is this packet's target address (it advances by PMTU per
// packet), RKey is constant in a message and DMALen is the whole message's
// length.
//
//	bytes 0..7 VA, 8..11 R_Key, 12..15 DMA length
type RETH = ib.RETH

// DataHeader is everything a WRITE packet carries before its payload.
//
//	BTH (12) | METH (4) | [TSETH (4) if BTH.TS] | RETH (16) | [ImmDt (4) on
//	0xC9/0xCB] | payload | ICRC (4)
type DataHeader struct {
	BTH   BTH
	METH  METH
	TSETH TSETH // valid iff BTH.TS
	RETH  RETH
	Imm   uint32 // valid iff HasImm(BTH.Opcode)
}

// Len returns the encoded header length.
func (h *DataHeader) Len() int {
	n := BTHLen + METHLen + RETHLen
	if h.BTH.TS {
		n += TSETHLen
	}
	if HasImm(h.BTH.Opcode) {
		n += ImmLen
	}
	return n
}

// Encode writes the header into b and returns its length.
func (h *DataHeader) Encode(b []byte) (int, error) {
	if !IsDataOpcode(h.BTH.Opcode) {
		return 0, ErrOpcode
	}
	n := h.Len()
	if len(b) < n {
		return 0, ErrBuffer
	}
	h.BTH.Put(b)
	o := BTHLen
	binary.BigEndian.PutUint16(b[o:], h.METH.RQMSN)
	binary.BigEndian.PutUint16(b[o+2:], h.METH.MSN)
	o += METHLen
	if h.BTH.TS {
		binary.BigEndian.PutUint16(b[o:], h.TSETH.TS)
		b[o+2] = b2u(h.TSETH.Coarse) << 7
		b[o+3] = 0
		o += TSETHLen
	}
	h.RETH.Put(b[o:])
	o += RETHLen
	if HasImm(h.BTH.Opcode) {
		ib.ImmDt(h.Imm).Put(b[o:])
		o += ImmLen
	}
	return o, nil
}

// DecodeData parses a WRITE packet's headers into h and returns their
// length; the payload (possibly elided) and ICRC follow. On error h holds
// no meaningful header.
func DecodeData(b []byte, h *DataHeader) (int, error) {
	if err := parseBTH(&h.BTH, b); err != nil {
		return 0, err
	}
	bth := &h.BTH
	if !IsDataOpcode(bth.Opcode) {
		return 0, ErrOpcode
	}
	n := h.Len()
	if len(b) < n {
		return 0, ErrShort
	}
	o := BTHLen
	h.METH.RQMSN = binary.BigEndian.Uint16(b[o:])
	h.METH.MSN = binary.BigEndian.Uint16(b[o+2:])
	o += METHLen
	h.TSETH = TSETH{}
	if bth.TS {
		if b[o+2]&0x7f != 0 || b[o+3] != 0 {
			return 0, ErrReserved
		}
		h.TSETH.TS = binary.BigEndian.Uint16(b[o:])
		h.TSETH.Coarse = b[o+2]&0x80 != 0
		o += TSETHLen
	}
	h.RETH.Parse(b[o:])
	o += RETHLen
	h.Imm = 0
	if HasImm(bth.Opcode) {
		var imm ib.ImmDt
		imm.Parse(b[o:])
		h.Imm = uint32(imm)
		o += ImmLen
	}
	return o, nil
}

// AETH is the ACK extension header of a Transport ACK (ib.AETH).
//
//	byte 0 syndrome (AckSyndrome, or an AETH NAK), bytes 1..3 MSN (24 bits)
type AETH = ib.AETH

// EncodeAck writes a Transport ACK (BTH, AETH, zero ICRC) into b.
func EncodeAck(b []byte, bth BTH, a AETH) (int, error) {
	if len(b) < AckLen {
		return 0, ErrBuffer
	}
	bth.Opcode = OpAck
	bth.Put(b)
	a.Put(b[BTHLen:])
	putICRC(b[BTHLen+AETHLen:])
	return AckLen, nil
}

// DecodeAck parses a Transport ACK.
func DecodeAck(b []byte) (BTH, AETH, error) {
	var a AETH
	var bth BTH
	if err := parseBTH(&bth, b); err != nil {
		return bth, a, err
	}
	if bth.Opcode != OpAck {
		return bth, a, ErrOpcode
	}
	if len(b) < AckLen {
		return bth, a, ErrShort
	}
	a.Parse(b[BTHLen:])
	return bth, a, nil
}

// SETH is the SACK extension header (28 bytes).
//
//	byte 0      M(7..6) P(5: probe response) R(4: trigger had rtx), 3..0 reserved
//	byte 1      reserved
//	bytes 2..3  ack_offset: triggering PSN − cack_psn, a signed 16-bit value
//	bytes 4..7  EV of the triggering packet, reflected
//	byte 8      reserved
//	bytes 9..11 cack_psn: every PSN ≤ cack_psn arrived
//	byte 12     MPR offered by the responder (units of 128 PSNs)
//	byte 13     reserved
//	bytes 14..15 sack_offset
//	bytes 16..23 bitmap: bit i (LSB first) ⇔ PSN cack_psn+sack_offset+i arrived
//	bytes 24..27 reserved
type SETH struct {
	M          uint8
	ProbeResp  bool
	RtxEcho    bool
	AckOffset  int16
	EV         uint32
	CackPSN    uint32
	MPR        uint8
	SackOffset uint16
	Bitmap     uint64
}

// CCState is the congestion state the responder returns with a SACK (8 B).
//
//	bytes 0..1 echoed TSETH timestamp
//	bytes 2..3 restore_cwnd(15) out-of-order count(14..0)
//	byte 4     rcv_cwnd_pen (bits 6..0, 0..127), bit 7 reserved
//	bytes 5..7 received bytes in 256-byte units (24 bits, wrapping)
type CCState struct {
	TSEcho      uint16
	RestoreCwnd bool
	OOOCount    uint16 // 15 bits
	RcvCwndPen  uint8  // 0..127
	RcvdBytes   uint32 // 24 bits
}

// EncodeSACK writes a SACK (BTH, SETH, CC_STATE, zero ICRC) into b.
func EncodeSACK(b []byte, bth BTH, s *SETH, c *CCState) (int, error) {
	if len(b) < SACKLen {
		return 0, ErrBuffer
	}
	if s.M > 3 || c.OOOCount > 0x7fff || c.RcvCwndPen > 127 {
		return 0, ErrField
	}
	bth.Opcode = OpSACK
	bth.Put(b)
	o := BTHLen
	b[o] = s.M<<6 | b2u(s.ProbeResp)<<5 | b2u(s.RtxEcho)<<4
	b[o+1] = 0
	binary.BigEndian.PutUint16(b[o+2:], uint16(s.AckOffset))
	binary.BigEndian.PutUint32(b[o+4:], s.EV)
	b[o+8] = 0
	putPSN(b[o+9:], s.CackPSN)
	b[o+12] = s.MPR
	b[o+13] = 0
	binary.BigEndian.PutUint16(b[o+14:], s.SackOffset)
	binary.BigEndian.PutUint64(b[o+16:], s.Bitmap)
	binary.BigEndian.PutUint32(b[o+24:], 0)
	o += SETHLen
	binary.BigEndian.PutUint16(b[o:], c.TSEcho)
	binary.BigEndian.PutUint16(b[o+2:], uint16(b2u(c.RestoreCwnd))<<15|c.OOOCount)
	b[o+4] = c.RcvCwndPen
	putPSN(b[o+5:], c.RcvdBytes&psnMask)
	putICRC(b[o+CCStateLen:])
	return SACKLen, nil
}

// DecodeSACK parses a SACK.
func DecodeSACK(b []byte) (BTH, SETH, CCState, error) {
	var s SETH
	var c CCState
	var bth BTH
	if err := parseBTH(&bth, b); err != nil {
		return bth, s, c, err
	}
	if bth.Opcode != OpSACK {
		return bth, s, c, ErrOpcode
	}
	if len(b) < SACKLen {
		return bth, s, c, ErrShort
	}
	o := BTHLen
	if b[o]&0x0f != 0 || b[o+1] != 0 || b[o+8] != 0 || b[o+13] != 0 ||
		binary.BigEndian.Uint32(b[o+24:]) != 0 || b[o+SETHLen+4]&0x80 != 0 {
		return bth, s, c, ErrReserved
	}
	s.M = b[o] >> 6
	if s.M == 3 {
		return bth, s, c, ErrField
	}
	s.ProbeResp = b[o]&0x20 != 0
	s.RtxEcho = b[o]&0x10 != 0
	s.AckOffset = int16(binary.BigEndian.Uint16(b[o+2:]))
	s.EV = binary.BigEndian.Uint32(b[o+4:])
	s.CackPSN = getPSN(b[o+9:])
	s.MPR = b[o+12]
	s.SackOffset = binary.BigEndian.Uint16(b[o+14:])
	s.Bitmap = binary.BigEndian.Uint64(b[o+16:])
	o += SETHLen
	c.TSEcho = binary.BigEndian.Uint16(b[o:])
	v := binary.BigEndian.Uint16(b[o+2:])
	c.RestoreCwnd = v&0x8000 != 0
	c.OOOCount = v & 0x7fff
	c.RcvCwndPen = b[o+4]
	c.RcvdBytes = getPSN(b[o+5:])
	return bth, s, c, nil
}

// NETH is the NACK extension header (12 bytes).
//
//	byte 0      reason code (Nack*)
//	byte 1      R(7: the NACKed packet had rtx), 6..0 reserved
//	bytes 2..3  echoed TSETH timestamp (0 if the packet carried none)
//	bytes 4..7  EV of the NACKed packet, reflected
//	byte 8      reserved
//	bytes 9..11 nack_psn
type NETH struct {
	Code    uint8
	RtxEcho bool
	TSEcho  uint16
	EV      uint32
	PSN     uint32
}

// EncodeNACK writes a NACK (BTH, NETH, zero ICRC) into b.
func EncodeNACK(b []byte, bth BTH, n *NETH) (int, error) {
	if len(b) < NACKLen {
		return 0, ErrBuffer
	}
	bth.Opcode = OpNACK
	bth.Put(b)
	o := BTHLen
	b[o] = n.Code
	b[o+1] = b2u(n.RtxEcho) << 7
	binary.BigEndian.PutUint16(b[o+2:], n.TSEcho)
	binary.BigEndian.PutUint32(b[o+4:], n.EV)
	b[o+8] = 0
	putPSN(b[o+9:], n.PSN)
	putICRC(b[o+NETHLen:])
	return NACKLen, nil
}

// DecodeNACK parses a NACK.
func DecodeNACK(b []byte) (BTH, NETH, error) {
	var n NETH
	var bth BTH
	if err := parseBTH(&bth, b); err != nil {
		return bth, n, err
	}
	if bth.Opcode != OpNACK {
		return bth, n, ErrOpcode
	}
	if len(b) < NACKLen {
		return bth, n, ErrShort
	}
	o := BTHLen
	if b[o+1]&0x7f != 0 || b[o+8] != 0 {
		return bth, n, ErrReserved
	}
	n.Code = b[o]
	n.RtxEcho = b[o+1]&0x80 != 0
	n.TSEcho = binary.BigEndian.Uint16(b[o+2:])
	n.EV = binary.BigEndian.Uint32(b[o+4:])
	n.PSN = getPSN(b[o+9:])
	return bth, n, nil
}

// PETH is the reliability probe header (8 bytes). A probe consumes no PSN;
// the responder answers with a SACK whose P flag is set and whose EV
// reflects the probe's.
//
//	bytes 0..3 EV the probe was sent on, 4..5 probe sequence, 6..7 timestamp
type PETH struct {
	EV  uint32
	Seq uint16
	TS  uint16
}

// EncodeProbe writes a reliability probe (BTH, PETH, zero ICRC) into b.
func EncodeProbe(b []byte, bth BTH, p PETH) (int, error) {
	if len(b) < ProbeLen {
		return 0, ErrBuffer
	}
	bth.Opcode = OpProbe
	bth.Put(b)
	binary.BigEndian.PutUint32(b[BTHLen:], p.EV)
	binary.BigEndian.PutUint16(b[BTHLen+4:], p.Seq)
	binary.BigEndian.PutUint16(b[BTHLen+6:], p.TS)
	putICRC(b[BTHLen+PETHLen:])
	return ProbeLen, nil
}

// DecodeProbe parses a reliability probe.
func DecodeProbe(b []byte) (BTH, PETH, error) {
	var p PETH
	var bth BTH
	if err := parseBTH(&bth, b); err != nil {
		return bth, p, err
	}
	if bth.Opcode != OpProbe {
		return bth, p, ErrOpcode
	}
	if len(b) < ProbeLen {
		return bth, p, ErrShort
	}
	p.EV = binary.BigEndian.Uint32(b[BTHLen:])
	p.Seq = binary.BigEndian.Uint16(b[BTHLen+4:])
	p.TS = binary.BigEndian.Uint16(b[BTHLen+6:])
	return bth, p, nil
}

// EndpointHeader is the ERTH (requests, opcode 0xD8) and EETH (responses,
// 0xD9) of endpoint operations on QP EndpointQPN (12 bytes).
//
//	bytes 0..1  operation (EndpointPortStatus, EndpointEVProbe)
//	bytes 2..3  request id (a response echoes it)
//	bytes 4..7  port_status_mask: bit p set ⇔ the sender's plane-p port is up
//	byte 8      status (responses; 0 = OK), 0 in requests
//	bytes 9..11 reserved
type EndpointHeader struct {
	Op             uint16
	ReqID          uint16
	PortStatusMask uint32
	Status         uint8
}

// EncodeEndpoint writes an endpoint request (resp false) or response into b.
// The BTH's destination QP is forced to EndpointQPN.
func EncodeEndpoint(b []byte, bth BTH, resp bool, e EndpointHeader) (int, error) {
	if len(b) < EndpointLen {
		return 0, ErrBuffer
	}
	if e.Op != EndpointPortStatus && e.Op != EndpointEVProbe {
		return 0, ErrField
	}
	bth.Opcode = OpEndpointReq
	if resp {
		bth.Opcode = OpEndpointResp
	}
	bth.DestQP = verbs.EndpointQPN
	bth.Put(b)
	o := BTHLen
	binary.BigEndian.PutUint16(b[o:], e.Op)
	binary.BigEndian.PutUint16(b[o+2:], e.ReqID)
	binary.BigEndian.PutUint32(b[o+4:], e.PortStatusMask)
	b[o+8] = e.Status
	b[o+9], b[o+10], b[o+11] = 0, 0, 0
	putICRC(b[o+ERTHLen:])
	return EndpointLen, nil
}

// DecodeEndpoint parses an endpoint request or response; resp reports
// which.
func DecodeEndpoint(b []byte) (bth BTH, resp bool, e EndpointHeader, err error) {
	if err = parseBTH(&bth, b); err != nil {
		return
	}
	if bth.Opcode != OpEndpointReq && bth.Opcode != OpEndpointResp {
		err = ErrOpcode
		return
	}
	if bth.DestQP != verbs.EndpointQPN {
		err = ErrField
		return
	}
	if len(b) < EndpointLen {
		err = ErrShort
		return
	}
	resp = bth.Opcode == OpEndpointResp
	o := BTHLen
	if b[o+9] != 0 || b[o+10] != 0 || b[o+11] != 0 {
		err = ErrReserved
		return
	}
	e.Op = binary.BigEndian.Uint16(b[o:])
	if e.Op != EndpointPortStatus && e.Op != EndpointEVProbe {
		err = ErrField
		return
	}
	e.ReqID = binary.BigEndian.Uint16(b[o+2:])
	e.PortStatusMask = binary.BigEndian.Uint32(b[o+4:])
	e.Status = b[o+8]
	if !resp && e.Status != 0 {
		err = ErrReserved
	}
	return
}

// EncodePortStatus writes a Port Status Update request announcing which of
// the sender's planes are up (bit p of mask ⇔ plane p). The NIC sends it to
// each peer; a receiving NIC applies it to its QPs toward the sender with
// QP.SetPlaneStatus.
func EncodePortStatus(b []byte, reqID uint16, mask uint32) (int, error) {
	return EncodeEndpoint(b, BTH{PKey: DefaultPKey}, false,
		EndpointHeader{Op: EndpointPortStatus, ReqID: reqID, PortStatusMask: mask})
}

// putICRC writes the 4-byte ICRC placeholder: zeros. The simulated NIC does
// not compute the invariant CRC (it would cost a CRC32 over every stored
// byte for no modelling benefit); receivers do not check it.
func putICRC(b []byte) { b[0], b[1], b[2], b[3] = 0, 0, 0, 0 }
