package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vcluster/vcluster/compose/labdocker"
	"github.com/vcluster/vcluster/compose/labspec"
	"github.com/vcluster/vcluster/units"
)

// DefaultHostMemLimit is a docker lab's hosts' GOMEMLIMIT: none. A
// limit of 28 MiB kept a host's RSS near 32 MiB after a 1 MiB
// collective, but a host keeps every run's buffers registered (the
// engine has no deregistration), so once they pass the limit the
// collector runs without pause: a 16 MiB all-reduce on 4 hosts took
// 12 s instead of 2.3 s (measured). At idle a host's anonymous memory
// is a few MiB; most of its RSS is the binary's text, shared by every
// container of the image.
const DefaultHostMemLimit = ""

// Monitoring images lab up looks for locally (there may be no registry).
const (
	PrometheusImage = "prom/prometheus"
	GrafanaImage    = "grafana/grafana"
)

// busyboxTools are the busybox applets a docker lab's image links, when
// this machine has a static busybox: enough for lab exec h0 -- ping -6 ….
var busyboxTools = []string{"sh", "ping", "ping6", "ip", "ifconfig", "route", "ls", "cat", "echo", "ps", "top",
	"netstat", "nslookup", "wget", "sleep", "grep", "hostname", "env", "kill", "traceroute", "traceroute6"}

// busyboxPaths are where a static busybox may be on this machine.
var busyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}

// checkDockerUp validates what only a docker lab needs, before anything
// is written: the lab's name, a static binary for the image, no lab of
// that name on the Engine. It returns the binary, or "" when the running
// one is dynamic and a static one is to be built from its source tree
// (staticSource) once the checks are done.
func checkDockerUp(ctx context.Context, d *DockerRuntime, o UpOptions, name string) (string, error) {
	if err := labdocker.CheckName(name); err != nil {
		return "", invalid("--name: %v", err)
	}
	for _, ns := range o.TunNetns {
		if ns != "" {
			return "", invalid("--tun-netns: not with --runtime docker (each host's TUN is in its own container's network namespace: lab exec h0 -- ip addr)")
		}
	}
	bin, flag := o.Binary, "--binary"
	if bin == "" {
		bin, flag = o.Executable, "the vcluster executable"
	}
	if err := checkStatic(bin, flag); err != nil {
		// Without --binary, a dynamic vcluster run from its source tree
		// (go run) gets a static twin built from the same source.
		if o.Binary != "" || staticSource() == "" {
			return "", err
		}
		bin = ""
	}
	cctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	cs, err := d.eng.Containers(cctx, name)
	if err != nil {
		return "", err
	}
	if len(cs) > 0 {
		var names []string
		for _, c := range cs {
			names = append(names, c.Name+" "+c.Status)
		}
		return "", invalid("--name %s: the Docker Engine has that lab's containers (%s): take it down with lab down --name %s, or use another --name", name, strings.Join(names, ", "), name)
	}
	return bin, nil
}

// checkStatic refuses a binary an image FROM scratch cannot run.
func checkStatic(bin, flag string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return invalid("%s %s: %v", flag, bin, err)
	}
	static, err := labdocker.IsStaticELF(abs)
	if err != nil {
		return invalid("%s: %v (the docker runtime puts a static vcluster binary in the lab's image)", flag, err)
	}
	if !static {
		return invalid("%s %s: a dynamically linked binary; the lab's image is FROM scratch and needs a static one: "+
			"build it with CGO_ENABLED=0 go build -o vcluster-static ./cmd/vcluster and pass --binary vcluster-static "+
			"(or build and run vcluster with CGO_ENABLED=0)", flag, bin)
	}
	return nil
}

// imageFiles are the lab image's files: the binary, and busybox with its
// applets when this machine has a static one ("" when not).
func imageFiles(bin string) ([]labdocker.ImageFile, string) {
	files := []labdocker.ImageFile{{Path: labdocker.BinaryPath, Mode: 0o755, Src: bin}}
	for _, bb := range busyboxPaths {
		if ok, err := labdocker.IsStaticELF(bb); err != nil || !ok {
			continue
		}
		files = append(files, labdocker.ImageFile{Path: "/bin/busybox", Mode: 0o755, Src: bb})
		for _, t := range busyboxTools {
			files = append(files, labdocker.ImageFile{Path: "/bin/" + t, Link: "busybox"})
		}
		return files, bb
	}
	return files, ""
}

