// Package compose is the lab half of vcluster: the same hosts and fabric
// as real processes (and, in lab-compose, containers) on a real-time
// loop. Its subpackages:
//
//   - labspec: what a lab process derives from a cluster config (link-speed
//     scaling, real-time pacing, the config digest both ends check);
//   - labapi: the JSON shapes of the fabric's and hosts' HTTP APIs;
//   - tunnel: the authenticated UDP frames between hosts and the fabric;
//   - labfabric: `vcluster fabric`, the switches of a config on one loop;
//   - labhost: `vcluster host`, one virtual host with its HTTP API;
//   - tunbridge: a host's netstack reachable from a TUN device in a
//     network namespace;
//   - lab: `vcluster lab` with its runtimes (processes; Docker later).
//
// Nothing here is imported by the simulated packages; everything here
// runs in real-time pacing and may read the wall clock (wallclock).
package compose
