package labdocker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
)

// composeCommand is the compose tool of this machine: `docker compose`
// (the v2 plugin) when `docker compose version` works, else
// docker-compose (v1) in PATH.
func composeCommand(ctx context.Context) ([]string, error) {
	if docker, err := exec.LookPath("docker"); err == nil {
		if exec.CommandContext(ctx, docker, "compose", "version").Run() == nil {
			return []string{docker, "compose"}, nil
		}
	}
	if dc, err := exec.LookPath("docker-compose"); err == nil {
		return []string{dc}, nil
	}
	return nil, fmt.Errorf("no compose tool: neither `docker compose` (the Docker Compose plugin) nor docker-compose in PATH (install docker-compose-plugin or docker-compose)")
}

// ComposeUp starts the compose project in dir (its ComposeFile) detached:
// `docker compose -p project up -d`, or `docker-compose` where the
// plugin is absent. The tool's output goes to log.
func ComposeUp(ctx context.Context, dir, project string, log io.Writer) error {
	tool, err := composeCommand(ctx)
	if err != nil {
		return err
	}
	args := append(tool[1:], "-p", project, "-f", filepath.Join(dir, ComposeFile), "up", "-d")
	cmd := exec.CommandContext(ctx, tool[0], args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	w := io.Writer(&buf)
	if log != nil {
		w = io.MultiWriter(&buf, log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", tool[0], strings.Join(args, " "), err, tail(buf.String(), 20))
	}
	return nil
}

// tail is the last n lines of s, indented.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}
