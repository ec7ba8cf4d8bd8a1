package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// pcapng (draft-ietf-opsawg-pcapng): a file is a Section Header Block
// followed by Interface Description Blocks and Enhanced Packet Blocks, each
// block
//
//	type (4) | total length (4) | body, padded to 32 bits | total length (4)
//
// and a block's options a list of code (2) | length (2) | value, padded to
// 32 bits, ended by opt_endofopt.
const (
	blockSHB uint32 = 0x0A0D0D0A
	blockIDB uint32 = 0x00000001
	blockEPB uint32 = 0x00000006

	byteOrderMagic uint32 = 0x1A2B3C4D

	optEndOfOpt   = 0
	optShbUserApp = 4 // shb_userappl
	optIfName     = 2 // if_name
	optIfDesc     = 3 // if_description
	optIfTSResol  = 9 // if_tsresol
	optIfTSOffset = 14
	optEpbFlags   = 2 // epb_flags

	// TSResolNanos is the if_tsresol the writer uses: 10^-9 s.
	TSResolNanos uint8 = 9

	// epbHeaderLen: block type, total length, interface id, timestamp
	// high and low, captured and original length.
	epbHeaderLen = 28
	// epbFlagsLen: the epb_flags option (4 + 4) and opt_endofopt (4).
	epbFlagsLen = 12
	// maxOptionLen is the longest option value (its length is 16 bits).
	maxOptionLen = math.MaxUint16
)

// Errors of NGWriter, preallocated so the per-packet path does not allocate.
var (
	ErrUnknownInterface = errors.New("pcap: no such interface")
	ErrLinkType         = errors.New("pcap: pcapng link types are 16 bits")
	ErrOptionTooLong    = errors.New("pcap: option longer than 65535 bytes")
)

// Interface is one capture interface of a pcapng file: its Interface
// Description Block.
type Interface struct {
	// Name is if_name, Description if_description (both may be empty).
	Name, Description string
	LinkType          uint32 // 16 bits in pcapng
	// SnapLen is the most bytes stored of a frame; 0 means no limit.
	SnapLen uint32
	// TSResol is if_tsresol as read (6 when absent). NGWriter ignores it
	// and always writes TSResolNanos.
	TSResol uint8
}

// NGWriter writes a pcapng stream of one little-endian section. Interfaces
// are added with AddInterface at any time (an interface must be added
// before its packets, as pcapng requires). It is not safe for concurrent
// use.
type NGWriter struct {
	under  io.Writer
	bw     *bufio.Writer
	snap   []uint32 // per interface: its SnapLen
	closed bool
	hdr    [epbHeaderLen]byte
	trl    [epbFlagsLen + 4]byte // epb_flags, opt_endofopt, total length
	blk    []byte                // scratch for the other blocks
}

// NewNGWriter writes a Section Header Block to w (userAppl, if not empty,
// as its shb_userappl option) and returns a writer for the rest. Output is
// buffered: call Flush or Close when done.
func NewNGWriter(w io.Writer, userAppl string) (*NGWriter, error) {
	if w == nil {
		return nil, errors.New("pcap: nil io.Writer")
	}
	if len(userAppl) > maxOptionLen {
		return nil, ErrOptionTooLong
	}
	nw := &NGWriter{under: w, bw: bufio.NewWriterSize(w, bufSize)}
	le := binary.LittleEndian
	b := le.AppendUint32(nil, byteOrderMagic)
	b = le.AppendUint16(b, 1) // major version
	b = le.AppendUint16(b, 0) // minor version
	b = le.AppendUint64(b, math.MaxUint64)
	b = appendOption(b, optShbUserApp, userAppl)
	b = le.AppendUint32(b, optEndOfOpt)
	if err := nw.writeBlock(blockSHB, b); err != nil {
		return nil, err
	}
	return nw, nil
}

