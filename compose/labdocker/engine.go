package labdocker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/docker/docker/client"
)

// Engine is a connection to the Docker Engine API.
type Engine struct {
	cli *client.Client
}

// ErrNoEngine wraps Connect's error when no Docker Engine answers (tests
// skip on it; lab up falls back to the process runtime).
var ErrNoEngine = errors.New("no Docker Engine")

// Connect connects to the Docker Engine of the environment (DOCKER_HOST
// or the default socket), negotiating the API version, and pings it
// within timeout.
func Connect(ctx context.Context, timeout time.Duration) (*Engine, error) {
	return nil, errors.New("labdocker.Connect: not implemented yet")
}

// Close closes the connection.
func (e *Engine) Close() error { return nil }

// ImageFile is one file of an image built FROM scratch.
type ImageFile struct {
	Path string // in the image, absolute ("/vcluster")
	Mode int64  // e.g. 0o755
	Src  string // a file on this machine to copy ("" with Link)
	Link string // when not "", a symlink to Link instead
}

// BuildImage builds ref FROM scratch holding files, with labels and
// entrypoint, through the Engine API (a build context streamed as tar).
func (e *Engine) BuildImage(ctx context.Context, ref string, labels map[string]string, entrypoint []string, files []ImageFile) error {
	return errors.New("labdocker.BuildImage: not implemented yet")
}

// Container is one container as the Engine reports it.
type Container struct {
	ID, Name, Service string // Service: compose's service label
	Labels            map[string]string
	Running           bool
	Status            string // the Engine's state: running, exited, …
	Health            string // healthy, unhealthy, starting, "" without healthcheck
	PID               int    // the main process's PID on this machine (0 when not running)
	IP                string // its IPv4 address on the lab network ("" when not running)
	ExitCode          int
}

// Containers lists lab name's containers (LabLabel=name), running or not.
func (e *Engine) Containers(ctx context.Context, name string) ([]Container, error) {
	return nil, errors.New("labdocker.Containers: not implemented yet")
}

// Start, Stop (SIGTERM, then SIGKILL after grace) and Kill a container.
func (e *Engine) Start(ctx context.Context, id string) error {
	return errors.New("not implemented yet")
}
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	return errors.New("not implemented yet")
}
func (e *Engine) Kill(ctx context.Context, id string) error { return errors.New("not implemented yet") }

// Exec runs cmd in container id with the given stdio and returns its
// exit code.
func (e *Engine) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return -1, errors.New("labdocker.Exec: not implemented yet")
}

// FindImage returns a local image of repository repo (any tag; "" and
// false when there is none).
func (e *Engine) FindImage(ctx context.Context, repo string) (string, bool, error) {
	return "", false, errors.New("not implemented yet")
}

// Leftovers lists everything still carrying LabLabel=name: containers,
// networks, volumes and images, each as "kind name".
func (e *Engine) Leftovers(ctx context.Context, name string) ([]string, error) {
	return nil, errors.New("labdocker.Leftovers: not implemented yet")
}

// RemoveLab removes everything lab name created, found by label:
// containers (forced), networks, volumes, and the image when rmi. It
// prints one line per removed object to out.
func (e *Engine) RemoveLab(ctx context.Context, name string, rmi bool, out io.Writer) error {
	return errors.New("labdocker.RemoveLab: not implemented yet")
}

// ComposeUp starts the compose project in dir (its ComposeFile) detached:
// `docker compose -p project up -d`, or `docker-compose` where the
// plugin is absent. The tool's output goes to log.
func ComposeUp(ctx context.Context, dir, project string, log io.Writer) error {
	return errors.New("labdocker.ComposeUp: not implemented yet")
}
