// Package pcap writes (and, for tests, reads) packet capture files: classic
// libpcap files (Writer) and pcapng files (NGWriter), whose interfaces have
// names and whose packets carry their direction.
//
// Both writers produce nanosecond-resolution little-endian files (classic
// magic 0xa1b23c4d, version 2.4; pcapng if_tsresol 9), so the
// virtual-nanosecond timestamps of the simulator are preserved exactly.
// They perform no allocation per packet and never read the wall clock:
// every timestamp is supplied by the caller.
package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// Link-layer header types (https://www.tcpdump.org/linktypes.html).
const (
	// LinkTypeEthernet is LINKTYPE_ETHERNET: frames start with an
	// Ethernet II / 802.3 header (no preamble, no FCS unless stated).
	LinkTypeEthernet uint32 = 1
	// LinkTypeRaw is LINKTYPE_RAW: packets start with an IPv4 or IPv6
	// header.
	LinkTypeRaw uint32 = 101
)

// Magic numbers of the classic pcap global header, as read in the byte
// order the file was written in.
const (
	MagicMicroseconds uint32 = 0xa1b2c3d4
	MagicNanoseconds  uint32 = 0xa1b23c4d
)

const (
	// DefaultSnapLen is used by NewWriter when snapLen is 0. It matches
	// the default of tcpdump and Wireshark.
	DefaultSnapLen uint32 = 262144

	versionMajor = 2
	versionMinor = 4

	globalHeaderLen = 24
	recordHeaderLen = 16

	// bufSize is the size of the bufio.Writer owned by a Writer.
	bufSize = 64 << 10
)

// Errors returned by Writer. They are preallocated so that the error paths of
// WritePacket do not allocate either.
var (
	ErrClosed            = errors.New("pcap: writer is closed")
	ErrNegativeTimestamp = errors.New("pcap: negative timestamp")
	ErrTimestampOverflow = errors.New("pcap: timestamp does not fit in 32-bit seconds")
	ErrPacketTooLong     = errors.New("pcap: packet length does not fit in 32 bits")
)

// Direction is which way a captured frame crossed its interface. The
// values are those of the direction bits of pcapng's epb_flags.
type Direction uint8

// Directions.
const (
	DirUnknown  Direction = 0
	DirInbound  Direction = 1 // received by the interface
	DirOutbound Direction = 2 // sent by the interface
)

// Writer writes a pcap stream. It is not safe for concurrent use.
type Writer struct {
	under   io.Writer
	bw      *bufio.Writer
	snapLen uint32
	link    uint32
	closed  bool
	err     error // the first error of TapFrame
	hdr     [recordHeaderLen]byte
}

// NewWriter writes the pcap global header (nanosecond magic, version 2.4,
// little-endian) for the given link type and snapshot length to w and returns
// a Writer for the packet records. A snapLen of 0 means DefaultSnapLen.
//
// Output is buffered: call Flush or Close when done.
func NewWriter(w io.Writer, linkType uint32, snapLen uint32) (*Writer, error) {
	if w == nil {
		return nil, errors.New("pcap: nil io.Writer")
	}
	if snapLen == 0 {
		snapLen = DefaultSnapLen
	}
	pw := &Writer{
		under:   w,
		bw:      bufio.NewWriterSize(w, bufSize),
		snapLen: snapLen,
		link:    linkType,
	}
	var gh [globalHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(gh[0:4], MagicNanoseconds)
	le.PutUint16(gh[4:6], versionMajor)
	le.PutUint16(gh[6:8], versionMinor)
	// gh[8:12] thiszone = 0 (UTC), gh[12:16] sigfigs = 0.
	le.PutUint32(gh[16:20], snapLen)
	le.PutUint32(gh[20:24], linkType)
	if _, err := pw.bw.Write(gh[:]); err != nil {
		return nil, err
	}
	return pw, nil
}

// LinkType returns the link type written in the global header.
func (w *Writer) LinkType() uint32 { return w.link }

// SnapLen returns the snapshot length written in the global header; frames
// longer than this are truncated by WritePacket.
func (w *Writer) SnapLen() uint32 { return w.snapLen }

// WritePacket appends one record: tsNanos is the capture time in nanoseconds
// since the epoch of the capture (virtual time for the simulator), frame is
// the bytes on the wire starting at the link-layer header, and origLen is the
// length of the packet on the wire (values smaller than len(frame) are raised
// to len(frame)). At most SnapLen bytes of frame are stored.
//
// WritePacket does not allocate.
func (w *Writer) WritePacket(tsNanos int64, frame []byte, origLen int) error {
	if w.closed {
		return ErrClosed
	}
	if tsNanos < 0 {
		return ErrNegativeTimestamp
	}
	sec := tsNanos / 1e9
	if sec > math.MaxUint32 {
		return ErrTimestampOverflow
	}
	nsec := tsNanos % 1e9
	if origLen < len(frame) {
		origLen = len(frame)
	}
	if uint64(origLen) > math.MaxUint32 {
		return ErrPacketTooLong
	}
	incl := len(frame)
	if uint64(incl) > uint64(w.snapLen) {
		incl = int(w.snapLen)
	}
	le := binary.LittleEndian
	le.PutUint32(w.hdr[0:4], uint32(sec))
	le.PutUint32(w.hdr[4:8], uint32(nsec))
	le.PutUint32(w.hdr[8:12], uint32(incl))
	le.PutUint32(w.hdr[12:16], uint32(origLen))
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return err
	}
	_, err := w.bw.Write(frame[:incl])
	return err
}

// TapFrame is WritePacket for a frame tap (fabric.FrameTap), which has no
// use for an error: the first error is kept and returned by Flush and
// Close. A classic file has no place for the direction; it is dropped.
func (w *Writer) TapFrame(tsNanos int64, _ Direction, frame []byte, origLen int) {
	if err := w.WritePacket(tsNanos, frame, origLen); err != nil && w.err == nil {
		w.err = err
	}
}

// Flush writes any buffered data to the underlying io.Writer. It returns
// the first error of TapFrame, if any.
func (w *Writer) Flush() error {
	if w.closed {
		return ErrClosed
	}
	return firstErr(w.err, w.bw.Flush())
}

// Close flushes buffered data and, if the underlying io.Writer is also an
// io.Closer, closes it. The first error encountered (TapFrame's included)
// is returned. Calling Close again returns ErrClosed.
func (w *Writer) Close() error {
	if w.closed {
		return ErrClosed
	}
	w.closed = true
	return firstErr(w.err, flushClose(w.bw, w.under))
}

// flushClose flushes bw and closes under if it is an io.Closer.
func flushClose(bw *bufio.Writer, under io.Writer) error {
	err := bw.Flush()
	if c, ok := under.(io.Closer); ok {
		err = firstErr(err, c.Close())
	}
	return err
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
