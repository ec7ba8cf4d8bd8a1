// Package mrc is the MRC (Multipath Reliable Connection) RDMA transport: a
// pure per-QP state machine (verbs.Transport) and its wire codec.
//
// A QP is a value driven by its caller (the NIC's RDMA engine or a test):
// Post queues work requests, Send produces packets, Receive consumes them,
// Tick runs timers that Deadline announces, PollCompletions drains
// completions. There are no goroutines, clocks or I/O inside; all
// randomness comes from a PCG seeded in New, so runs replay exactly.
// Only RDMA Write and Write-with-immediate exist (MRC has no Read, Send or
// Atomic, and no RNR).
//
// # Reading the code
//
// One file per concern. qp.go holds the QP and the verbs.Transport entry
// points, which dispatch to the requester — requester.go (segmenting and
// sending), ack.go (SACKs and ACKs), loss.go (NACKs, the fast-loss rule,
// retry limits), timers.go (ACK timers, stall clock, tail-loss probe,
// probes) — and to the responder (responder.go); ctrlq.go queues and
// encodes control packets; control.go takes the NIC's and the
// controller's commands. sendstate.go is the state machine of one PSN at
// the requester, with its invariants; ev.go and spray.go are the EV pool
// and the per-packet choice; nscc.go is congestion control; stats.go the
// counters; wire.go the codec. The tests' TestMain checks every invariant
// (invariants.go) after every input. testdata/ev.txt and testdata/nscc.txt
// are transcripts of the EV state machine and of NSCC.
//
// # Wire format
//
// Every packet starts with the 12-byte BTH (opcode, P_Key, destination QP
// at bytes 5..7, AckReq/rtx/TS flags at byte 8 bits 7/6/5, 24-bit PSN at
// bytes 9..11; see BTH). Then, by opcode:
//
//	0xC6..0xCB WRITE First/Middle/Last/Last+Imm/Only/Only+Imm
//	    BTH | METH 4 (RQMSN 16, MSN 16) | TSETH 4 if TS (16-bit stamp,
//	    resolution bit: 128 ns / 1 µs) | RETH 16 (VA 64 — this packet's
//	    address, advancing by PMTU — R_Key 32, DMA length 32 of the whole
//	    message) | ImmDt 4 on 0xC9/0xCB | payload | ICRC 4
//	    Offsets with TS: METH 12, TSETH 16, RETH 20, ImmDt 36, payload 36
//	    (40 with ImmDt). The payload may be elided (not stored; the length
//	    on the wire counts it); the ICRC is stored only with the payload.
//	0xD1 Transport ACK: BTH (PSN = cack) | AETH 4 (syndrome 8: 0x1F = ACK
//	    with the credit field fixed at 0x1F, 0x62/0x63 = NAK remote access
//	    / remote operational error; MSN 24) | ICRC 4            = 20 B
//	0xDC SACK: BTH | SETH 28 | CC_STATE 8 | ICRC 4             = 52 B
//	0xDD NACK: BTH | NETH 12 (code, rtx echo, timestamp echo, EV,
//	    nack_psn) | ICRC 4                                     = 28 B
//	0xDE reliability probe: BTH | PETH 8 (EV, seq, timestamp) | ICRC = 24 B
//	0xD8/0xD9 endpoint request/response on QP 0x2: BTH | ERTH/EETH 12
//	    (operation, request id, port_status_mask, status) | ICRC = 28 B
//
// The field-by-field layouts with byte offsets are on BTH, METH, TSETH,
// RETH, AETH, SETH, CCState, NETH, PETH and EndpointHeader. The ICRC is a
// placeholder of zeros: the simulated NIC does not compute it. Decoders
// never panic; they reject truncated packets, wrong opcodes and set
// reserved bits.
//
// A trimmed packet keeps only its first bytes (128 B of frame leaves as
// little as 26 B of UDP payload under IPv6-in-IPv6): the responder needs
// only the BTH (PSN, rtx) to NACK it; the requester keeps everything else
// (EV, send time, length) per PSN.
//
// # Requester
//
// WRs are segmented in post order into PSN-numbered packets of PMTU bytes;
// every packet is self-describing (RETH), so the responder places it
// wherever it lands. A packet may be sent when its PSN ≤ cack + MPR (the
// MPR of the latest SACK — Dynamic MPR — never beyond the one negotiated
// at Connect; a shrink recalls nothing already sent), cwnd ≥ inflight +
// its length, and (for the first packet of a WriteImm) fewer than MaxWImm
// WriteImms are in flight; otherwise the WR waits. Each packet goes on an
// EV picked at send time (see Spraying). AckReq is set on the last packet
// of a message and whenever a packet closes the window (cwnd or MPR).
//
// Every transmission has its own ACK timer: the base RTO (1.024 µs ×
// 2^Timeout, default 32.768 µs, or Config.RTO) for that packet's first
// RetryLinear timeouts, then doubling per timeout of that packet. ACK
// timeouts count toward the limit RetryLinear+RetryExp (RetryExp 25
// retries forever) per connection by default (RetryScope, the spec's: one
// counter, reset whenever a PSN is newly acknowledged) or per packet. The
// NACKs NO_BITMAP/NO_PKT_BUFFER/NO_RESOURCE/PSN_OOR_WINDOW count toward the
// refused packet's own limit (restarting when cack moves past it); a
// packet refused for a resource above cack+1 is held until cack moves, and
// its timer firing meanwhile releases it without counting.
// Beyond it the QP fails: the WR concerned completes StatusRetryExceeded,
// the others flush, and Err says why. The timer keeps running while a
// packet found lost waits for its retransmission, so a packet with no
// plane or EV left to go on still counts; a QP with work, nothing
// outstanding and no path at all runs the same schedule on its own clock.
// Deadline exposes the earliest timer.
// Retransmissions carry rtx, DSCP TRIMMABLE_RETX, go before new data, obey
// cwnd and take a new EV (never the lost transmission's; after a timeout,
// another plane if one qualifies). Losses are found by:
//   - NACK TRIMMED: retransmit at once, EV → SKIP, NSCC trim reaction;
//     TRIMMED_LASTHOP: the same without the EV penalty.
//   - NACK NO_BITMAP/NO_PKT_BUFFER/NO_RESOURCE/PSN_OOR_WINDOW: retransmit,
//     counting a retry; UNEXP_EVENT: QP error, StatusRemoteOp.
//   - the fast-loss rule [I] (LossDetection). LossOOO (default, htsim's
//     SLEEK): when a SACK's out-of-order count (CC_STATE) reaches
//     max(SleekMinPackets, min(SleekFactor·cwnd, maxwnd)) packets, loss
//     recovery starts (its end: the highest PSN sent so far); each SACK
//     while it lasts retransmits the unacknowledged PSNs in [cack+1,
//     min(end, cack+1+cwnd packets)) not yet retransmitted in it.
//     LossPerHole: a transmission is lost once transmissions sent that
//     threshold later have been acknowledged (first transmissions only).
//     Silent losses found either way count against their EV:
//     EVLossThreshold (2) consecutive ones make it ASSUMED_BAD.
//   - the tail-loss probe (TLPFactor, default 2): after TLPFactor ×
//     the smoothed RTT without a transmission or a new acknowledgement,
//     with data in flight and nothing queued for retransmission, the last
//     unacknowledged packet is sent again, once per silence; when it is
//     acknowledged, every transmission sent before it and still missing
//     is lost (as by the fast-loss rule).
//   - timeouts: retransmit, EV → ASSUMED_BAD (a silent loss means a failed
//     path), NSCC's timeout reaction (onTimeout).
//
// WRs complete in post order once cumulatively acknowledged.
//
// # Responder
//
// The window is [ePSN, ePSN + MPR·128). A new PSN in it is placed at once
// into registered memory at its RETH VA (mem.Bytes; a virtual region or an
// elided payload is accounted, not copied) and its bit set; ePSN advances
// over received PSNs. A PSN below ePSN draws a Transport ACK and a SACK, one
// received above ePSN a SACK, one beyond the window a NACK PSN_OOR_WINDOW; a
// trimmed one a NACK TRIMMED (TRIMMED_LASTHOP when rx.LastHop). A bad R_Key
// or range draws a Transport ACK whose AETH is the NAK "remote access
// error" (0x62): MRC separates reliability (SACK/NACK: the packet arrived)
// from semantics (the Transport ACK), so the requester fails that WR with
// StatusRemoteAccess and the QP goes to ERROR, as in RC. A malformed data
// packet (payload beyond PMTU or its DMA length) draws NACK UNEXP_EVENT.
//
// SACKs are sent when 16 KiB (SackThresholdBytes) arrived since the last,
// on AckReq, on a CE-marked arrival (M = SKIP_ONCE echoing that EV), on an
// rtx arrival, when ePSN passes a packet that asked for an ACK, and in
// answer to a probe (P flag). Each SACK reflects the triggering packet's EV
// (control packets travel back on that EV: its plane and path), its
// timestamp and its PSN (ack_offset = PSN − cack); the 64-bit bitmap starts
// at cack+1, or 47 PSNs below the triggering PSN when that is further up.
// A WriteImm completes (OpRecvImm with Imm and its length) when ePSN passes
// its last packet: the whole message and every earlier Write are then in
// memory, and WriteImms complete in order. The responder never sends
// M = ALWAYS_SKIP itself (the requester honours it).
//
// # Spraying and EV states
//
// The QP owns EVsPerQP EVs split equally across planes (bits 0..3 plane;
// PathsPerPlane > 0: bits 4..13 a path choice drawn without repetition,
// so EVs name paths one to one, at most MaxPathChoices of them; 0: random
// bits; bits 14..15 always set, so the UDP source port EV & 0xffff is in
// 0xC000..0xFFFF and never 0, as RoCEv2 NICs send). Each plane has an active
// set (ActiveSetSize split across planes) scanned in a pseudo-random order
// reshuffled every ReshuffleInterval; the remaining EVs are the plane's
// backup. Per data packet the planes are visited round robin and the first
// one that is up and in freePlanes gives its next GOOD EV.
//
//	GOOD → SKIP          SACK M = SKIP_ONCE (ECN echo), NACK TRIMMED
//	GOOD → ASSUMED_BAD   SACK M = ALWAYS_SKIP, ACK timeout, repeated silent loss
//	SKIP → GOOD          next rotation of its plane's active set once the scan has
//	                     passed it over (after SkipDuration)
//	ASSUMED_BAD → GOOD / SKIP   probe answered with M = NONE / SKIP_ONCE
//	any → DENIED / GOOD  DenyEV, DenyPath / AllowEV, AllowPath
//
// An EV leaving the active set (ASSUMED_BAD, DENIED) is replaced by a
// random usable EV from the same plane's backup; an EV returning to GOOD
// rejoins the active set if it is short. EVMinActive is a floor on usable
// (GOOD or SKIP) EVs: a transition that would go below it yields SKIP
// instead of ASSUMED_BAD. ASSUMED_BAD EVs are probed (0xDE on that EV)
// every ProbeInterval while the requester has work. SetPlaneStatus (or
// ApplyPortStatus with a peer's Port Status Update) takes a plane out of
// and back into use.
//
// With SkipDuration > 0 only GOOD EVs carry data: an active EV put in SKIP
// is swapped for a GOOD backup of the same plane (if there is one) and is
// GOOD again, as a backup, once SkipDuration has passed. Every change the
// controller can see (into or out of ASSUMED_BAD or DENIED; GOOD ⇄ SKIP
// stays inside the NIC) is kept for PollEVChanges (EVChange: time, EV,
// plane, from, to, cause), at most MaxEVChanges between polls.
//
// SKIP costs an EV exactly one turn, wherever in the rotation the echo
// arrives: an EV marked SKIP after its turn in the current rotation stays
// SKIP through the next one (returning it to GOOD at that rotation's start
// would skip nothing, and about half of all ECN echoes would penalise no
// EV). A plane whose active EVs are all in SKIP sits one rotation out and
// then sends again: SKIP never blocks sending.
//
// # Congestion control
//
// NSCC as in PROTOCOLS.md §b (see nscc.go and ResolveNSCC): window in
// bytes, quick adapt, four quadrants, fulfill, trim reaction and the
// receiver's rcv_cwnd_pen. RTT samples come from the requester's own
// full-resolution send times, matched through the SACK's ack_offset, for
// first transmissions without an rtx echo and single retransmissions with
// one (htsim's validateSendTs). The acknowledged bytes NSCC is fed are the
// responder's newly received bytes (CC_STATE received bytes, 256-B units
// modulo 2^24, as htsim's recvd_bytes).
package mrc