// upDocker is Up's docker part, after the shared checks and with the
// secret and config copy written: it builds the image, writes and checks
// the compose files, starts the project and waits until every host is up.
func upDocker(ctx context.Context, d *DockerRuntime, o UpOptions, lab labspec.Lab, st *State, bin string, out io.Writer) (*State, error) {
	dir, name, eng := st.Dir, st.Name, d.eng
	st.Executable = bin
	spec := labdocker.Spec{Name: name, Image: labdocker.ImageRef(name), Hosts: st.Hosts, Planes: st.Planes,
		FabricPerPlane: o.FabricPerPlane, PlaneSpeed: units.FormatSpeed(st.PlaneBps), Sets: st.Sets,
		SecretSource: SecretFile, HostMemLimit: DefaultHostMemLimit, TUN: true}
	if st.Config != "" {
		spec.Config, spec.ConfigSource = true, filepath.ToSlash(filepath.Join(RunDir, ConfigCopy))
	}
	if o.Monitoring {
		spec.Monitoring = findMonitoring(ctx, eng, out)
	}
	// cleanup removes what this lab up made on the Engine (its image too:
	// lab up builds it again) and the run files, keeping the logs.
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 6*engineTimeout)
		defer cancel()
		d.saveContainerLogs(cctx, name, dir, io.Discard)
		eng.RemoveLab(cctx, name, true, io.Discard)
		removeDockerFiles(dir)
		removeRunFiles(dir)
	}
	fail := func(err error) (*State, error) {
		cleanup()
		return nil, fmt.Errorf("%w\n(logs kept in %s)", err, filepath.Join(dir, LogDir))
	}

	if err := raiseARPRoom(labContainers(o, lab), out); err != nil {
		return fail(err)
	}
	if bin == "" { // checkDockerUp found the source to build it from
		bin = filepath.Join(dir, RunDir, StaticBinaryFile)
		if err := buildStatic(ctx, staticSource(), bin, out); err != nil {
			return fail(err)
		}
		st.Executable = bin
	}
	files, busybox := imageFiles(bin)
	labels := map[string]string{labdocker.LabLabel: name}
	t0 := time.Now()
	if err := eng.BuildImage(ctx, spec.Image, labels, []string{labdocker.BinaryPath}, files); err != nil {
		return fail(err)
	}
	tools := "no busybox (no static busybox on this machine: apt-get install busybox-static for ping, sh, ip in lab exec)"
	if busybox != "" {
		tools = "busybox from " + busybox + " (sh, ping, ip, …: lab exec NAME -- ping -6 ADDR)"
	}
	fmt.Fprintf(out, "image %s built in %s: %s + %s\n", spec.Image, time.Since(t0).Round(time.Millisecond), labdocker.BinaryPath, tools)

	gen, err := labdocker.Generate(spec)
	if err != nil {
		return fail(fmt.Errorf("lab up: the compose file: %w", err))
	}
	for rel, b := range gen {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fail(err)
		}
		if err := WriteFileAtomic(p, b, 0o644); err != nil {
			return fail(err)
		}
	}
	if _, err := labdocker.Load(ctx, dir, name, false); err != nil {
		return fail(fmt.Errorf("lab up: the generated %s does not load: %w", labdocker.ComposeFile, err))
	}
	composeLog, err := os.OpenFile(filepath.Join(dir, LogDir, "compose.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	err = labdocker.ComposeUp(ctx, dir, name, composeLog)
	composeLog.Close()
	if err != nil {
		return fail(err)
	}
	if err := d.record(ctx, st, spec); err != nil {
		return fail(err)
	}
	if err := st.Save(); err != nil {
		return fail(err)
	}
	if err := waitHostsUp(ctx, d, st, st.hostsOf(), o.HealthTimeout); err != nil {
		return fail(err)
	}
	writeUpSummary(ctx, out, d, st, lab)
	if spec.Monitoring != nil {
		fmt.Fprintf(out, "monitoring: prometheus (%s) and grafana (%s) on the lab network %s\n", spec.Monitoring.PrometheusImage, spec.Monitoring.GrafanaImage, labdocker.NetworkName(name))
	}
	return st, nil
}

// labContainers is how many containers a docker lab runs (monitoring
// counted whether or not its images exist).
func labContainers(o UpOptions, lab labspec.Lab) int {
	n := lab.Config.Fabric.Hosts + 1
	if o.FabricPerPlane {
		n += lab.Config.Fabric.Planes - 1
	}
	if o.Monitoring {
		n += 2
	}
	return n
}

// findMonitoring is the monitoring images when both exist locally; else
// it says which is missing and returns nil (lab up goes on without).
func findMonitoring(ctx context.Context, eng *labdocker.Engine, out io.Writer) *labdocker.Monitoring {
	var m labdocker.Monitoring
	for _, im := range []struct {
		repo string
		ref  *string
	}{{PrometheusImage, &m.PrometheusImage}, {GrafanaImage, &m.GrafanaImage}} {
		ref, ok, err := eng.FindImage(ctx, im.repo)
		if err != nil {
			fmt.Fprintf(out, "monitoring: skipped: %v\n", err)
			return nil
		}
		if !ok {
			fmt.Fprintf(out, "monitoring: skipped: no local image %s (no registry here: docker load one)\n", im.repo)
			return nil
		}
		*im.ref = ref
	}
	return &m
}

// record fills st.Processes from the lab's containers: one per fabric
// service and per host, with its container, PID and addresses.
func (d *DockerRuntime) record(ctx context.Context, st *State, spec labdocker.Spec) error {
	cctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	cs, err := d.eng.Containers(cctx, st.Name)
	if err != nil {
		return err
	}
	byName := map[string]labdocker.Container{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	var ps []Process
	for p := range max(st.Planes, 1) {
		svc := labdocker.FabricService(spec, p)
		if slices.ContainsFunc(ps, func(q Process) bool { return q.Name == svc }) {
			continue
		}
		ps = append(ps, Process{Name: svc, Role: RoleFabric, Host: -1})
	}
	for h := range st.Hosts {
		ps = append(ps, Process{Name: labdocker.HostService(h), Role: RoleHost, Host: h})
	}
	for i, p := range ps {
		p.Container = labdocker.ContainerName(st.Name, p.Name)
		p.Log = logFileOf(st, p.Name)
		c, ok := byName[p.Container]
		if !ok {
			return fmt.Errorf("lab up: the compose project has no container %s", p.Container)
		}
		if !c.Running {
			return fmt.Errorf("%s: container %s %s (exit code %d)\n%s", p.Name, p.Container, c.Status, c.ExitCode, d.LogTail(p, 15))
		}
		p = withContainer(p, c)
		p.Started = time.Now().UTC()
		ps[i] = p
	}
	st.Processes = ps
	return nil
}

// removeDockerFiles removes the compose files lab up generated in dir.
func removeDockerFiles(dir string) {
	os.Remove(filepath.Join(dir, labdocker.ComposeFile))
	os.RemoveAll(filepath.Join(dir, "monitoring"))
}
