package labapi

// A host process's endpoints.
const (
	HostHealthPath      = "/v1/health"      // GET → HostHealth (200 when attached and running)
	HostCollectivesPath = "/v1/collectives" // POST CollectiveRequest → CollectiveResponse
	HostQPsPath         = "/v1/qps"         // GET → []QPInfo
)

// HostHealth is GET /v1/health.
type HostHealth struct {
	Host      int    `json:"host"`
	State     string `json:"state"`     // "up" once its tunnels have had an answer from the fabric, "starting" before
	Transport string `json:"transport"` // transport.kind
	Fabric    string `json:"fabric"`    // the fabric's tunnel address
	Address   string `json:"address"`   // the host's plane-0 IPv6 address
	Digest    string `json:"digest"`    // hex labspec digest
	VirtualNs int64  `json:"virtual_ns"`
	Lag       Lag    `json:"lag"`
	PID       int    `json:"pid"`
}

// Peer is a member of a collective: a host and where its API listens.
type Peer struct {
	Host int    `json:"host"`
	API  string `json:"api"` // host:port
}

// CollectiveRequest is POST /v1/collectives. Every member gets the same
// request (the lab sends it to all of them); each runs its own rank —
// the rank is the host's position in Peers.
type CollectiveRequest struct {
	// ID names this run on every member (the members exchange QPs and
	// buffers under it); unique per run.
	ID        string `json:"id"`
	Op        string `json:"op"`        // allreduce, allgather, reducescatter, alltoall, broadcast
	Algorithm string `json:"algorithm"` // "" = the op's default (collectives' names)
	Size      string `json:"size"`      // nccl-tests size, e.g. "16M" (units.ParseSize)
	Peers     []Peer `json:"peers"`     // all members, this host among them
	// Transport, when set, must equal the host's transport.kind (a
	// mismatch is refused, not silently run on the other transport).
	Transport string `json:"transport,omitempty"`
	Iters     int    `json:"iters,omitempty"`  // timed iterations (default 1)
	Warmup    int    `json:"warmup,omitempty"` // untimed iterations
	// TimeoutMs bounds the whole run in wall time (default 30000): a
	// member that stops answering ends it with an error naming it.
	TimeoutMs int `json:"timeout_ms,omitempty"`
}

// CollectiveResponse answers POST /v1/collectives (status 200 even when
// the collective failed: Error says why; 400 for a bad request).
type CollectiveResponse struct {
	Host     int     `json:"host"`
	Rank     int     `json:"rank"`
	Op       string  `json:"op"`
	Algo     string  `json:"algo"`
	Ranks    int     `json:"ranks"`
	Bytes    uint64  `json:"bytes"`
	Count    uint64  `json:"count"`
	TimeNs   int64   `json:"time_ns"` // this rank's mean iteration, virtual time
	AlgBW    float64 `json:"algbw_GBps"`
	BusBW    float64 `json:"busbw_GBps"`
	Verified bool    `json:"verified"` // this rank's output equals the direct computation
	Wrong    int64   `json:"wrong"`    // wrong elements on this rank (-1 unchecked)
	Row      string  `json:"row"`      // the nccl-tests row for this rank
	Error    string  `json:"error,omitempty"`
	// FailedPeer is the host that stopped answering or failed the QP,
	// -1 when none is to blame.
	FailedPeer int `json:"failed_peer"`
}

// QPInfo is one QP in GET /v1/qps.
type QPInfo struct {
	QPN      uint32            `json:"qpn"`
	Peer     int               `json:"peer_host"`
	State    string            `json:"state"`
	Plane    int               `json:"plane"` // single-plane transports; -1 for multipath
	EVs      []EVInfo          `json:"evs,omitempty"`
	Counters map[string]uint64 `json:"counters"`
}

// EVInfo is one entropy value of a multipath QP (MRC).
type EVInfo struct {
	EV    uint32 `json:"ev"`
	Plane int    `json:"plane"`
	State string `json:"state"`
}
