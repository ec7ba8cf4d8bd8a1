package mrc

import (
	"math/bits"

	"github.com/vcluster/vcluster/verbs"
)

// The QP's faces toward layers that know no MRC: verbs.PathHealth (the EV
// states a fault recorder logs) and verbs.PortStatusSpeaker (the Port
// Status Update the NIC engine exchanges on EndpointQPN). Both are built
// from the QP's exported controller API only.
var (
	_ verbs.PathHealth        = (*QP)(nil)
	_ verbs.PortStatusSpeaker = (*QP)(nil)
)

// PathsOutOfUse is how many of the QP's EVs are ASSUMED_BAD or DENIED.
func (q *QP) PathsOutOfUse() int {
	s := q.MRCStats()
	return s.EVAssumedBad + s.EVDenied
}

// PollPathChanges appends the EV changes since the last poll
// (PollEVChanges: into or out of ASSUMED_BAD or DENIED) to dst, with the
// states and causes by name, and forgets them. It allocates only when
// there are changes.
func (q *QP) PollPathChanges(dst []verbs.PathChange) []verbs.PathChange {
	for _, c := range q.PollEVChanges(nil) {
		dst = append(dst, verbs.PathChange{At: c.At, EV: c.EV, Plane: c.Plane, From: c.From.String(), To: c.To.String(), Cause: c.Cause.String()})
	}
	return dst
}

// EncodePortStatus writes a Port Status Update request numbered id that
// announces the ports in up, to go on the lowest up plane (path choice 0,
// the id as flow label).
func (q *QP) EncodePortStatus(buf []byte, id uint16, up uint32) (int, uint32, error) {
	n, err := EncodePortStatus(buf, id, up)
	return n, MakeEV(bits.TrailingZeros32(up), 0, id), err
}

// PortStatus returns the up-mask of a Port Status Update request, or false
// for any other endpoint packet (EV Probes, responses, garbage).
func (q *QP) PortStatus(pkt []byte) (uint32, bool) {
	_, resp, h, err := DecodeEndpoint(pkt)
	if err != nil || resp || h.Op != EndpointPortStatus {
		return 0, false
	}
	return h.PortStatusMask, true
}
