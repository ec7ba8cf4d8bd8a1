package verbs

// Tx describes one packet a transport produced in Transport.Send.
type Tx struct {
	// Len is how many bytes the transport wrote into the buffer: BTH,
	// extension headers and the stored payload (and ICRC when stored).
	Len int
	// WireLen is the UDP payload length on the wire: headers, the full
	// payload and the 4-byte ICRC, whether or not the payload is stored.
	WireLen int
	DstHost int
	// EV selects the path (see endpoint.EV): bits 0..3 plane, 4..13 path
	// choice within the plane (the T1 in a Clos under uSID forwarding),
	// 14..15 always set (UDP source ports 49152..65535), 16..31 flow label. It becomes the UDP source port (low 16 bits) and
	// the IPv6 flow label (high 16 bits).
	EV   uint32
	DSCP uint8 // fabric DSCP: data, retransmission, control, NO_TRIM, RoCE
	ECT  bool  // mark the packet ECN-capable (ECT(0))
	// DstPath and SrcPath, when not 0, put path addresses in the IPv6
	// header (docs/addressing.md): DstHost's address for path DstPath−1 as
	// the destination, this host's for path SrcPath−1 as the source. ECMP
	// and static forwarding route a path address over that path (the
	// spine in a leaf-spine); 0 is the plain host address.
	DstPath, SrcPath uint16
}

// Rx is one received packet as a transport sees it.
type Rx struct {
	// Data is the UDP payload as stored: BTH onwards. It may be shorter
	// than WireLen when the payload was elided or the packet trimmed.
	Data    []byte
	WireLen int // the UDP length field minus 8: the payload on the wire
	SrcHost int
	Plane   int
	EV      uint32 // rebuilt from UDP source port and flow label
	CE      bool   // Congestion Experienced (outer CE merged per RFC 6040)
	// Trimmed reports a switch cut the packet to its headers; LastHop that
	// the trim happened on a host-facing port (DSCP TRIMMED_LASTHOP).
	Trimmed, LastHop bool
	// DstPath and SrcPath are the path fields of the destination and
	// source addresses (Tx.DstPath, Tx.SrcPath: 0 for a host address).
	DstPath, SrcPath uint16
}

// Transport is one QP's transport as a pure state machine: the NIC's RDMA
// engine feeds it inputs and collects its outputs; it never reads a clock,
// starts a goroutine, or touches the fabric. Every method is called on the
// loop goroutine with the current virtual time in nanoseconds.
//
// The engine's contract:
//   - After Post, Receive and Tick it calls Send repeatedly (while Send
//     reports a packet and a plane has room), then reads Deadline and
//     re-arms the QP's single timer, and drains PollCompletions.
//   - freePlanes has bit p set when plane p's NIC port has room for a data
//     packet. Control packets (ACK, SACK, NACK, CNP, probes) may be sent on
//     any plane whose port exists, whatever freePlanes says.
//   - buf is at least MaxTxBytes long; the transport writes its packet there
//     (the engine adds Ethernet/IPv6/UDP and copies it into a frame).
//   - A rate-limited transport that has data but must wait returns false
//     from Send and reports the time it may send again through Deadline.
type Transport interface {
	// QPN returns the local queue pair number.
	QPN() uint32
	// State returns RESET before Connect, READY after, ERROR once failed.
	State() QPState
	// Connect sets the remote side's attributes and moves the QP to READY.
	Connect(local, remote QPAttrs) error
	// Post validates and queues a work request. Errors are the Err*
	// values of this package; an error means nothing was queued.
	Post(now int64, wr WorkRequest) error
	// Send produces the next packet, if any, into buf.
	Send(now int64, freePlanes uint32, buf []byte) (Tx, bool)
	// Receive consumes one packet addressed to this QP.
	Receive(now int64, rx *Rx)
	// Deadline returns the earliest time the QP needs Tick (timers,
	// pacing), if any.
	Deadline() (int64, bool)
	// Tick runs the QP's timers due at now.
	Tick(now int64)
	// PollCompletions appends finished completions to dst and forgets them.
	PollCompletions(dst []Completion) []Completion
	// Stats returns the QP's counters.
	Stats() QPStats
}

// MaxTxBytes is the size of the buffer Send writes into: room for the
// largest transport headers and a 4096-byte payload plus ICRC.
const MaxTxBytes = 4096 + 256

