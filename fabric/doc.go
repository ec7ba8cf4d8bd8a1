// Package fabric owns packets on the wire: the packet buffer with real
// Ethernet/IPv6 header bytes, links (rate, propagation delay, up/down, loss
// and corruption hooks), ports with per-class egress queues (strict
// priority, RED/ECN marking, trimming, PFC and its watchdog), switches
// (ECMP, weighted path-quality ECMP, SRv6 uSID shift-and-forward, static
// FIB: one file per forwarding mode, forward_*.go), the topologies built
// from them (multi-plane 2-tier Clos, k-ary fat-tree), the addressing plan,
// counters, the ASIC telemetry and high-delay capture a control plane reads
// (telemetry.go, hdc.go) and Graphviz export.
// The hot structs' cache-line layout is layout.go's, the prefetch stages
// that rely on it prefetch.go's.
//
// fabric parses headers at fixed offsets and never interprets anything above
// UDP: it knows nothing of transports, netstack or collectives. Components
// are packet sinks in the htsim style: a Link delivers to a Port, a Port
// hands received frames to its owning Device (a Switch here, a NIC in
// package endpoint), a Device enqueues on an egress Port. Everything runs on
// one sim.Loop; nothing here reads the wall clock.
package fabric
