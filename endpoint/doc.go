// Package endpoint is the virtual host: one gVisor netstack per host with a
// single netstack NIC (IPv6 + UDP + ICMPv6, TCP on request), and the NIC
// that links it to the fabric — a custom stack.LinkEndpoint that owns one
// fabric port per plane.
//
// The NIC serializes what netstack sends into fabric packets (Ethernet +
// IPv6, and in SRv6 uSID mode an IPv6-in-IPv6 outer header whose destination
// is the uSID path), and on receive decapsulates, propagates ECN (RFC 6040),
// hands RoCEv2 (UDP 4791) to the host's RDMAEngine and everything else up
// into netstack. RDMA transports never go through netstack sockets: they
// build frames through NIC.AllocRDMA / NIC.SendRDMA, which write the headers
// directly with gvisor's pkg/tcpip/header (see EV for the entropy mapping).
// Hosts answer ICMPv6 pings through netstack and can send them (Host.Ping).
//
// endpoint knows the fabric's packets, ports, addressing plan and uSID path
// encoding (fabric.Topology.PathUSID), never switch internals (queues,
// forwarding tables, PFC accounting). Everything runs on the one sim.Loop:
// nothing here starts goroutines (except netstack's own TCP processors when
// HostOptions.TCP is set), sleeps or reads the wall clock. Netstack's clock
// is sim.NetstackClock and its random sources are seeded from the run seed,
// so runs replay byte for byte.
package endpoint
