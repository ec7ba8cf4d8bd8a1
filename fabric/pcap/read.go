package pcap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
)

// Record is one packet read back by ReadAll or Read.
type Record struct {
	// TS is the capture time in nanoseconds (microsecond files are scaled).
	TS int64
	// Data is the captured bytes (incl_len of them).
	Data []byte
	// OrigLen is the length of the packet on the wire.
	OrigLen int
	// Iface is the packet's interface (pcapng; 0 in a classic file) and
	// Dir its direction (pcapng epb_flags; DirUnknown when absent).
	Iface uint32
	Dir   Direction
}

// File is a whole capture read back by Read.
type File struct {
	// NG reports a pcapng file (else classic pcap).
	NG bool
	// Interfaces are the pcapng file's interfaces in id order; a classic
	// file has one, with the link type and snapshot length of its header.
	Interfaces []Interface
	Records    []Record
}

// Read reads a whole capture, classic pcap (as ReadAll) or pcapng, told
// apart by their first four bytes.
//
// A pcapng file must hold one section, in either byte order. Read takes
// its Interface Description Blocks (if_name, if_description, if_tsresol,
// if_tsoffset) and Enhanced Packet Blocks (epb_flags' direction bits) and
// skips every other block. It is strict like ReadAll: a truncated block or
// option, a block length that is not a multiple of 4 or differs from its
// trailing copy, a second section, a packet on an undeclared interface, a
// captured length beyond the snapshot length, the original length or the
// block, or a timestamp outside 0..MaxInt64 ns is an error. It never
// panics. The Data slices share one buffer holding the whole input.
func Read(r io.Reader) (*File, error) {
	buf, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("pcap: read: %w", err)
	}
	if len(buf) >= 4 && binary.LittleEndian.Uint32(buf) == blockSHB {
		return parseNG(buf)
	}
	lt, snap, recs, err := parse(buf)
	if err != nil {
		return nil, err
	}
	return &File{Interfaces: []Interface{{LinkType: lt, SnapLen: snap, TSResol: TSResolNanos}}, Records: recs}, nil
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
	lt, _, recs, err := parse(buf)
	return lt, recs, err
}

var (
	errShortGlobalHeader = errors.New("pcap: truncated global header")
	errBadMagic          = errors.New("pcap: unknown magic number")
)

// parse reads a classic file: its link type, snapshot length and records.
func parse(buf []byte) (linkType, snapLen uint32, recs []Record, err error) {
	if len(buf) < globalHeaderLen {
		return 0, 0, nil, errShortGlobalHeader
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
			return 0, 0, nil, fmt.Errorf("%w 0x%08x", errBadMagic, m)
		}
	}
	if major := order.Uint16(buf[4:6]); major != versionMajor {
		return 0, 0, nil, fmt.Errorf("pcap: unsupported major version %d", major)
	}
	snapLen = order.Uint32(buf[16:20])
	linkType = order.Uint32(buf[20:24])
	bad := func(format string, a ...any) (uint32, uint32, []Record, error) {
		return linkType, snapLen, recs, fmt.Errorf("pcap: record %d: "+format, append([]any{len(recs)}, a...)...)
	}

	off := globalHeaderLen
	for off < len(buf) {
		if len(buf)-off < recordHeaderLen {
			return bad("truncated record header (%d bytes)", len(buf)-off)
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
				return bad("nanoseconds %d out of range", frac)
			}
			ts = int64(sec)*1e9 + int64(frac)
		} else {
			if frac >= 1e6 {
				return bad("microseconds %d out of range", frac)
			}
			ts = int64(sec)*1e9 + int64(frac)*1e3
		}
		if snapLen != 0 && incl > snapLen {
			return bad("incl_len %d exceeds snaplen %d", incl, snapLen)
		}
		if orig < incl {
			return bad("orig_len %d smaller than incl_len %d", orig, incl)
		}
		if uint64(incl) > uint64(len(buf)-off) {
			return bad("truncated data: want %d bytes, have %d", incl, len(buf)-off)
		}
		end := off + int(incl)
		recs = append(recs, Record{TS: ts, Data: buf[off:end:end], OrigLen: int(orig)})
		off = end
	}
	return linkType, snapLen, recs, nil
}

// ngIface is what reading packets needs of an interface.
type ngIface struct {
	snap     uint32
	tsresol  uint8
	tsoffset int64 // seconds
}

