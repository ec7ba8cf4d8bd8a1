package labdocker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/docker/pkg/stdcopy"
)

// Engine is a connection to the Docker Engine API.
type Engine struct {
	cli *client.Client
	// Version is the Engine's version ("20.10.24"), Host where it
	// answers ("unix:///var/run/docker.sock").
	Version, Host string
}

// ErrNoEngine wraps Connect's error when no Docker Engine answers (tests
// skip on it; lab up falls back to the process runtime).
var ErrNoEngine = errors.New("no Docker Engine")

// Connect connects to the Docker Engine of the environment (DOCKER_HOST
// or the default socket), negotiating the API version, and pings it
// within timeout.
func Connect(ctx context.Context, timeout time.Duration) (*Engine, error) {
	// Negotiation: the client speaks API 1.51, the Engine here 1.41.
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrNoEngine, cli.DaemonHost(), err)
	}
	e := &Engine{cli: cli, Host: cli.DaemonHost()}
	if v, err := cli.ServerVersion(ctx); err == nil {
		e.Version = v.Version
	}
	return e, nil
}

// Close closes the connection.
func (e *Engine) Close() error { return e.cli.Close() }

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
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeBuildContext(pw, labels, entrypoint, files)) }()
	defer pr.Close()
	resp, err := e.cli.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags: []string{ref}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Labels: labels, Version: build.BuilderV1, // the classic builder: no BuildKit session
	})
	if err != nil {
		return fmt.Errorf("building image %s: %w", ref, err)
	}
	defer resp.Body.Close()
	var tail []string // the build's output, for a failure
	dec := json.NewDecoder(resp.Body)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("building image %s: reading the Engine's answer: %w", ref, err)
		}
		if m.Error != nil || m.ErrorMessage != "" {
			msg := m.ErrorMessage
			if m.Error != nil {
				msg = m.Error.Message
			}
			return fmt.Errorf("building image %s: %s\n%s", ref, msg, strings.Join(tail, ""))
		}
		if m.Stream != "" {
			tail = append(tail, m.Stream)
			if len(tail) > 10 {
				tail = tail[1:]
			}
		}
	}
	return nil
}

// writeBuildContext writes the tar of a FROM scratch build: a Dockerfile
// and the files (under ctx/ by their image paths).
func writeBuildContext(w io.Writer, labels map[string]string, entrypoint []string, files []ImageFile) error {
	tw := tar.NewWriter(w)
	var df bytes.Buffer
	df.WriteString("FROM scratch\n")
	for _, f := range files {
		if !path.IsAbs(f.Path) {
			return fmt.Errorf("image file %q: not an absolute path", f.Path)
		}
		name := "ctx" + path.Clean(f.Path)
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: f.Link, Mode: 0o777}); err != nil {
				return err
			}
		} else if err := tarFile(tw, name, f); err != nil {
			return err
		}
	}
	if len(files) > 0 {
		// One COPY of the tree: one layer, and symlinks stay symlinks.
		df.WriteString("COPY ctx/ /\n")
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&df, "LABEL %s=%s\n", strconv.Quote(k), strconv.Quote(labels[k]))
	}
	if len(entrypoint) > 0 {
		ep, _ := json.Marshal(entrypoint)
		fmt.Fprintf(&df, "ENTRYPOINT %s\n", ep)
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "Dockerfile", Mode: 0o644, Size: int64(df.Len())}); err != nil {
		return err
	}
	if _, err := tw.Write(df.Bytes()); err != nil {
		return err
	}
	return tw.Close()
}

// tarFile streams the regular file f.Src into tw as name.
func tarFile(tw *tar.Writer, name string, f ImageFile) error {
	in, err := os.Open(f.Src)
	if err != nil {
		return fmt.Errorf("image file %s: %w", f.Path, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("image file %s: %s is not a regular file", f.Path, f.Src)
	}
	mode := f.Mode
	if mode == 0 {
		mode = int64(fi.Mode().Perm())
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
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

// composeServiceLabel is the label compose puts on a service's containers.
const composeServiceLabel = "com.docker.compose.service"

// labFilter selects what carries LabLabel=name.
func labFilter(name string) filters.Args {
	return filters.NewArgs(filters.Arg("label", LabLabel+"="+name))
}

// Containers lists lab name's containers (LabLabel=name), running or not.
func (e *Engine) Containers(ctx context.Context, name string) ([]Container, error) {
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: labFilter(name)})
	if err != nil {
		return nil, fmt.Errorf("listing lab %s's containers: %w", name, err)
	}
	var cs []Container
	for _, s := range list {
		c, err := e.Inspect(ctx, s.ID, name)
		if errdefs.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs, nil
}

// Inspect reports container id (a name or an ID), with its IP on lab
// name's network (or its first network's).
func (e *Engine) Inspect(ctx context.Context, id, name string) (Container, error) {
	in, err := e.cli.ContainerInspect(ctx, id)
	if err != nil {
		return Container{}, err
	}
	c := Container{ID: in.ID, Name: strings.TrimPrefix(in.Name, "/")}
	if in.Config != nil {
		c.Labels = in.Config.Labels
		c.Service = c.Labels[composeServiceLabel]
	}
	if s := in.State; s != nil {
		c.Running, c.Status, c.PID, c.ExitCode = s.Running, s.Status, s.Pid, s.ExitCode
		if s.Health != nil {
			c.Health = s.Health.Status
		}
	}
	if ns := in.NetworkSettings; ns != nil && c.Running {
		if n, ok := ns.Networks[NetworkName(name)]; ok && n != nil {
			c.IP = n.IPAddress
		} else {
			keys := make([]string, 0, len(ns.Networks))
			for k := range ns.Networks {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if n := ns.Networks[k]; n != nil && n.IPAddress != "" {
					c.IP = n.IPAddress
					break
				}
			}
		}
	}
	return c, nil
}

// Start, Stop (SIGTERM, then SIGKILL after grace) and Kill a container.
func (e *Engine) Start(ctx context.Context, id string) error {
	return e.cli.ContainerStart(ctx, id, container.StartOptions{})
}
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int((grace + time.Second - 1) / time.Second)
	return e.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
}
func (e *Engine) Kill(ctx context.Context, id string) error {
	return e.cli.ContainerKill(ctx, id, "KILL")
}

// Exec runs cmd in container id with the given stdio and returns its
// exit code.
func (e *Engine) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	cr, err := e.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd: cmd, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	hj, err := e.cli.ContainerExecAttach(ctx, cr.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, fmt.Errorf("exec in %s: attach: %w", id, err)
	}
	defer hj.Close()
	if stdin != nil {
		go func() {
			io.Copy(hj.Conn, stdin)
			hj.CloseWrite()
		}()
	}
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return -1, fmt.Errorf("exec in %s: reading its output: %w", id, err)
		}
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	// The exec's exit code is set a moment after its output ends.
	for {
		in, err := e.cli.ContainerExecInspect(ctx, cr.ID)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: %w", id, err)
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Logs writes the last tail lines ("all" or a number) of container id's
// stdout and stderr, interleaved as they came, to w.
func (e *Engine) Logs(ctx context.Context, id, tail string, w io.Writer) error {
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: tail})
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = stdcopy.StdCopy(w, w, rc) // no TTY: the stream is multiplexed
	return err
}

