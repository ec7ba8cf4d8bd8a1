// Package orderre owns the OrderRE signals that ride in reserved bits of
// RoCEv2 headers (seed 004 §3.1): the fast-retransmission flag and copy
// count of a data packet, the multicast group create/delete signals
// piggybacked on the first and last data packets, the fast-path register /
// unregister signals piggybacked on ACKs, and the FNACK syndrome. Two
// sides read and write them: the transport (package mprdma) and the
// programmable ToR (package fabric), which is why this package sits below
// both and knows nothing but bytes. It does not know what a transport or a
// switch does with a signal.
//
// Layout (offsets into the UDP payload, i.e. from the BTH on):
//
//	BTH byte 0      opcode: RC RDMA WRITE (0x06..0x0B) = data, 0x11 = ACK
//	BTH byte 4      FECN(7) BECN(6) Resv6a(5..0): an FReTx's copy count A
//	                in bits 3..0 (1..15; 0 = the ToR's own default)
//	BTH byte 8      A(7) Resv7(6..0):
//	                  data: bit 6 FReTx, bit 5 group create, bit 4 group delete
//	                  ACK:  bit 5 register, bit 4 unregister (the ACK's
//	                        source address is the path it speaks for)
//	BTH bytes 9..11 PSN (an FNACK's: the lost PSN)
//	AETH byte 0     syndrome; 0x70 (NAK class, reserved code 16) = FNACK
//
// A receiver that does not know OrderRE sees reserved bits it ignores and
// a NAK code it treats as reserved (seed 004 §5.2: incremental deployment).
package orderre

// RoCEv2 opcodes the signals ride on (IBA RC; the same values as package
// ib, repeated because this package sits below it).
const (
	OpWriteFirst   = 0x06
	OpWriteOnlyImm = 0x0B
	OpAck          = 0x11
)

// Bits of BTH byte 8.
const (
	FlagFReTx      uint8 = 0x40 // data: a fast retransmission, replicated by the sender's ToR
	FlagCreate     uint8 = 0x20 // data: create the connection's group (first packet)
	FlagDelete     uint8 = 0x10 // data: delete the connection's group (last packet)
	FlagRegister   uint8 = 0x20 // ACK: register the ACK's source path as fast
	FlagUnregister uint8 = 0x10 // ACK: unregister it (slow)
	FlagMask       uint8 = 0x70 // the bits OrderRE uses in byte 8
)

// CopiesMask selects an FReTx's copy count in BTH byte 4.
const CopiesMask uint8 = 0x0f

// MaxCopies is the largest copy count the field holds.
const MaxCopies = 15

// SyndromeFNACK is the AETH syndrome of an FNACK: NAK class (011), code 16
// from the reserved range (IBA defines codes 0..4).
const SyndromeFNACK uint8 = 0x70

// Byte offsets from the start of the BTH.
const (
	offOpcode = 0
	offByte4  = 4
	offByte8  = 8
	offPSN    = 9
	bthLen    = 12
	offAETH   = bthLen
)

// Kind says what a packet is to OrderRE.
type Kind uint8

const (
	KindOther Kind = iota // not a packet OrderRE signals on (or too short)
	KindData              // an RC WRITE packet
	KindAck               // an RC ACK (or NAK, FNACK) packet
)

// Signal is what a switch reads of a packet: its kind, the OrderRE bits of
// BTH byte 8, an FReTx's copy count and the PSN.
type Signal struct {
	Kind   Kind
	Flags  uint8 // byte 8 & FlagMask
	Copies int   // data with FlagFReTx: BTH byte 4 & CopiesMask
	PSN    uint32
}

// FReTx reports a fast retransmission.
func (s Signal) FReTx() bool { return s.Kind == KindData && s.Flags&FlagFReTx != 0 }

// Read reads the signals of the UDP payload b (BTH onwards). It never
// panics and does not allocate; a payload too short for a BTH, or one
// whose opcode is neither an RC WRITE nor an ACK, is KindOther.
func Read(b []byte) Signal {
	if len(b) < bthLen {
		return Signal{}
	}
	var s Signal
	switch op := b[offOpcode]; {
	case op >= OpWriteFirst && op <= OpWriteOnlyImm:
		s.Kind = KindData
	case op == OpAck:
		s.Kind = KindAck
	default:
		return Signal{}
	}
	s.Flags = b[offByte8] & FlagMask
	if s.FReTx() {
		s.Copies = int(b[offByte4] & CopiesMask)
	}
	s.PSN = uint32(b[offPSN])<<16 | uint32(b[offPSN+1])<<8 | uint32(b[offPSN+2])
	return s
}

// IsFNACK reports whether b (BTH onwards) is an ACK packet whose AETH
// carries the FNACK syndrome.
func IsFNACK(b []byte) bool {
	return len(b) >= offAETH+1 && b[offOpcode] == OpAck && b[offAETH] == SyndromeFNACK
}

// SetFlags sets bits (of FlagMask) in BTH byte 8 of b, keeping the others.
// b must hold a BTH.
func SetFlags(b []byte, bits uint8) { b[offByte8] |= bits & FlagMask }

// SetCopies writes an FReTx's copy count (clamped to 0..MaxCopies) into
// BTH byte 4 of b, keeping FECN, BECN and the other reserved bits.
func SetCopies(b []byte, copies int) {
	copies = min(max(copies, 0), MaxCopies)
	b[offByte4] = b[offByte4]&^CopiesMask | uint8(copies)
}
