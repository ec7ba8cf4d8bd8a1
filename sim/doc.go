// Package sim owns virtual time: the deterministic discrete-event loop, its
// timers and tie-break (ranked events first, by rank, then scheduling order),
// the two pacings (simulated and real-time), the conservative parallel run of
// several loops, the process-wide interrupt that stops every run at an event
// boundary, seeded per-component random streams, and the adapter that lets
// gVisor netstack run on the loop's clock.
//
// sim knows nothing about packets, switches, hosts or transports. It never
// reads the wall clock itself: real-time pacing and progress rates take a
// WallClock supplied by the caller (package wallclock has the real one), so
// everything here stays deterministic under test.
package sim
