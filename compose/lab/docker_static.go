package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"
)

// The module whose cmd/vcluster a static binary is built from.
const (
	modulePath = "github.com/vcluster/vcluster"
	mainPkg    = "./cmd/vcluster"
)

// staticSource is the module directory a static vcluster can be built
// from for a docker lab's image when the running binary is dynamically
// linked (`go run ./cmd/vcluster` links libc where cgo is on): this
// binary's main module is vcluster, the go tool is in PATH, and the
// working directory is inside that module's tree. "" when not.
func staticSource() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Path != modulePath {
		return ""
	}
	if _, err := exec.LookPath("go"); err != nil {
		return ""
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if strings.TrimSpace(strings.TrimPrefix(first, "module")) == modulePath {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(mainPkg))); err == nil {
					return dir
				}
			}
			return ""
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// StaticBinaryFile is the static vcluster lab up builds into the run
// directory when it needs one.
const StaticBinaryFile = "vcluster-static"

// buildStatic builds a static vcluster from module dir src into dst
// (CGO_ENABLED=0 go build): the Go binary, not the image, which the
// Engine API builds.
func buildStatic(ctx context.Context, src, dst string, out io.Writer) error {
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dst, mainPkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lab up: building a static vcluster (CGO_ENABLED=0 go build %s in %s): %v\n%s", mainPkg, src, err, b)
	}
	fmt.Fprintf(out, "the running vcluster is dynamically linked: built a static one for the image (CGO_ENABLED=0 go build %s) in %s\n", mainPkg, time.Since(t0).Round(time.Millisecond))
	return nil
}
