package faults

import (
	"encoding/binary"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/verbs"
)

// TestProbeFrameIsMRCEVProbe: a Clustermapper probe's UDP payload is an MRC
// EV Probe endpoint request to QP 2 on the RoCEv2 port (before, its first
// four bytes were a bare sequence number, which decodes as no MRC packet),
// and the round, plane and slot read back from it.
func TestProbeFrameIsMRCEVProbe(t *testing.T) {
	pool := fabric.NewPool(9216)
	var addr, path [16]byte
	addr[0], path[0] = 0xfc, 0xfd
	for _, c := range []struct {
		round              uint32
		plane, slot, bytes int
	}{{1, 0, 0, 64}, {0xbeef, 3, 5, 64}, {7, 63, 1023, 8}} {
		seq := probeSeq(c.round, c.plane, c.slot)
		p := probeFrame(pool, addr, &path, c.bytes, seq)
		if got := binary.BigEndian.Uint16(p.Data[probePayload-fabric.UDPHeaderLen+2:]); got != fabric.RoCEv2Port {
			t.Fatalf("UDP destination port %d", got)
		}
		bth, resp, e, err := mrc.DecodeEndpoint(p.Data[probePayload:])
		if err != nil || resp || e.Op != mrc.EndpointEVProbe || bth.Opcode != mrc.OpEndpointReq || bth.DestQP != verbs.EndpointQPN {
			t.Fatalf("probe payload: %+v %+v resp %v, %v", bth, e, resp, err)
		}
		back, ok := probeSeqOf(p)
		if !ok || back != seq {
			t.Fatalf("seq %#x read back as %#x (%v)", seq, back, ok)
		}
		p.Release()
	}
}
