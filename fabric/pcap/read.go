package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Record is one packet read back by ReadAll.
type Record struct {
	// TS is the capture time in nanoseconds (microsecond files are scaled).
	TS int64
	// Data is the captured bytes (incl_len of them).
	Data []byte
	// OrigLen is the length of the packet on the wire.
	OrigLen int
}

// ReadAll reads a whole classic pcap stream: either microsecond (0xa1b2c3d4)
// or nanosecond (0xa1b23c4d) resolution, in either byte order. It returns the
// link type field of the global header and every record.
//
// It is meant for tests and is strict: a truncated header or record, an
// unknown magic or major version, a fractional timestamp out of range, a
// record longer than the snapshot length, or an original length smaller than
// the captured length is reported as an error. It never panics. The Data
// slices of the records share one buffer holding the whole input.
func ReadAll(r io.Reader) (linkType uint32, recs []Record, err error) {
	buf, err := io.ReadAll(r)
	if err != nil {
		return 0, nil, fmt.Errorf("pcap: read: %w", err)
	}
	return parse(buf)
}

var (
	errShortGlobalHeader = errors.New("pcap: truncated global header")
	errBadMagic          = errors.New("pcap: unknown magic number")
)

func parse(buf []byte) (uint32, []Record, error) {
	if len(buf) < globalHeaderLen {
		return 0, nil, errShortGlobalHeader
	}
	var (
		order binary.ByteOrder
		nanos bool
	)
	switch m := binary.LittleEndian.Uint32(buf[0:4]); m {
	case MagicMicroseconds:
		order = binary.LittleEndian
	case MagicNanoseconds:
		order, nanos = binary.LittleEndian, true
	default:
		switch binary.BigEndian.Uint32(buf[0:4]) {
		case MagicMicroseconds:
			order = binary.BigEndian
		case MagicNanoseconds:
			order, nanos = binary.BigEndian, true
		default:
			return 0, nil, fmt.Errorf("%w 0x%08x", errBadMagic, m)
		}
	}
	if major := order.Uint16(buf[4:6]); major != versionMajor {
		return 0, nil, fmt.Errorf("pcap: unsupported major version %d", major)
	}
	snapLen := order.Uint32(buf[16:20])
	linkType := order.Uint32(buf[20:24])

	var recs []Record
	off := globalHeaderLen
	for off < len(buf) {
		n := len(recs)
		if len(buf)-off < recordHeaderLen {
			return linkType, recs, fmt.Errorf("pcap: record %d: truncated record header (%d bytes)", n, len(buf)-off)
		}
		h := buf[off : off+recordHeaderLen]
		sec := order.Uint32(h[0:4])
		frac := order.Uint32(h[4:8])
		incl := order.Uint32(h[8:12])
		orig := order.Uint32(h[12:16])
		off += recordHeaderLen

		var ts int64
		if nanos {
			if frac >= 1e9 {
				return linkType, recs, fmt.Errorf("pcap: record %d: nanoseconds %d out of range", n, frac)
			}
			ts = int64(sec)*1e9 + int64(frac)
		} else {
			if frac >= 1e6 {
				return linkType, recs, fmt.Errorf("pcap: record %d: microseconds %d out of range", n, frac)
			}
			ts = int64(sec)*1e9 + int64(frac)*1e3
		}
		if snapLen != 0 && incl > snapLen {
			return linkType, recs, fmt.Errorf("pcap: record %d: incl_len %d exceeds snaplen %d", n, incl, snapLen)
		}
		if orig < incl {
			return linkType, recs, fmt.Errorf("pcap: record %d: orig_len %d smaller than incl_len %d", n, orig, incl)
		}
		if uint64(incl) > uint64(len(buf)-off) {
			return linkType, recs, fmt.Errorf("pcap: record %d: truncated data: want %d bytes, have %d", n, incl, len(buf)-off)
		}
		end := off + int(incl)
		recs = append(recs, Record{TS: ts, Data: buf[off:end:end], OrigLen: int(orig)})
		off = end
	}
	return linkType, recs, nil
}
