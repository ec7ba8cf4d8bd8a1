// Package mprdma is multipath RDMA over RoCEv2 with three loss recoveries,
// each a transport kind of its own (transport.kind): MP-RDMA's (go-back-N,
// SchemeMPRDMA), selective retransmission on a random path (SchemeRandom)
// and OrderRE's (out-of-order-degree loss detection, FNACK, redundant fast
// retransmission through the sender's ToR; SchemeOrderRE). Seed 004 is the
// design; PROTOCOLS.md §(f) and TARGETS T12/T13 add what is published.
//
// A QP is a pure state machine (verbs.Transport): inputs in, packets,
// timers and completions out; no goroutines, no clock, no global state but
// the tests' debug switch. It knows paths only as path numbers: path i is
// plane i mod Planes and the receiver's path address i / Planes there
// (docs/addressing.md, verbs.Tx.DstPath), which ECMP and static
// forwarding route over one spine. It does not know
// the fabric, the programmable ToR (package fabric) or the cluster.
//
// # Reading the code
//
// A QP (qp.go) is a requester (requester.go: paths, the congestion window
// clocked by ACKs, go-back-N, selective and fast retransmissions, the
// retransmission timer) and a responder (responder.go: the receive bitmap,
// out-of-order placement, per-packet ACKs, loss detection, FNACKs, the
// per-PSN repair timer) that meet only at the wire: Receive hands data
// packets to the responder and acknowledgements to the requester; Send
// drains the responder's control queue before new data. Config (config.go)
// is one QP's parameters; Settings the transport.mprdma / transport.orderre
// config sections.
//
// # Wire format
//
// RoCEv2 RC (package roce's codec), big-endian, UDP 4791:
//
//	data  RDMA WRITE First/Middle/Last/Only (+Imm) with a RETH on every
//	      packet (as IRN: out-of-order placement needs each packet's VA).
//	      Destination address: the receiver's path address of the path it
//	      takes (Tx.DstPath = path+1). UDP source port and flow label: the
//	      QP's one entropy value (EV; plane in bits 0..3).
//	ACK   opcode 0x11, one per data packet (ACK clocking), AETH syndrome
//	      0x1F. BTH PSN = the cumulative ack (ePSN−1), AETH MSN field = the
//	      PSN of the data packet it answers (IRN's use of the field). Source
//	      address = the path address the data arrived on (Tx.SrcPath =
//	      Rx.DstPath), so the sender and the sender's ToR learn its path.
//	      EV = the data packet's (echoed), so both directions carry one
//	      connection id (addresses + UDP source port: the ToR's group).
//	      BTH BECN = the data packet arrived CE-marked (the ECN echo).
//	      Before anything is in order the cumulative ack is InitialPSN−1:
//	      it acknowledges nothing cumulatively.
//	NAK   AETH 0x60 (PSN sequence error), BTH PSN = ePSN, MSN = the PSN
//	      of the arrival that caused it: go back N from ePSN (bitmap
//	      overflow; MP-RDMA's loss; OrderRE's fallback). Error NAKs (0x61
//	      invalid request, 0x62 remote access) carry the failing PSN, MSN =
//	      the cumulative ack. NAKs and FNACKs leave on the path and EV of
//	      the arrival that caused them (a timer's, on the last arrival's).
//	FNACK AETH 0x70 (NAK class, reserved code 16, ib/orderre), BTH PSN =
//	      the lost PSN, MSN = the cumulative ack: retransmit that PSN only.
//	      Random's selective NAK is the same packet.
//	FReTx a data packet (OrderRE) with BTH byte 8 bit 6 set and the copy
//	      count A in BTH byte 4 bits 3..0 (ib/orderre): the sender's ToR
//	      replicates it onto up to A registered fast paths.
//	signals (OrderRE, ib/orderre): group create on the first data packet
//	      after the QP was idle, group delete on the last one before it goes
//	      idle (BTH byte 8 bits 5/4 of data); register / unregister the ACK's
//	      source path as fast / slow (BTH byte 8 bits 5/4 of the ACK).
//
// Reserved bits and codes are what seed 004 §3.1 asks for; a RoCE NIC or
// Wireshark sees an ordinary RC WRITE or ACK with reserved bits set and a
// reserved NAK code.
package mprdma
