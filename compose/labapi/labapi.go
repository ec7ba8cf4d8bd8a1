// Package labapi holds the JSON shapes of the lab processes' HTTP APIs,
// which `vcluster lab` and users' scripts read: the fabric's
// (fabric.go) and a host's (host.go). Only types and constants live
// here, so a client needs neither server.
//
// Every endpoint answers JSON; an error is an HTTP status ≥ 400 with an
// Error body.
package labapi

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}

// Lag is how far a real-time loop ran behind wall time, over its events.
type Lag struct {
	Events int64 `json:"events"`
	P50Ns  int64 `json:"p50_ns"`
	P99Ns  int64 `json:"p99_ns"`
	MaxNs  int64 `json:"max_ns"`
	// Early counts events run before their wall time (must stay 0).
	Early int64 `json:"early"`
}

// Ready is what a lab process (vcluster fabric, vcluster host) writes to
// its --ready-file, atomically, once it listens and serves.
type Ready struct {
	PID    int    `json:"pid"`
	API    string `json:"api"`    // the HTTP API's host:port
	Tunnel string `json:"tunnel"` // the tunnel socket's host:port
}