// parseNG reads a pcapng file of one section.
func parseNG(buf []byte) (*File, error) {
	f := &File{NG: true}
	var (
		order  binary.ByteOrder
		ifaces []ngIface
	)
	for off, n := 0, 0; off < len(buf); n++ {
		fail := func(format string, a ...any) (*File, error) {
			return nil, fmt.Errorf("pcapng: block %d at byte %d: "+format, append([]any{n, off}, a...)...)
		}
		rest := buf[off:]
		if len(rest) < 12 {
			return fail("truncated block header (%d bytes)", len(rest))
		}
		typ := binary.LittleEndian.Uint32(rest)
		if typ == blockSHB {
			if order != nil {
				return fail("a second section (one is supported)")
			}
			switch bom := binary.LittleEndian.Uint32(rest[8:]); bom {
			case byteOrderMagic:
				order = binary.LittleEndian
			case bits.ReverseBytes32(byteOrderMagic):
				order = binary.BigEndian
			default:
				return fail("bad byte-order magic 0x%08x", bom)
			}
		} else if order == nil {
			return fail("block type 0x%08x before the section header", typ)
		}
		typ = order.Uint32(rest)
		size := order.Uint32(rest[4:])
		switch {
		case size < 12 || size%4 != 0:
			return fail("block length %d is not a multiple of 4 of at least 12", size)
		case uint64(size) > uint64(len(rest)):
			return fail("truncated block: length %d, %d bytes left", size, len(rest))
		case order.Uint32(rest[size-4:]) != size:
			return fail("trailing length %d differs from %d", order.Uint32(rest[size-4:]), size)
		}
		body := rest[8 : size-4]
		off += int(size)
		switch typ {
		case blockSHB:
			if len(body) < 16 {
				return fail("section header body of %d bytes", len(body))
			}
			if major := order.Uint16(body[4:]); major != 1 {
				return fail("unsupported major version %d", major)
			}
			if err := walkOptions(body[16:], order, nil); err != nil {
				return fail("%v", err)
			}
		case blockIDB:
			if len(body) < 8 {
				return fail("interface description body of %d bytes", len(body))
			}
			ifc := Interface{LinkType: uint32(order.Uint16(body)), SnapLen: order.Uint32(body[4:]), TSResol: 6}
			ni := ngIface{snap: ifc.SnapLen, tsresol: 6}
			err := walkOptions(body[8:], order, func(code uint16, v []byte) error {
				switch code {
				case optIfName:
					ifc.Name = string(v)
				case optIfDesc:
					ifc.Description = string(v)
				case optIfTSResol:
					if len(v) != 1 {
						return fmt.Errorf("if_tsresol of %d bytes", len(v))
					}
					ifc.TSResol, ni.tsresol = v[0], v[0]
				case optIfTSOffset:
					if len(v) != 8 {
						return fmt.Errorf("if_tsoffset of %d bytes", len(v))
					}
					ni.tsoffset = int64(order.Uint64(v))
				}
				return nil
			})
			if err != nil {
				return fail("%v", err)
			}
			f.Interfaces = append(f.Interfaces, ifc)
			ifaces = append(ifaces, ni)
		case blockEPB:
			if len(body) < 20 {
				return fail("enhanced packet body of %d bytes", len(body))
			}
			id := order.Uint32(body)
			units := uint64(order.Uint32(body[4:]))<<32 | uint64(order.Uint32(body[8:]))
			incl, orig := order.Uint32(body[12:]), order.Uint32(body[16:])
			if uint64(id) >= uint64(len(ifaces)) {
				return fail("interface %d of %d", id, len(ifaces))
			}
			ni := ifaces[id]
			switch {
			case uint64(incl)+uint64(pad4(int(incl&3))) > uint64(len(body)-20):
				return fail("captured length %d beyond the block", incl)
			case orig < incl:
				return fail("original length %d smaller than captured length %d", orig, incl)
			case ni.snap != 0 && incl > ni.snap:
				return fail("captured length %d exceeds snaplen %d", incl, ni.snap)
			}
			ts, ok := nanos(units, ni.tsresol, ni.tsoffset)
			if !ok {
				return fail("timestamp %d (if_tsresol %#x, if_tsoffset %d) is not 0..MaxInt64 ns", units, ni.tsresol, ni.tsoffset)
			}
			end := 20 + int(incl)
			r := Record{TS: ts, Data: body[20:end:end], OrigLen: int(orig), Iface: id}
			err := walkOptions(body[end+pad4(int(incl)):], order, func(code uint16, v []byte) error {
				if code != optEpbFlags {
					return nil
				}
				if len(v) != 4 {
					return fmt.Errorf("epb_flags of %d bytes", len(v))
				}
				if r.Dir = Direction(order.Uint32(v) & 3); r.Dir == 3 {
					return errors.New("epb_flags direction 3 (undefined)")
				}
				return nil
			})
			if err != nil {
				return fail("%v", err)
			}
			f.Records = append(f.Records, r)
		}
	}
	if order == nil {
		return nil, errors.New("pcapng: no section header")
	}
	return f, nil
}

// walkOptions calls fn (if not nil) for each option of b up to
// opt_endofopt or the end of b.
func walkOptions(b []byte, order binary.ByteOrder, fn func(code uint16, v []byte) error) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("truncated option header (%d bytes)", len(b))
		}
		code, n := order.Uint16(b), int(order.Uint16(b[2:]))
		if code == optEndOfOpt {
			return nil
		}
		if 4+n+pad4(n) > len(b) {
			return fmt.Errorf("option %d of %d bytes beyond its block", code, n)
		}
		if fn != nil {
			if err := fn(code, b[4:4+n]); err != nil {
				return err
			}
		}
		b = b[4+n+pad4(n):]
	}
	return nil
}

// nanos converts a timestamp in if_tsresol units, plus if_tsoffset
// seconds, to nanoseconds; ok is false outside 0..MaxInt64.
func nanos(units uint64, tsresol uint8, offset int64) (int64, bool) {
	e := uint(tsresol & 0x7f)
	var ns uint64
	if tsresol&0x80 != 0 {
		// units / 2^e seconds: units × 10^9 >> e, in 128 bits.
		hi, lo := bits.Mul64(units, 1e9)
		switch {
		case e >= 128:
			ns = 0
		case e >= 64:
			ns = hi >> (e - 64)
		case hi>>e != 0:
			return 0, false
		default:
			ns = lo>>e | hi<<(64-e) // hi<<64 is 0 in Go
		}
	} else if e <= 9 {
		m := pow10(9 - e)
		if units > math.MaxInt64/m {
			return 0, false
		}
		ns = units * m
	} else if e-9 < 20 {
		ns = units / pow10(e-9)
	}
	if ns > math.MaxInt64 {
		return 0, false
	}
	t := int64(ns)
	if offset != 0 {
		const sec = int64(1e9)
		if offset > math.MaxInt64/sec || offset < math.MinInt64/sec {
			return 0, false
		}
		o := offset * sec
		if (o > 0 && t > math.MaxInt64-o) || t+o < 0 {
			return 0, false
		}
		t += o
	}
	return t, true
}

func pow10(n uint) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}