// QPStats are per-QP counters common to the transports; a transport leaves
// the ones it has no notion of at zero.
type QPStats struct {
	DataPacketsSent    uint64 // first transmissions
	Retransmissions    uint64
	ControlPacketsSent uint64 // ACK, SACK, NACK, CNP, probes
	BytesPosted        uint64
	BytesCompleted     uint64 // requester: acknowledged and completed
	BytesPlaced        uint64 // responder: placed into memory
	DuplicatesReceived uint64
	TrimmedReceived    uint64 // responder: trimmed packets seen
	NacksReceived      uint64
	Timeouts           uint64
	ECNMarksReceived   uint64 // responder: CE-marked data packets
	CNPsSent           uint64
	CNPsReceived       uint64
	RTTSamples         uint64
	LastRTT            int64 // ns
	MinRTT             int64 // ns
	CwndBytes          int64 // congestion window (window-based CC)
	RateBps            int64 // sending rate (rate-based CC)
}

// DSCP code points a transport puts in Tx.DSCP. They equal the fabric's
// (fabric.DSCP*; a test in package endpoint keeps them in step), repeated
// here because transports must not import the fabric.
const (
	DSCPTrimmable      = 10 // MRC data
	DSCPTrimmableRetx  = 12 // MRC retransmissions
	DSCPNoTrim         = 14 // MRC data exempt from trimming
	DSCPRoCE           = 26 // RoCEv2 data (the PFC lossless class)
	DSCPTrimmed        = 40 // set by a switch that trimmed the packet
	DSCPTrimmedLastHop = 42 // set by a host-facing switch port that trimmed it
	DSCPControl        = 48 // ACK, SACK, NACK, CNP, probes
)

// BTH field offsets shared by RoCEv2 and MRC: the engine reads the
// destination QP to route a packet to its transport.
const (
	BTHLen        = 12
	BTHDestQPOff  = 5 // 24-bit destination QP at bytes 5..7
	RoCEv2UDPPort = 4791
)

// EndpointQPN is the QP number reserved for the NICs' own endpoint-to-endpoint
// messages (MRC's Port Status exchange): no transport QP is given it.
const EndpointQPN = 0x2

// DestQP returns the BTH destination QP of a received UDP payload, or
// false when it is too short to hold a BTH.
func DestQP(b []byte) (uint32, bool) {
	if len(b) < BTHLen {
		return 0, false
	}
	return uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]), true
}

// PathHealth is implemented by a multipath transport that judges its own
// paths (entropy values) and takes the bad ones out of use (MRC: EVs
// ASSUMED_BAD after losses, DENIED by a controller). It is what a fault
// recorder reads of a QP; a transport without per-path state (RoCE: one
// flow, one path) does not implement it.
type PathHealth interface {
	QPN() uint32
	// PathsOutOfUse is how many of the QP's paths are out of use now.
	PathsOutOfUse() int
	// PollPathChanges appends the path state changes since the last call
	// to dst and forgets them.
	PollPathChanges(dst []PathChange) []PathChange
}

// PathChange is one path's change of state, in the transport's own words.
type PathChange struct {
	At       int64 // ns: the virtual time of the input that caused it
	EV       uint32
	Plane    int
	From, To string // state names (MRC: "GOOD", "ASSUMED_BAD", "DENIED", …)
	Cause    string // why (MRC: "timeout", "silent-loss", "deny", …)
}

// PortStatusSpeaker is implemented by a transport whose NICs tell each
// other when a NIC port's link goes down or comes back (MRC's Port Status
// Update: an endpoint request on EndpointQPN), so that both directions of
// a connection stop using a plane whose port died on either side. The NIC's
// engine runs the exchange: on a link change it sends one update to every
// peer host its speaking QPs talk to, and hands an update it receives to
// every speaking QP connected to the sender. The transport only owns the
// message's wire format and what an update does to it.
type PortStatusSpeaker interface {
	// Remote returns the connected peer's attributes (its Host).
	Remote() QPAttrs
	// EncodePortStatus writes the update announcing that the ports in up
	// (bit p: plane p) are up, with request id id, into buf, and returns
	// its length and the entropy value to send it on.
	EncodePortStatus(buf []byte, id uint16, up uint32) (n int, ev uint32, err error)
	// PortStatus reads an endpoint packet (BTH onwards) and returns the
	// up-mask it carries, or false when it is not a port status update.
	PortStatus(pkt []byte) (up uint32, ok bool)
	// ApplyPortStatus applies the peer's up-mask.
	ApplyPortStatus(up uint32)
}
