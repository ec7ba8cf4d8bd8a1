// Package labfabric is `vcluster fabric`: the switches of a cluster config
// (cluster.BuildTopology: any preset, forwarding mode, trimming, PFC, ECN)
// on one sim.Loop in real-time pacing, with the hosts in other processes
// reached through authenticated UDP tunnels (compose/tunnel), and an HTTP
// API (compose/labapi): status, /metrics, live fault plans, pcapng
// capture of any port, and the topology graph.
//
// One goroutine runs the loop and owns everything that touches the
// topology; the tunnel reader goroutine and the HTTP handlers reach it
// only through sim.Loop.Inject. The package knows the fabric, faults and
// the tunnel protocol; it knows nothing of hosts' transports (the frames
// it carries are opaque Ethernet frames to it) nor of how a lab starts
// its processes (compose/lab).
package labfabric
