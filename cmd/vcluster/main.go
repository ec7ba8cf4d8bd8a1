// Command vcluster is the virtual-cluster network simulator: multi-plane
// Clos fabrics carrying MRC and RoCEv2 transports.
//
// Exit status: 0 on success, 2 for an invalid configuration or command
// line, 1 for any other failure.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the root command with args and returns the exit status. It
// prints any error to stderr, one problem per line.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	if args == nil {
		args = []string{} // nil would make cobra read os.Args
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
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