// FindImage returns a local image of repository repo (any tag; "" and
// false when there is none).
func (e *Engine) FindImage(ctx context.Context, repo string) (string, bool, error) {
	list, err := e.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo))})
	if err != nil {
		return "", false, fmt.Errorf("listing images of %s: %w", repo, err)
	}
	if len(list) == 0 && !strings.Contains(repo, ":") {
		list, err = e.cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("reference", repo+":*"))})
		if err != nil {
			return "", false, fmt.Errorf("listing images of %s: %w", repo, err)
		}
	}
	for _, im := range list {
		for _, tag := range im.RepoTags {
			if tag == repo || strings.HasPrefix(tag, repo+":") {
				return tag, true, nil
			}
		}
	}
	return "", false, nil
}

// Leftovers lists everything still carrying LabLabel=name: containers,
// networks, volumes and images, each as "kind name".
func (e *Engine) Leftovers(ctx context.Context, name string) ([]string, error) {
	var out []string
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: labFilter(name)})
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		out = append(out, "container "+containerName(c))
	}
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: labFilter(name)})
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		out = append(out, "network "+n.Name)
	}
	vs, err := e.cli.VolumeList(ctx, volume.ListOptions{Filters: labFilter(name)})
	if err != nil {
		return nil, err
	}
	for _, v := range vs.Volumes {
		out = append(out, "volume "+v.Name)
	}
	is, err := e.cli.ImageList(ctx, image.ListOptions{Filters: labFilter(name)})
	if err != nil {
		return nil, err
	}
	for _, im := range is {
		n := im.ID
		if len(im.RepoTags) > 0 {
			n = im.RepoTags[0]
		}
		out = append(out, "image "+n)
	}
	return out, nil
}

// containerName is a listed container's name without compose's slash.
func containerName(c container.Summary) string {
	if len(c.Names) > 0 {
		return strings.TrimPrefix(c.Names[0], "/")
	}
	return c.ID[:12]
}

// RemoveLab removes everything lab name created, found by label:
// containers (forced), networks, volumes, and the image when rmi. It
// prints one line per removed object to out. What is already gone is
// not an error.
func (e *Engine) RemoveLab(ctx context.Context, name string, rmi bool, out io.Writer) error {
	var errs []error
	note := func(kind, what string, err error) {
		switch {
		case err == nil:
			fmt.Fprintf(out, "removed %s %s\n", kind, what)
		case errdefs.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("removing %s %s: %w", kind, what, err))
		}
	}
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: labFilter(name)})
	if err != nil {
		return fmt.Errorf("listing lab %s's containers: %w", name, err)
	}
	for _, c := range cs {
		// RemoveVolumes: the anonymous volumes of the container too.
		note("container", containerName(c), e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}))
	}
	ns, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: labFilter(name)})
	if err != nil {
		return fmt.Errorf("listing lab %s's networks: %w", name, err)
	}
	for _, n := range ns {
		note("network", n.Name, e.cli.NetworkRemove(ctx, n.ID))
	}
	vs, err := e.cli.VolumeList(ctx, volume.ListOptions{Filters: labFilter(name)})
	if err != nil {
		return fmt.Errorf("listing lab %s's volumes: %w", name, err)
	}
	for _, v := range vs.Volumes {
		note("volume", v.Name, e.cli.VolumeRemove(ctx, v.Name, true))
	}
	if rmi {
		is, err := e.cli.ImageList(ctx, image.ListOptions{Filters: labFilter(name)})
		if err != nil {
			return fmt.Errorf("listing lab %s's images: %w", name, err)
		}
		for _, im := range is {
			what := im.ID
			if len(im.RepoTags) > 0 {
				what = im.RepoTags[0]
			}
			_, err := e.cli.ImageRemove(ctx, im.ID, image.RemoveOptions{Force: true, PruneChildren: true})
			note("image", what, err)
		}
	}
	return errors.Join(errs...)
}
