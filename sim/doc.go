// Package sim owns virtual time: the deterministic discrete-event loop, its
// timers, the two pacings (simulated and real-time), seeded per-component
// random streams, and the adapter that lets gVisor netstack run on the loop's
// clock.
//
// sim knows nothing about packets, switches, hosts or transports. It never
// reads the wall clock itself: real-time pacing and progress rates take a
// WallClock supplied by the caller (package wallclock has the real one), so
// everything here stays deterministic under test.
package sim
