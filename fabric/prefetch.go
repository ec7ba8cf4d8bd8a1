package fabric

import (
	"math/bits"
	"unsafe"

	"github.com/vcluster/vcluster/sim"
)

// fabric's handlers follow sim's prefetch pipeline (sim.Prefetcher): the
// loop calls Prefetch for the events a few places ahead of the one it
// runs, stage 0 farthest, and each stage may read only what an earlier
// one prefetched. The stages are named here, once, after what each
// prefetches.

// The stages of a frame's arrival (Link.Prefetch), one pointer per stage.
// A device other than a switch (IngressPrefetcher) is called from
// PrefetchDevice on and names its own steps after these.
const (
	PrefetchLink    = iota // the link's arrival line
	PrefetchFrame          // the frame's metadata, the receiving port's reception line
	PrefetchDevice         // the frame's header bytes, the receiving device
	PrefetchNextHop        // (headers readable) the next hop's table slot
	PrefetchEgress         // the egress port's hot lines
	PrefetchQueue          // the egress class queue, its counters, its link
)

// The stages of the end of a port's transmission (Port.Prefetch).
const (
	prefetchTxPort  = 2 // the port's hot lines
	prefetchTxQueue = 4 // the next frame's class queue, counters and link
	prefetchTxFrame = 5 // the next frame
)

// The arrival chain uses every stage sim runs, no more.
const (
	_ uint = sim.PrefetchStages - 1 - PrefetchQueue
	_ uint = PrefetchQueue - (sim.PrefetchStages - 1)
	_ uint = sim.PrefetchStages - 1 - prefetchTxFrame
)

// IngressPrefetcher is implemented by devices other than switches (NICs)
// whose Ingress reads state worth prefetching: a frame's link calls it
// from its own Prefetch for stages PrefetchDevice to
// sim.PrefetchStages-1, with the arriving frame (its header line is
// prefetched in stage PrefetchDevice, readable from the next). The same
// rules as sim.Prefetcher apply: read only.
type IngressPrefetcher interface {
	PrefetchIngress(stage int, p *Packet)
}

// Prefetch implements sim.Prefetcher for a frame's arrival, following the
// frame one pointer per stage: the link; the frame and the receiving port;
// the frame's headers and the receiving switch; then whatever the
// switch's forwarding mode looks up (uSID: the table slot of the next
// hop, the egress port, its class queue, counters and link).
func (l *Link) Prefetch(stage int, _ uint64) {
	if stage == PrefetchLink {
		sim.PrefetchLine(unsafe.Pointer(l)) // an arrival reads the first line only
		return
	}
	p, d := l.inflight.head, l.dst
	if p == nil || d == nil {
		return
	}
	switch stage {
	case PrefetchFrame:
		sim.PrefetchLine(unsafe.Pointer(p))
		sim.PrefetchLine(unsafe.Pointer(&d.Owner)) // reception's line (Port's line 1)
	case PrefetchDevice:
		if len(p.Data) > 0 {
			sim.PrefetchLine(unsafe.Pointer(&p.Data[0]))
		}
		if s, ok := d.Owner.(*Switch); ok {
			prefetch2(unsafe.Pointer(s)) // its forwarding line and counters
		} else if ip, ok := d.Owner.(IngressPrefetcher); ok {
			ip.PrefetchIngress(stage, p)
		}
	default:
		if s, ok := d.Owner.(*Switch); ok {
			if f := s.mode.forwarding(); f != nil && f.prefetch != nil {
				f.prefetch(s, stage, p)
			}
		} else if ip, ok := d.Owner.(IngressPrefetcher); ok {
			ip.PrefetchIngress(stage, p)
		}
	}
}

// Prefetch implements sim.Prefetcher for the end of a frame's
// serialization: the port, then the next frame's queue and link, then the
// next frame.
func (pt *Port) Prefetch(stage int, arg uint64) {
	if arg&0xff != evTxDone {
		return
	}
	switch stage {
	case prefetchTxPort:
		pt.prefetchHot()
	case prefetchTxQueue:
		if m := pt.qmask; m != 0 {
			pt.prefetchClass(uint8(bits.Len8(m) - 1))
		}
	case prefetchTxFrame:
		if m := pt.qmask; m != 0 {
			if p := pt.queues[bits.Len8(m)-1].head; p != nil {
				sim.PrefetchLine(unsafe.Pointer(p))
			}
		}
	}
}

// prefetchHot prefetches the cache lines every frame through the port
// touches (see the field order of Port).
func (pt *Port) prefetchHot() {
	prefetch2(unsafe.Pointer(pt))
}

// prefetchClass prefetches what queueing a frame of class c and sending
// the next one touch: the class queue, its counters, the outgoing link.
// The port's hot lines must be cached (prefetchHot, a stage earlier).
func (pt *Port) prefetchClass(c uint8) {
	if c >= NumClasses {
		return
	}
	sim.PrefetchLine(unsafe.Pointer(&pt.queues[c]))
	if pq := pt.pq; pq != nil {
		sim.PrefetchLine(unsafe.Pointer(&pq.qc[c]))
	}
	if l := pt.Tx; l != nil {
		prefetch2(unsafe.Pointer(l))
	}
}

// prefetch2 prefetches the two cache lines from b.
func prefetch2(b unsafe.Pointer) {
	sim.PrefetchLine(b)
	sim.PrefetchLine(unsafe.Add(b, cacheLine))
}
