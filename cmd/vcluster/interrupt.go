package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/vcluster/vcluster/sim"
)

// exitInterrupted is the exit status of a run stopped by SIGINT or SIGTERM
// (128 + SIGINT, as shells report a Ctrl-C).
const exitInterrupted = 130

// interruptible is set by the commands that stop cleanly on an interrupt
// (run, experiment, collective, drill, the cluster benchmarks): see
// stopsOnInterrupt.
var interruptible atomic.Bool

// stopsOnInterrupt says the running command handles an interrupt itself:
// it checks interrupted() after its simulation returns, flushes and
// returns interruptedError. Other commands (topo, ping, version, the
// micro-benchmarks) just exit 130 on the first signal.
func stopsOnInterrupt() { interruptible.Store(true) }

// catchInterrupts makes the first SIGINT or SIGTERM stop every simulation
// at its next event boundary (sim.Interrupt) and cancel the returned
// context, so that the command flushes what it has, says so and exits 130;
// a command that does not handle interrupts exits 130 at once, and so does
// a second signal. stop restores the default handling.
func catchInterrupts() (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-done:
			return
		}
		if !interruptible.Load() {
			fmt.Fprintln(os.Stderr, "vcluster: interrupted")
			os.Exit(exitInterrupted)
		}
		sim.Interrupt()
		cancel()
		select {
		case <-ch:
			fmt.Fprintln(os.Stderr, "vcluster: interrupted again: exiting without flushing")
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// interrupted reports whether the command was interrupted: by a signal
// (sim.Interrupt) or through its context.
func interrupted(ctx context.Context) bool {
	return sim.Interrupted() || ctx != nil && ctx.Err() != nil
}

// interruptedError is the command's error for an interrupted run (exit
// status 130): where it stopped (virtual time, point) and what it left.
func interruptedError(where, left string) error {
	msg := "interrupted"
	if where != "" {
		msg += " " + where
	}
	if left != "" {
		msg += "; " + left
	}
	return &exitError{code: exitInterrupted, err: fmt.Errorf("%s", msg)}
}

// virtualAt formats a virtual time for the interrupt line.
func virtualAt(t sim.Time) string {
	return fmt.Sprintf("at virtual time %.3f ms", float64(t)/1e6)
}
