// Command vcluster is the virtual-cluster network simulator: multi-plane
// Clos fabrics carrying MRC and RoCEv2 transports.
//
// Exit status: 0 on success; 2 for an invalid configuration or command
// line (refused before anything runs or is written); 1 for a run that
// failed — an error, a failed row, a stalled job, a QP error, a wrong
// byte — with what failed on the last line of stderr; 130 for a run
// stopped by SIGINT or SIGTERM (it flushes what it has first).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	ctx, stop := catchInterrupts()
	code := executeContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// execute runs the root command with args and returns the exit status. It
// prints any error to stderr, one problem per line.
func execute(args []string, stdout, stderr io.Writer) int {
	return executeContext(context.Background(), args, stdout, stderr)
}

// executeContext is execute with ctx as the commands' context (main's is
// cancelled by SIGINT/SIGTERM, see catchInterrupts).
func executeContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "vcluster: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// exitError carries the exit status for an error.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a command-line or configuration problem (exit 2).
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 2, err: err}
}