// appendOption appends an option whose value is s, padded; an empty s
// appends nothing.
func appendOption(b []byte, code uint16, s string) []byte {
	if s == "" {
		return b
	}
	b = binary.LittleEndian.AppendUint16(b, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	b = append(b, s...)
	return append(b, zeros[:pad4(len(s))]...)
}

// pad4 is the padding that brings n bytes to a multiple of 4.
func pad4(n int) int { return -n & 3 }

var zeros [4]byte

// writeBlock writes a block of type typ around body (a multiple of 4 bytes).
func (w *NGWriter) writeBlock(typ uint32, body []byte) error {
	le := binary.LittleEndian
	n := uint32(12 + len(body))
	b := le.AppendUint32(w.blk[:0], typ)
	b = le.AppendUint32(b, n)
	b = append(b, body...)
	b = le.AppendUint32(b, n)
	w.blk = b
	_, err := w.bw.Write(b)
	return err
}

// AddInterface writes an Interface Description Block for ifc (if_name,
// if_description when not empty, if_tsresol 9) and returns its interface
// id: 0 for the first, then 1, 2, ...
func (w *NGWriter) AddInterface(ifc Interface) (uint32, error) {
	switch {
	case w.closed:
		return 0, ErrClosed
	case ifc.LinkType > math.MaxUint16:
		return 0, ErrLinkType
	case len(ifc.Name) > maxOptionLen || len(ifc.Description) > maxOptionLen:
		return 0, ErrOptionTooLong
	case uint64(len(w.snap)) > math.MaxUint32:
		return 0, errors.New("pcap: too many interfaces")
	}
	le := binary.LittleEndian
	b := le.AppendUint16(nil, uint16(ifc.LinkType))
	b = le.AppendUint16(b, 0) // reserved
	b = le.AppendUint32(b, ifc.SnapLen)
	b = appendOption(b, optIfName, ifc.Name)
	b = appendOption(b, optIfDesc, ifc.Description)
	b = appendOption(b, optIfTSResol, string([]byte{TSResolNanos}))
	b = le.AppendUint32(b, optEndOfOpt)
	if err := w.writeBlock(blockIDB, b); err != nil {
		return 0, err
	}
	w.snap = append(w.snap, ifc.SnapLen)
	return uint32(len(w.snap) - 1), nil
}

// Interfaces returns how many interfaces were added.
func (w *NGWriter) Interfaces() int { return len(w.snap) }

// WritePacket appends an Enhanced Packet Block on interface iface:
// tsNanos is the capture time in nanoseconds, dir the direction (written
// as epb_flags unless DirUnknown), frame the bytes from the link-layer
// header on and origLen the frame's length on the wire (raised to
// len(frame) when smaller). At most the interface's SnapLen bytes are
// stored (all of them when it is 0).
//
// WritePacket does not allocate.
func (w *NGWriter) WritePacket(iface uint32, tsNanos int64, dir Direction, frame []byte, origLen int) error {
	switch {
	case w.closed:
		return ErrClosed
	case uint64(iface) >= uint64(len(w.snap)):
		return ErrUnknownInterface
	case tsNanos < 0:
		return ErrNegativeTimestamp
	}
	origLen = max(origLen, len(frame))
	incl := len(frame)
	if s := w.snap[iface]; s != 0 && uint64(incl) > uint64(s) {
		incl = int(s)
	}
	// The block's total length must fit its 32 bits too.
	if uint64(origLen) > math.MaxUint32 || uint64(incl) > math.MaxUint32-64 {
		return ErrPacketTooLong
	}
	pad := pad4(incl)
	opts := 0
	if dir != DirUnknown {
		opts = epbFlagsLen
	}
	total := uint32(epbHeaderLen + incl + pad + opts + 4)
	le := binary.LittleEndian
	h := w.hdr[:]
	le.PutUint32(h[0:], blockEPB)
	le.PutUint32(h[4:], total)
	le.PutUint32(h[8:], iface)
	le.PutUint32(h[12:], uint32(uint64(tsNanos)>>32))
	le.PutUint32(h[16:], uint32(tsNanos))
	le.PutUint32(h[20:], uint32(incl))
	le.PutUint32(h[24:], uint32(origLen))
	if _, err := w.bw.Write(h); err != nil {
		return err
	}
	if _, err := w.bw.Write(frame[:incl]); err != nil {
		return err
	}
	if _, err := w.bw.Write(zeros[:pad]); err != nil {
		return err
	}
	t := w.trl[:0]
	if opts != 0 {
		t = le.AppendUint16(t, optEpbFlags)
		t = le.AppendUint16(t, 4)
		t = le.AppendUint32(t, uint32(dir)&3)
		t = le.AppendUint32(t, optEndOfOpt)
	}
	t = le.AppendUint32(t, total)
	_, err := w.bw.Write(t)
	return err
}

// Flush writes any buffered data to the underlying io.Writer.
func (w *NGWriter) Flush() error {
	if w.closed {
		return ErrClosed
	}
	return w.bw.Flush()
}

// Close flushes buffered data and, if the underlying io.Writer is also an
// io.Closer, closes it. The first error encountered is returned. Calling
// Close again returns ErrClosed.
func (w *NGWriter) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	return flushClose(w.bw, w.under)
}

// String names the direction as Wireshark does.
func (d Direction) String() string {
	switch d {
	case DirInbound:
		return "inbound"
	case DirOutbound:
		return "outbound"
	case DirUnknown:
		return "unknown"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}
