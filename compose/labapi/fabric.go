package labapi

import "github.com/vcluster/vcluster/compose/labspec"

// The fabric process's endpoints.
const (
	FabricHealthPath  = "/v1/health"  // GET → FabricHealth (200 once the loop answers; docker healthchecks call it)
	FabricStatusPath  = "/v1/status"  // GET → FabricStatus
	FabricFaultsPath  = "/v1/faults"  // POST a fault plan (YAML, as `vcluster drill` takes) → FaultResponse
	FabricCapturePath = "/v1/capture" // GET ?port=NAME → a pcapng stream of that port until the client leaves
	FabricGraphPath   = "/v1/graph"   // GET ?format=dot|svg → the topology (links down shown as such)
	FabricPortsPath   = "/v1/ports"   // GET → []string, the port names capture takes
	MetricsPath       = "/metrics"    // Prometheus text format (both processes)
)

// FabricHealth is GET /v1/health: cheap, for healthchecks.
type FabricHealth struct {
	State     string `json:"state"`  // "up" while the loop answers, "stopping" after
	Planes    []int  `json:"planes"` // the planes this process runs
	Tunnel    string `json:"tunnel"` // the tunnel UDP address
	VirtualNs int64  `json:"virtual_ns"`
	UptimeNs  int64  `json:"uptime_ns"`
}

// FabricStatus is GET /v1/status.
type FabricStatus struct {
	Listen      string            `json:"listen"`       // the tunnel UDP address
	Planes      []int             `json:"planes"`       // the planes this process runs
	Hosts       int               `json:"hosts"`        // hosts in the config
	Digest      string            `json:"digest"`       // hex labspec digest hosts must match
	Scaling     labspec.Scaling   `json:"scaling"`      // link-speed scaling
	VirtualNs   int64             `json:"virtual_ns"`   // the loop's virtual time
	UptimeNs    int64             `json:"uptime_ns"`    // wall time since start
	Lag         Lag               `json:"lag"`          // behind wall time
	Attached    []Attachment      `json:"attached"`     // host ports that sent a valid frame
	Drops       map[string]uint64 `json:"drops"`        // tunnel frames dropped, by reason
	FramesIn    uint64            `json:"frames_in"`    // valid tunnel frames received
	FramesOut   uint64            `json:"frames_out"`   // tunnel frames sent
	LinksDown   []string          `json:"links_down"`   // links a fault holds down now
	FaultEvents int               `json:"fault_events"` // fault events applied so far
}

// Attachment is one host NIC port's tunnel as the fabric sees it.
type Attachment struct {
	Host       int    `json:"host"`
	Plane      int    `json:"plane"`
	Addr       string `json:"addr"`         // the host's UDP address
	LastSeenNs int64  `json:"last_seen_ns"` // wall time since the last valid frame
	FramesIn   uint64 `json:"frames_in"`
	FramesOut  uint64 `json:"frames_out"`
}

// FaultResponse answers POST /v1/faults: the plan was checked against the
// running fabric and scheduled from now (its times are offsets from the
// moment it was received).
type FaultResponse struct {
	Events  int    `json:"events"`   // events scheduled
	StartNs int64  `json:"start_ns"` // the fabric's virtual time the plan's 0 maps to
	Summary string `json:"summary"`  // one line per event, as drill prints them
}
