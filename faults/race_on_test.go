//go:build race

package faults

// raceSlowdown: the race detector slows the code 5–10×, so wall-clock
// bounds in tests scale by raceSlowdown.
const raceSlowdown = 10
