package endpoint

import (
	"unsafe"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// RxPrefetcher is implemented by transports that can prefetch what
// receiving a packet (BTH onwards, b) will touch; the engine calls it from
// the NIC's ingress prefetch, a few events before the packet arrives. It
// must only read.
type RxPrefetcher interface {
	PrefetchRx(b []byte)
}

// PrefetchIngress implements fabric.IngressPrefetcher, one pointer per
// stage: the NIC and its engine; the engine's QP table entry for the
// frame's destination QP; the QP slot; the transport's receive state.
func (n *NIC) PrefetchIngress(stage int, p *fabric.Packet) {
	e, ok := n.RDMA.(*Engine)
	if !ok {
		return
	}
	if stage == fabric.PrefetchDevice {
		sim.PrefetchLine(unsafe.Pointer(n))
		sim.PrefetchLine(unsafe.Pointer(e))
		sim.PrefetchLine(unsafe.Add(unsafe.Pointer(e), 64))
		return
	}
	d := p.Data
	bth := offL4 + udpLen
	if len(d) > offIP+6 && d[offIP+6] == fabric.ProtoIPv6 {
		bth += ipLen // IPv6-in-IPv6 (SRv6): the inner header first
	}
	if len(d) < bth+verbs.BTHLen {
		return
	}
	qpn, _ := verbs.DestQP(d[bth:])
	i := int(qpn) - FirstQPN
	if i < 0 || i >= len(e.qps) {
		return
	}
	switch stage {
	case fabric.PrefetchDevice + 1: // the QP table slot
		sim.PrefetchLine(unsafe.Pointer(&e.qps[i]))
	case fabric.PrefetchDevice + 2: // the QP's engine slot
		if s := e.qps[i]; s != nil {
			sim.PrefetchLine(unsafe.Pointer(s))
		}
	default:
		if s := e.qps[i]; s != nil {
			if r, ok := s.t.(RxPrefetcher); ok {
				r.PrefetchRx(d[bth:])
			}
		}
	}
}
