// Package roce is the RoCEv2 baseline transport: an InfiniBand RC queue
// pair over UDP 4791 with go-back-N (the IB requester/responder rules) or
// IRN-style selective repeat, and DCQCN, TIMELY or no congestion control,
// written as a pure per-QP state machine (verbs.Transport) plus its wire
// codec. It imports only the standard library, package verbs, package ib
// (PSN arithmetic) and the shared internal/ring and internal/rng; it has
// no goroutines, reads no clock and keeps no global state (but a debug
// switch its tests turn on); its only randomness (the derived UDP source
// port and flow label) comes from the seed given to New.
//
// # Reading the code
//
// A QP (qp.go) is a requester (requester.go: Send, ACK and NAK handling)
// and a responder (responder.go: Receive, ACK coalescing, the DCQCN
// notification point) sharing a control-packet queue (control.go) and a
// retransmission timer (timers.go). What go-back-N and IRN do
// differently is one small interface, reliability (reliability.go), with
// one file per mode: gbn.go and irn.go. The sending rate is another,
// congestion (cc.go): cc_dcqcn.go, cc_timely.go, cc_none.go. Per-packet
// requester state is an explicit enum with one transition function
// (inflight.go); the invariants the state keeps are stated next to it and
// checked after every step by the tests (invariants.go). The transcripts
// in testdata/dcqcn.txt and testdata/timely.txt walk through the
// congestion-control rules one input at a time.
//
// # Operations
//
// RDMA WRITE and WRITE with Immediate (verbs.OpWrite, verbs.OpWriteImm) are
// implemented, including zero-length writes. SEND/RECV, RDMA READ, atomics,
// RNR NAKs, end-to-end credits, automatic path migration and the ICRC are
// not: the package is the data-movement baseline the collectives need.
//
// # Wire format
//
// Every packet is a UDP 4791 payload in the RoCEv2 layout (IBA vol. 1 §9,
// annex A17), big-endian:
//
//	BTH   12 B  opcode | SE M PadCnt(2) TVer(4) | P_Key 0xFFFF |
//	            FECN BECN resv6 | DestQP (24, bytes 5..7) |
//	            AckReq resv7 | PSN (24, bytes 9..11)
//	RETH  16 B  VA (64) | R_Key (32) | DMA length (32)   WRITE FIRST / ONLY
//	ImmDt  4 B  immediate data                          WRITE LAST / ONLY with Immediate
//	AETH   4 B  syndrome (8) | MSN (24)                 ACKNOWLEDGE
//	payload, pad to 4 bytes (PadCnt), ICRC 4 B
//
// Opcodes: 0x06 WRITE FIRST, 0x07 MIDDLE, 0x08 LAST, 0x09 LAST with Imm,
// 0x0A ONLY, 0x0B ONLY with Imm, 0x11 ACKNOWLEDGE, 0x81 CNP (BTH with BECN
// set and PSN 0, then 16 reserved zero bytes, then ICRC; sent to the
// requester's QP). AETH syndromes: ACK 0x1F (credit count "invalid": writes
// consume no receive WQEs), NAK 0x60 PSN sequence error, 0x61 invalid
// request, 0x62 remote access error, 0x63 remote operational error. An ACK
// carries the PSN of the last packet it acknowledges and the responder's
// MSN; a NAK-sequence-error carries the expected PSN; an error NAK the PSN
// of the failing packet.
//
// The ICRC is written as four zero bytes: a placeholder, not the CRC32 of
// the invariant fields (the simulated fabric never delivers a corrupted
// frame, and receivers do not check it). With the payload elided (a
// virtual source region) only the headers are stored: Tx.Len counts them,
// Tx.WireLen counts headers, payload, pad and ICRC.
//
// IRN needs two extensions, both still decoded by Wireshark/tshark as
// RoCEv2: (1) its NACK is a standard AETH NAK-PSN-sequence-error whose BTH
// PSN is the cumulative acknowledgement (the expected PSN, as in any
// sequence-error NAK) and whose MSN field carries the PSN of the
// out-of-order packet that triggered it (the 1-block SACK); a go-back-N
// requester reading it does the right thing. (2) As proposed in the IRN
// paper, every WRITE packet carries a RETH (with its own VA and the
// message's DMA length), so that an out-of-order MIDDLE or LAST packet can
// be placed directly; tshark shows that RETH as payload bytes. Decode takes
// the mode (rethEvery). Both ends of a connection must use the same
// Reliability.
//
// # Entropy value
//
// A RoCE QP uses one fixed UDP source port, so ECMP pins the flow to one
// path. Tx.EV = SrcPort&^0xf | Plane | FlowLabel<<16: bits 0..3 are the
// plane (the NIC port), bits 4..13 the source port's upper bits (the path
// choice under uSID), bits 14..15 always set (ports 49152..65535), bits 16..31 the flow label; the UDP source port on
// the wire is EV & 0xffff. Config.SrcPort 0 derives a port in
// 49152..65535 from the QPN and seed. All packets of a QP (data and
// control) use its EV, so both ends of a connection must be given the same
// Config.Plane (package cluster spreads a host's QPs round robin over the
// planes and gives the responder end the requester's plane).
//
// # Reliability
//
// Go-back-N (Config.Reliability "gbn") follows IB RC: the responder places
// in-order packets only, drops out-of-order ones and sends one
// NAK-sequence-error per gap; it acknowledges every AckEvery in-order
// packets and at once a packet with AckReq (set on each message's last
// packet), and acknowledges duplicates. The requester resends from the
// NAKed PSN, or from the oldest unacknowledged PSN when the local ACK
// timer (restarted by every response, IB o9-85) expires; a timeout, or a
// NAK that brings no progress, counts against RetryCount, reset by
// progress; past it the oldest request completes with RETRY_EXCEEDED and
// the rest with FLUSHED. A bad R_Key or range makes the responder NAK
// (remote access error) and go to ERROR; the requester completes the
// failing request with REMOTE_ACCESS_ERROR, flushes the rest and goes to
// ERROR too (RC semantics).
//
// IRN ("irn"; Mittal et al., SIGCOMM 2018) places out-of-order packets at
// once (a bitmap of Config.IRN.OOOWindow packets), NACKs every
// out-of-order packet with the cumulative ack and its PSN (a repeated NACK
// for an already-held packet at most once per NackIntervalNs), and while
// holes remain acknowledges every packet. The requester keeps a SACK bit
// per packet; on the first NACK it enters recovery (recovery_seq =
// snd_max), retransmits from the cumulative ack every un-SACKed packet
// below the highest SACK, retransmissions before new data, and exits when
// the cumulative ack passes recovery_seq. The timeout is RTO_low (100 µs)
// with at most 3 packets in flight and RTO_high (320 µs) otherwise; on it
// every un-SACKed outstanding packet is resent. BDP-FC caps snd_max −
// snd_una at BDPBytes/PMTU packets. One addition, on by default
// (IRN.LostRetxDetect): once a packet first sent after a retransmission is
// SACKed, the retransmission is known lost (a RoCE flow follows one FIFO
// path) and is sent again without waiting for the RTO — Linux TCP's
// lost-retransmit detection.
//
// # Congestion control
//
// Sending is rate based: data packets (retransmissions too) are paced at
// the current rate, counting WireOverhead bytes of framing per packet, so
// that "line rate" is the port's rate. The pacing clock is in
// picoseconds and a packet sent in the nanosecond its deadline was
// rounded up to keeps its exact start, so one QP reaches line rate at any
// port rate and packet size. When Send must wait it returns false and
// Deadline reports when it may send. Flows start at line rate.
//
// DCQCN (CC "dcqcn") implements the reaction point in both the paper's
// event model and the ConnectX / HPCC ns-3 timer model (see DCQCNConfig),
// and the notification point: a CE-marked data packet makes the responder
// send a CNP (DSCPControl, not ECT) at most once per CNPIntervalNs. Its
// timers run lazily: each input first runs the timer events due by then,
// in time order — same-time events in the order ns-3 would run them, the
// one scheduled first first — which gives the same rates as eagerly fired
// timers with no wake-ups for idle QPs. TIMELY (CC "timely") adapts the
// rate to the RTT gradient, with RTT samples taken from ACKs (send time
// of the acknowledged packet; retransmitted packets give none), once per
// RTT. "none" sends at line rate.
//
// Presets are named after their source (Presets, SetPreset); DefaultConfig
// is go-back-N with dcqcn_hpcc, timeout 4.096 µs × 2^7 ≈ 524 µs, 7
// retries, ACK every 4 packets. dcqcn_hpcc (DCQCNHPCC, HPCC ns-3 run.py
// "dcqcn": g 1/256, α/decrease/increase timers 1/4/300 µs, F 1, RAI
// 5·bw/25 Mb/s, RHAI 50·bw/25 Mb/s, scaled in 128-bit arithmetic so that
// they are exact at every port rate, MinRate 1 Gb/s, CNP interval 4 µs as
// ConnectX); dcqcn_hpcc_paper (DCQCNHPCCPaper, run.py "dcqcn_paper": the
// same with timers 50/50/55 µs); dcqcn_sigcomm15 (DCQCNSigcomm15, the
// DCQCN paper's event model: g 1/256, τ 50 µs, τ′ 55 µs, T 55 µs, B 10
// MB, F 5, R_AI 40 Mb/s; R_HAI 400 Mb/s and MinRate 1 Gb/s are
// assumptions); dcqcn_hpcc_g4_slow2 and dcqcn_hpcc_g16_slow4
// (DCQCNAggressive, this package's "more" and "most aggressive" variants
// for T6); timely_hpcc (TimelyHPCC, run.py "timely": the paper's T_low 50
// µs, T_high 500 µs, minRTT 20 µs, EWMA 0.875, β 0.8, with δ = bw Mb/s,
// HAI 5δ and ns-3's stage count); timely_sigcomm15 (TimelySigcomm15, the
// paper's δ 10 Mb/s, HAI 5δ after 5 non-positive gradients). The old
// names dcqcn_paper, dcqcn_aggressive, dcqcn_most_aggressive and timely
// are refused with their successors (RenamedPresets).
//
// # Control packets
//
// ACK, NAK and CNP use DSCPControl and are not ECN-capable; data uses
// DSCPRoCE (the PFC lossless class) and ECT(0). Control packets go out
// whatever freePlanes says (on the QP's plane); data needs the plane's bit.
package roce
