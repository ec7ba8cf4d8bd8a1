package verbstest

import (
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// Transport is what a transport package tells the kit about itself: how to
// build a QP, and the little it must know of the transport's packets. The
// kit knows no packet format; everything format-specific comes from here.
type Transport struct {
	// Name labels failures ("mrc", "roce/irn").
	Name string
	// New builds one unconnected QP whose memory is mem.
	New func(mem *verbs.Memory, qpn uint32, seed uint64) verbs.Transport
	// IsData reports whether a packet (BTH onwards) carries Write data.
	// Required: the loss-position cases count data packets.
	IsData func(pkt []byte) bool
	// PSN returns a packet's PSN; nil reads the BTH's (bytes 9..11, where
	// RoCEv2 and MRC both keep it).
	PSN func(pkt []byte) uint32
	// HeaderLen returns the bytes a trimming switch keeps of a data packet
	// (its headers). nil declares a transport that is never trimmed (RoCE
	// rides a lossless class): Trim hooks then do nothing and the
	// conformance kit runs no trim cases.
	HeaderLen func(pkt []byte) int
	// MTU is the payload bytes of a full data packet.
	MTU int
	// Window is how many data packets the requester sends before it needs
	// feedback: the loss cases drop each position of it. 0 means 16.
	Window int
	// ZeroLength says a zero-length Write is supported.
	ZeroLength bool
	// Planes is the number of NIC ports (freePlanes has bits 0..Planes-1
	// set); 0 means 1.
	Planes int
}

func (tr *Transport) window() int {
	if tr.Window > 0 {
		return tr.Window
	}
	return 16
}

func (tr *Transport) psn(b []byte) uint32 {
	if tr.PSN != nil {
		return tr.PSN(b)
	}
	return BTHPSN(b)
}

// BTHPSN returns the 24-bit PSN of a BTH (0 when b is too short).
func BTHPSN(b []byte) uint32 {
	if len(b) < verbs.BTHLen {
		return 0
	}
	return uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11])
}

// Config shapes one Pair. The zero value is usable.
type Config struct {
	// Size is the bytes of the region each side registers (key 1); 0
	// registers none (the test registers its own).
	Size int
	// QPN of A and B; 0 means 0x000111 and 0x000222.
	QPN [2]uint32
	// InitialPSN A and B send first.
	InitialPSN [2]uint32
	// Seed of A's and B's QP; 0 means 1 and 2.
	Seed [2]uint64
	// Latency is the one-way delay of every packet in ns; 0 means 1000.
	Latency int64
}

// NewPairFunc builds a connected pair for a test; Transport.NewPair is one.
type NewPairFunc func(t testing.TB, cfg Config) *Pair

// NewPair returns two connected QPs of tr, A on host 0 and B on host 1.
func (tr Transport) NewPair(t testing.TB, cfg Config) *Pair {
	t.Helper()
	return NewPair(t, tr, cfg)
}
