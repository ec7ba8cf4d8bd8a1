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
// # RDMA frames on the wire
//
// The UDP source port and the IPv6 flow label carry the packet's EV (see
// EV): the port is EV & 0xffff, always in 0xC000..0xFFFF, the label EV >>
// 16. The UDP checksum is 0, as RoCEv2 NICs send it: the transport's ICRC
// protects the packet end to end, and the ICRC itself treats the UDP
// checksum as a variant field (masked to ones when it is computed), so a
// checksum would protect nothing the ICRC does not. Linux's software RoCE
// (rdma_rxe, prepare_udp_hdr) writes 0 for IPv4 and IPv6 alike and opens
// its IPv6 socket accepting zero checksums; RFC 6935 allows a zero UDP
// checksum over IPv6 for tunnel-like protocols whose payload carries its
// own integrity check, under RFC 6936's conditions (RFC 8200 §8.1 keeps the
// exception). vcluster's ICRC is four zero bytes (not computed: the
// simulator corrupts no bit); HostOptions.RDMAChecksum computes the UDP
// checksum instead, for captures checked by tools that insist on one.
// Wireshark flags the zero IPv6 checksum unless udp.ignore_ipv6_zero_checksum
// is set (tools/wireshark/README.md).
//
// endpoint knows the fabric's packets, ports, addressing plan and uSID path
// encoding (fabric.Topology.PathUSID), never switch internals (queues,
// forwarding tables, PFC accounting). Everything runs on the one sim.Loop:
// nothing here starts goroutines (except netstack's own TCP processors when
// HostOptions.TCP is set), sleeps or reads the wall clock. Netstack's clock
// is sim.NetstackClock and its random sources are seeded from the run seed,
// so runs replay byte for byte.
package endpoint
