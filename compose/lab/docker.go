package lab

import (
	"context"
	"errors"
	"io"
)

// DefaultName is a lab's name when --name is not given.
const DefaultName = "vcluster"

// DefaultDir is the state directory of lab name when --dir is not given:
// ./vcluster-lab for the default name, ./vcluster-lab-NAME otherwise.
func DefaultDir(name string) string {
	if name == DefaultName || name == "" {
		return "vcluster-lab"
	}
	return "vcluster-lab-" + name
}

// DefaultRuntime is the runtime lab up uses without --runtime: docker
// when a Docker Engine answers, process otherwise; why says which and
// why (lab up prints it).
func DefaultRuntime(ctx context.Context) (name, why string) {
	return RuntimeProcess, "no Docker runtime yet"
}

// DownOptions are what lab down removes beyond the processes.
type DownOptions struct {
	// Name is the lab's name: with the docker runtime, what carries its
	// label is removed even when the state directory is gone.
	Name string
	// RMI also removes the lab's image (docker).
	RMI bool
}

// Exec runs cmd in process name's container (docker runtime) with the
// given stdio and returns its exit code; the process runtime refuses.
func Exec(ctx context.Context, dir, name string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return -1, errors.New("lab exec: not implemented yet")
}
