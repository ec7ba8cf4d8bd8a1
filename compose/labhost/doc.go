// Package labhost is `vcluster host`: one virtual host of a lab — its
// netstack, NIC, RDMA transport (MRC or RoCE) and collectives — as a real
// process on a real-time loop, reaching the fabric process over the lab's
// UDP tunnels (one per plane, package tunnel) and serving an HTTP API
// (labapi's host shapes: health, QPs, collectives, /metrics).
//
// The process builds the whole cluster of the lab config (cluster.New in
// real-time pacing) but only its own host is real: that host's NIC links
// leave the process through the tunnel (fabric.Link.SetExporter on its
// NIC→T0 links, fabric.AtArrival so a frame leaves when its last bit
// would reach the switch) and frames from the fabric arrive with
// Link.Arrive on its T0→NIC links. The other hosts and the switches stay
// built and idle: a few MiB for a lab of up to 64 hosts, which is what
// labs are meant for; larger labs would want a host-only build.
//
// One goroutine drives the loop (driver.go): it runs events until a work
// item (a collective) arrives and runs that item outside any event, so
// the item can itself run the loop while it waits. Collectives span
// processes: each member runs its own rank (collectives.Options.Local),
// and the members exchange QP attributes, buffer descriptors and
// per-iteration barriers through each other's HTTP APIs
// (GET /v1/exchange/{id}/{name}?for=HOST: exchange.go, collective.go).
// A host runs one collective at a time, in the order the requests came;
// every member must get the same request (the lab sends it to all). A
// member that dies (its API refuses connections) or whose rank fails (it
// publishes an abort item) ends the others' run within PeerWatchPeriod,
// naming it. Each run makes its own QPs and registers its own buffers,
// which the engine never releases: MaxRegisteredBytes bounds a host's
// life (restart it to reclaim).
//
// Real-time timing: a loopback UDP hop adds tens of microseconds and
// jitter to every frame, which a derived retransmission timeout (the base
// RTT plus queueing, cluster.DefaultRTO) of a scaled lab does not know
// about. LabTimers raises the transports' timeouts to LabRTO unless the
// config sets its own (timing.go: with the derived ones a 4 MiB
// allreduce over four hosts fails its QPs on retries; with LabRTO it
// runs without a timeout).
//
// labhost knows the lab's shapes (labspec, labapi), the tunnel frames,
// the cluster, endpoint and collectives APIs and the TUN bridge; it knows
// nothing of the fabric process but the tunnel protocol, nor of how a lab
// starts its processes.
package labhost
