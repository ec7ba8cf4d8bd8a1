// Package verbs is the RDMA API that the transports (mrc, roce), the NIC's
// RDMA engine (endpoint) and the collectives share: memory regions and
// keys, work requests, completions, QP attributes exchanged at connect,
// and Transport — the contract every per-QP transport state machine meets.
//
// verbs knows no packet format, no fabric and no clock: times are plain
// virtual nanoseconds handed in by the caller.
package verbs

import "errors"

// Opcode is the operation of a work request or completion.
type Opcode uint8

const (
	// OpWrite is an RDMA Write: local memory → remote memory, completes at
	// the requester only.
	OpWrite Opcode = iota
	// OpWriteImm is an RDMA Write with immediate data: it also produces an
	// OpRecvImm completion (carrying Imm) at the responder.
	OpWriteImm
	// OpRecvImm is the responder's completion of a WriteImm.
	OpRecvImm
)

func (o Opcode) String() string {
	switch o {
	case OpWrite:
		return "WRITE"
	case OpWriteImm:
		return "WRITE_IMM"
	case OpRecvImm:
		return "RECV_IMM"
	}
	return "?"
}

// Status is the outcome of a work request.
type Status uint8

const (
	StatusOK Status = iota
	// StatusLocalAccess: the local key or range of a work request is bad.
	StatusLocalAccess
	// StatusRemoteAccess: the responder rejected the remote key or range.
	StatusRemoteAccess
	// StatusRetryExceeded: the transport's retry limit was reached; the QP
	// is in error.
	StatusRetryExceeded
	// StatusFlushed: the QP went to error before this request completed.
	StatusFlushed
	// StatusRemoteOp: the responder reported an unexpected event
	// (MRC UNEXP_EVENT, RoCE NAK remote operational error).
	StatusRemoteOp
)

func (s Status) String() string {
	return [...]string{"OK", "LOCAL_ACCESS_ERROR", "REMOTE_ACCESS_ERROR", "RETRY_EXCEEDED", "WR_FLUSH_ERROR", "REMOTE_OP_ERROR"}[s]
}

// Work-request errors returned by Post (preallocated: posting does not
// allocate).
var (
	ErrBadKey      = errors.New("verbs: unknown memory key")
	ErrOutOfBounds = errors.New("verbs: range outside the memory region")
	ErrQPError     = errors.New("verbs: QP is in the error state")
	ErrNotReady    = errors.New("verbs: QP is not connected")
	ErrBadOpcode   = errors.New("verbs: opcode not supported by this transport")
	ErrTooLong     = errors.New("verbs: message longer than 2 GiB")
)

// WorkRequest is one posted operation.
type WorkRequest struct {
	ID        uint64 // returned in the completion
	Op        Opcode // OpWrite or OpWriteImm
	LocalKey  uint32
	LocalVA   uint64
	Length    uint64
	RemoteKey uint32
	RemoteVA  uint64
	Imm       uint32 // OpWriteImm only
}

// Completion reports a finished work request (requester) or an arrived
// WriteImm (responder, Op = OpRecvImm).
type Completion struct {
	WRID   uint64 // requester: the work request's ID; responder: 0
	QPN    uint32
	Op     Opcode
	Status Status
	Bytes  uint64 // requester: the request's length; responder: the WriteImm's length
	Imm    uint32
}

// QPState is a QP's lifecycle state.
type QPState uint8

const (
	QPReset QPState = iota // created, not connected
	QPReady                // connected: RTS in verbs terms
	QPError                // failed; outstanding requests flushed
)

func (s QPState) String() string { return [...]string{"RESET", "READY", "ERROR"}[s] }

// QPAttrs are what two QPs exchange when they connect.
type QPAttrs struct {
	Host       int    // host id in the topology
	QPN        uint32 // 24-bit queue pair number
	InitialPSN uint32 // first PSN this side will send
	// MaxPSNRange is the receive window the side offers, in units of 128
	// PSNs (MRC's MPR); 0 means the transport's default.
	MaxPSNRange int
	// MaxWImm bounds the WriteImm operations the side accepts in flight;
	// 0 means the transport's default.
	MaxWImm int
}

// CheckPost is the check every transport's Post starts with, in this
// order: the QP in state must be ready (ErrNotReady in RESET, ErrQPError
// in ERROR), wr a Write or WriteImm (ErrBadOpcode) of at most 2 GiB
// (ErrTooLong) whose local range is registered in mem (Memory.Lookup's
// error). It returns the local region. The NIC's engine runs it at post
// time too, when its transmit latency hands the post to the transport
// later.
func CheckPost(state QPState, wr WorkRequest, mem *Memory) (*MR, error) {
	switch state {
	case QPReset:
		return nil, ErrNotReady
	case QPError:
		return nil, ErrQPError
	}
	if wr.Op != OpWrite && wr.Op != OpWriteImm {
		return nil, ErrBadOpcode
	}
	if wr.Length > 1<<31 {
		return nil, ErrTooLong
	}
	return mem.Lookup(wr.LocalKey, wr.LocalVA, wr.Length)
}
