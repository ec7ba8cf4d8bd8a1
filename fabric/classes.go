package fabric

// DSCP code points used on the simulated wire (documented in
// docs/addressing.md). MRC's classes follow the MRC spec's names; the values
// are vcluster's choice, as the spec leaves them to the operator.
const (
	DSCPDefault        = 0  // netstack traffic (ping, TCP, UDP apps, probes)
	DSCPTrimmable      = 10 // MRC data
	DSCPTrimmableRetx  = 12 // MRC retransmissions
	DSCPNoTrim         = 14 // MRC data exempt from trimming
	DSCPRoCE           = 26 // RoCEv2 data (lossless class when PFC is on)
	DSCPTrimmed        = 40 // trimmed by a fabric-facing port
	DSCPTrimmedLastHop = 42 // trimmed by a host-facing port
	DSCPControl        = 48 // SACK/NACK/ACK/CNP/probes: strict high priority
)

// NumClasses is the number of egress traffic classes per port.
const NumClasses = 8

// Traffic classes. Served in strict priority, highest number first.
const (
	ClassDefault = 0
	ClassData    = 1 // MRC data
	ClassRoCE    = 3 // RoCEv2 data; PFC priority 3 by default
	ClassTrimmed = 6 // trimmed headers overtake queued data
	ClassControl = 7
)

// ClassMap maps DSCP to traffic class.
type ClassMap [64]uint8

// DefaultClassMap is the DSCP→class table every port uses unless told
// otherwise.
func DefaultClassMap() ClassMap {
	var m ClassMap
	m[DSCPTrimmable] = ClassData
	m[DSCPTrimmableRetx] = ClassData
	m[DSCPNoTrim] = ClassData
	m[DSCPRoCE] = ClassRoCE
	m[DSCPTrimmed] = ClassTrimmed
	m[DSCPTrimmedLastHop] = ClassTrimmed
	m[DSCPControl] = ClassControl
	return m
}

// trimmable reports whether packets with DSCP d may be trimmed (the SAI
// DROP_AND_TRIM queues carry MRC data; NO_TRIM, RoCE and netstack traffic are
// exempt and are dropped instead).
func trimmable(d uint8) bool { return d == DSCPTrimmable || d == DSCPTrimmableRetx }
