//go:build !race

package faults

const raceSlowdown = 1
