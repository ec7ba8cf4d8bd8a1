package labdocker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
)

// testEngine connects to the Docker Engine or skips the test.
func testEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := Connect(context.Background(), 3*time.Second)
	if errors.Is(err, ErrNoEngine) {
		t.Skipf("skipping: this test needs a Docker Engine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// uniqueName is a fresh lab name for a test.
func uniqueName() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "vct-" + hex.EncodeToString(b)
}

// staticBusybox is this machine's busybox when it is a static binary (the
// only program a FROM scratch test image can run without a toolchain).
func staticBusybox(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if st, err := IsStaticELF(p); err == nil && st {
			return p
		}
	}
	t.Skip("skipping: needs a static busybox (Debian: apt-get install busybox-static)")
	return ""
}

// An image built FROM scratch carries its labels and entrypoint, its
// symlinks work, Exec returns output and exit codes, RemoveLab removes
// it all and is idempotent, and FindImage finds no absent repository.
func TestEngineBuildExecRemove(t *testing.T) {
	e := testEngine(t)
	bb := staticBusybox(t)
	ctx := context.Background()
	name := uniqueName()
	t.Cleanup(func() { e.RemoveLab(ctx, name, true, io.Discard) })
	ref := ImageRef(name)
	labels := map[string]string{LabLabel: name, "vcluster.test": "yes"}
	files := []ImageFile{{Path: "/bin/busybox", Mode: 0o755, Src: bb}, {Path: "/bin/sh", Link: "busybox"}}
	if err := e.BuildImage(ctx, ref, labels, []string{"/bin/sh", "-c", "sleep 600"}, files); err != nil {
		t.Fatal(err)
	}
	in, _, err := e.cli.ImageInspectWithRaw(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if in.Config.Labels[LabLabel] != name || in.Config.Labels["vcluster.test"] != "yes" {
		t.Errorf("image labels %v, want %s=%s and vcluster.test=yes", in.Config.Labels, LabLabel, name)
	}
	if !slices.Equal(in.Config.Entrypoint, []string{"/bin/sh", "-c", "sleep 600"}) {
		t.Errorf("entrypoint %q", in.Config.Entrypoint)
	}
	if ref, ok, err := e.FindImage(ctx, "vcluster-lab"); err != nil || !ok || !strings.HasPrefix(ref, "vcluster-lab:") {
		t.Errorf("FindImage(vcluster-lab) = %q, %v, %v; want a vcluster-lab image", ref, ok, err)
	}

	cr, err := e.cli.ContainerCreate(ctx, &container.Config{Image: ref, Labels: map[string]string{LabLabel: name}}, nil, nil, nil, name+"-c")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	cs, err := e.Containers(ctx, name)
	if err != nil || len(cs) != 1 || !cs[0].Running || cs[0].PID <= 0 || cs[0].IP == "" || cs[0].Name != name+"-c" {
		t.Fatalf("Containers = %+v, %v; want 1 running with a PID and an IP", cs, err)
	}
	var out, errOut bytes.Buffer
	code, err := e.Exec(ctx, cr.ID, []string{"/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"}, nil, &out, &errOut)
	if err != nil || code != 3 || out.String() != "hello\n" || errOut.String() != "oops\n" {
		t.Errorf("Exec = %d, %v, stdout %q, stderr %q; want 3, hello, oops", code, err, out.String(), errOut.String())
	}
	out.Reset()
	code, err = e.Exec(ctx, cr.ID, []string{"/bin/sh", "-c", "cat"}, strings.NewReader("fed in"), &out, nil)
	if err != nil || code != 0 || out.String() != "fed in" {
		t.Errorf("Exec with stdin = %d, %v, %q", code, err, out.String())
	}
	if err := e.Kill(ctx, cr.ID); err != nil {
		t.Fatal(err)
	}
	left, err := e.Leftovers(ctx, name)
	if err != nil || !slices.Contains(left, "container "+name+"-c") || !slices.Contains(left, "image "+ref) {
		t.Errorf("Leftovers = %v, %v; want the container and the image", left, err)
	}
	var rm bytes.Buffer
	if err := e.RemoveLab(ctx, name, true, &rm); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rm.String(), "removed container "+name+"-c") || !strings.Contains(rm.String(), "removed image "+ref) {
		t.Errorf("RemoveLab said %q", rm.String())
	}
	if left, err := e.Leftovers(ctx, name); err != nil || len(left) != 0 {
		t.Errorf("Leftovers after RemoveLab = %v, %v; want none", left, err)
	}
	rm.Reset()
	if err := e.RemoveLab(ctx, name, true, &rm); err != nil || rm.Len() != 0 {
		t.Errorf("RemoveLab again = %v, said %q; want nil and nothing", err, rm.String())
	}
	if ref, ok, err := e.FindImage(ctx, "vct-absent-"+name); err != nil || ok {
		t.Errorf("FindImage of an absent repo = %q, %v, %v", ref, ok, err)
	}
}

// A build that fails returns the daemon's message.
func TestEngineBuildFails(t *testing.T) {
	e := testEngine(t)
	name := uniqueName()
	ctx := context.Background()
	t.Cleanup(func() { e.RemoveLab(ctx, name, true, io.Discard) })
	dir := t.TempDir()
	f := dir + "/x"
	os.WriteFile(f, []byte("x"), 0o644)
	err := e.BuildImage(ctx, ImageRef(name), map[string]string{LabLabel: name}, nil, []ImageFile{{Path: "relative", Src: f}})
	if err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("BuildImage of a relative path: %v", err)
	}
}

func TestIsStaticELF(t *testing.T) {
	exe, err := os.Executable() // a test binary: static only with CGO off
	if err != nil {
		t.Fatal(err)
	}
	if _, err := IsStaticELF(exe); err != nil {
		t.Errorf("IsStaticELF(%s): %v", exe, err)
	}
	for _, p := range []string{"/bin/ls", "/usr/bin/docker"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if st, err := IsStaticELF(p); err != nil || st {
			t.Errorf("IsStaticELF(%s) = %v, %v; want a dynamic binary", p, st, err)
		}
	}
	f := t.TempDir() + "/script"
	os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755)
	if _, err := IsStaticELF(f); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("IsStaticELF(script) = %v; want not an ELF", err)
	}
}
