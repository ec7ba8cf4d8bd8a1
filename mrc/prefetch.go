package mrc

import (
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// PrefetchRx implements endpoint.RxPrefetcher: the QP's lines a received
// packet reads (state, statistics, the responder's window and bitmap word,
// the requester's record of the PSN for acknowledgements). Read only.
func (q *QP) PrefetchRx(b []byte) {
	sim.PrefetchLine(unsafe.Pointer(&q.state))
	sim.PrefetchLine(unsafe.Pointer(&q.stats.MRCStats))
	sim.PrefetchLine(unsafe.Pointer(&q.ePSN))
	sim.PrefetchLine(unsafe.Pointer(&q.cack))
	if len(b) < BTHLen {
		return
	}
	psn := getPSN(b[9:])
	if IsDataOpcode(b[0]) {
		if i := psn & q.rcvMask; int(i>>6) < len(q.rcvBitmap) {
			sim.PrefetchLine(unsafe.Pointer(&q.rcvBitmap[i>>6]))
		}
		return
	}
	if len(q.recs) > 0 {
		sim.PrefetchLine(unsafe.Pointer(&q.recs[psn&q.recMask]))
	}
}
