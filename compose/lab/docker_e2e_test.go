package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labdocker"
	"github.com/vcluster/vcluster/compose/tunnel"
)

// The docker end-to-end test runs one lab of containers — preset C, 4
// hosts, 2 per T0, at 100 Mb/s per plane as the process e2e (five
// real-time processes share 2 cores) — and checks on it, in turn, a
// verified all-reduce and a ping over the hosts' TUNs, a stranger on the
// lab network, a host killed mid-collective and started again, and that
// lab down --rmi leaves nothing with the lab's label. One lab for all of
// them: each lab up builds an image and starts five containers.

// dockerLabSets is the lab's config.
var dockerLabSets = []string{"fabric.preset=C", "fabric.hosts=4", "fabric.hostsPerT0=2"}

const dockerLabPlaneBps = 100e6

// staticBinEnv names a static vcluster binary to use instead of
// building one (for running this test against another tree's binary).
const staticBinEnv = "VCLUSTER_TEST_STATIC_BIN"

// staticBin builds a static ./cmd/vcluster (CGO_ENABLED=0) into dir.
func staticBin(t *testing.T, dir string) string {
	t.Helper()
	if bin := os.Getenv(staticBinEnv); bin != "" {
		return bin
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	bin := filepath.Join(dir, "vcluster-static")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/vcluster")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./cmd/vcluster: %v\n%s", err, out)
	}
	return bin
}

// dockerRuntime is the docker runtime, or the test skips.
func dockerRuntime(t *testing.T) *DockerRuntime {
	t.Helper()
	d, err := newDockerRuntime()
	if errors.Is(err, labdocker.ErrNoEngine) {
		t.Skipf("skipping: the docker runtime needs a Docker Engine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.eng.Close() })
	return d
}

// testLabName is a fresh lab name.
func testLabName() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "vct-" + hex.EncodeToString(b)
}

// dockerLogs is the tail of every container log of st (for failures).
func dockerLogs(d *DockerRuntime, st *State) string {
	var b strings.Builder
	for _, p := range st.Processes {
		b.WriteString(d.LogTail(p, 25) + "\n")
	}
	return b.String()
}

// dockerTestLab is a docker lab test's static binary, lab name and state
// directory, with a cleanup that takes the lab down (--rmi) and removes
// whatever still carries its label.
func dockerTestLab(t *testing.T, d *DockerRuntime) (bin, name, dir string) {
	tmp := t.TempDir()
	t0 := time.Now()
	bin = staticBin(t, tmp)
	t.Logf("static build: %s", time.Since(t0).Round(time.Millisecond))
	name, dir = testLabName(), filepath.Join(tmp, "lab")
	t.Cleanup(func() {
		var out bytes.Buffer
		if err := DownWith(dir, DownOptions{Name: name, RMI: true}, &out); err != nil {
			t.Errorf("cleanup: lab down: %v\n%s", err, out.String())
		}
		// Belt and braces: whatever still carries the label.
		d.eng.RemoveLab(context.Background(), name, true, &out)
	})
	return bin, name, dir
}

func TestDockerLab(t *testing.T) {
	d := dockerRuntime(t)
	ctx := context.Background()
	bin, name, dir := dockerTestLab(t, d)
	var out bytes.Buffer
	t0 := time.Now()
	st, err := Up(ctx, UpOptions{Dir: dir, Runtime: d, Executable: bin, Binary: bin, Name: name, Monitoring: true,
		Sets: dockerLabSets, PlaneBps: dockerLabPlaneBps, HealthTimeout: 3 * time.Minute, ReadyTimeout: 2 * time.Minute}, &out)
	if err != nil {
		t.Fatalf("Up: %v\n%s", err, out.String())
	}
	t.Logf("Up (1 fabric + 4 hosts, image build included): %s\n%s", time.Since(t0).Round(time.Millisecond), out.String())
	for _, want := range []string{"1 fabric + 4 hosts", "runtime docker", "host links 100M (configured 100G)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lab up's summary lacks %q:\n%s", want, out.String())
		}
	}
	if len(st.Processes) != 5 || st.Name != name || st.Runtime != RuntimeDocker {
		t.Fatalf("state: %s runtime %s, processes %v; want lab %s, docker, fabric + 4 hosts", st.Name, st.Runtime, st.Names(), name)
	}
	for _, p := range st.Processes {
		if p.Container != labdocker.ContainerName(name, p.Name) || p.PID <= 0 || p.API == "" {
			t.Errorf("%s: container %q pid %d api %q; want %s, a pid and an API", p.Name, p.Container, p.PID, p.API, labdocker.ContainerName(name, p.Name))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, labdocker.ComposeFile)); err != nil {
		t.Errorf("the compose file is not in the state directory: %v", err)
	}
	busybox := strings.Contains(out.String(), "busybox from")
	// No registry here: without local images, monitoring is skipped with
	// a line saying which is missing; with them, it runs.
	_, prom, _ := d.eng.FindImage(ctx, PrometheusImage)
	_, graf, _ := d.eng.FindImage(ctx, GrafanaImage)
	if want := "monitoring: skipped: no local image "; !(prom && graf) && !strings.Contains(out.String(), want) {
		t.Errorf("lab up --monitoring without local images does not say %q:\n%s", want, out.String())
	}

	t.Run("CollectiveAndPing", func(t *testing.T) {
		start := time.Now()
		defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
		rows, err := Ps(ctx, dir, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.State != StateUp {
				t.Errorf("ps: %s is %s (%s), want up", r.Name, r.State, r.Why)
			}
		}
		verifiedCollective(t, d, dir, "1M")
		st, _, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		// The target is an RSS of at most 32 MiB per host
		// container: reported here, measured by bench lab-up (it is the
		// Go runtime's and the image's, and varies with the machine).
		for _, p := range st.Processes {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID)); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "VmRSS:") {
						t.Logf("%s: %s", p.Name, strings.Join(strings.Fields(l), " "))
					}
				}
			}
		}
		h1, _ := st.Process("h1")
		hh, err := hostHealth(ctx, h1.API)
		if err != nil || hh.Address == "" {
			t.Fatalf("h1's health: %+v, %v; want its plane-0 address", hh, err)
		}
		addr := strings.Split(hh.Address, "/")[0]
		var pout, perr bytes.Buffer
		var code int
		switch {
		case busybox:
			code, err = Exec(ctx, dir, "h0", []string{"ping", "-6", "-c", "3", "-W", "5", addr}, nil, &pout, &perr)
		default:
			ping, lerr := exec.LookPath("ping")
			if lerr != nil {
				t.Fatalf("no way to ping over the TUN: the image has no busybox and this machine no ping; install busybox-static (Debian) or iputils-ping")
			}
			h0, _ := st.Process("h0")
			cmd := exec.CommandContext(ctx, "nsenter", "-t", fmt.Sprint(h0.PID), "-n", ping, "-6", "-c", "3", "-W", "5", addr)
			cmd.Stdout, cmd.Stderr = &pout, &perr
			err = cmd.Run()
			code = cmd.ProcessState.ExitCode()
		}
		if err != nil || code != 0 || !strings.Contains(pout.String(), "3 packets transmitted") {
			t.Errorf("ping -6 %s from h0 (busybox %v): exit %d, %v\n%s%s\n%s", addr, busybox, code, err, pout.String(), perr.String(), dockerLogs(d, st))
		}
	})

	t.Run("Stranger", func(t *testing.T) {
		start := time.Now()
		defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
		strangerOnLabNetwork(t, d, dir, name)
	})

	t.Run("KilledHostStartedAgain", func(t *testing.T) {
		start := time.Now()
		defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
		killedHostStartedAgain(t, d, dir)
	})

	t.Run("Prometheus", func(t *testing.T) {
		if _, err := os.Stat(prometheusBin); err != nil {
			t.Skipf("%s is not installed (apt-get install prometheus; .ci/run does): %v", prometheusBin, err)
		}
		st, _, err := Open(dir) // the addresses now (h2 was started again)
		if err != nil {
			t.Fatal(err)
		}
		prometheusScrapesLab(t, st, func() string { return dockerLogs(d, st) })
	})

	t.Run("DownLeavesNothing", func(t *testing.T) {
		start := time.Now()
		defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
		var out bytes.Buffer
		if err := DownWith(dir, DownOptions{RMI: true}, &out); err != nil {
			t.Fatalf("DownWith: %v\n%s", err, out.String())
		}
		left, err := d.eng.Leftovers(ctx, name)
		if err != nil || len(left) != 0 {
			t.Errorf("after lab down --rmi: %v, %v; want nothing with %s=%s\n%s", left, err, labdocker.LabLabel, name, out.String())
		}
		for _, f := range []string{StateFile, SecretFile, labdocker.ComposeFile} {
			if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after lab down: %v", f, err)
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, LogDir, "h0.log")); err != nil || len(b) == 0 {
			t.Errorf("h0's container log is not kept in logs/: %v", err)
		}
		var again bytes.Buffer
		if err := DownWith(dir, DownOptions{Name: name, RMI: true}, &again); err != nil || !strings.Contains(again.String(), "nothing to remove") {
			t.Errorf("a second lab down --name: %v, said %q; want nothing to remove", err, again.String())
		}
	})
}

// verifiedCollective runs an all-reduce of size across the lab's hosts
// and fails the test unless every rank verified.
func verifiedCollective(t *testing.T, d *DockerRuntime, dir, size string) {
	t.Helper()
	var out, errOut bytes.Buffer
	outs, err := RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: size, Iters: 1, Timeout: time.Minute}, &out, &errOut)
	if err != nil || len(outs) != 4 {
		st, _ := LoadState(dir)
		t.Fatalf("all-reduce %s: %d ranks, %v\n%s%s\n%s", size, len(outs), err, out.String(), errOut.String(), dockerLogs(d, st))
	}
	for _, o := range outs {
		if !o.Resp.Verified || o.Resp.Bytes == 0 {
			t.Errorf("h%d: verified %v, %d bytes", o.Host, o.Resp.Verified, o.Resp.Bytes)
		}
	}
}

// strangerOnLabNetwork runs a host with a secret of its own on the lab
// network: the fabric drops its frames, nothing crashes, a collective
// still verifies.
func strangerOnLabNetwork(t *testing.T, d *DockerRuntime, dir, name string) {
	ctx := context.Background()
	st, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	fab, err := fabricOf(st)
	if err != nil {
		t.Fatal(err)
	}
	before, err := fabricStatus(ctx, fab.API)
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := tunnel.NewSecret()
	sf := filepath.Join(t.TempDir(), "stranger-secret")
	if err := os.WriteFile(sf, secret, 0o644); err != nil {
		t.Fatal(err)
	}
	stranger := name + "-stranger"
	args := []string{"run", "-d", "--name", stranger, "--network", labdocker.NetworkName(name),
		"--label", labdocker.LabLabel + "=" + name, "-v", sf + ":/s:ro", labdocker.ImageRef(name),
		"host", "--id", "0", "--fabric", labdocker.ContainerName(name, fab.Name) + ":" + fmt.Sprint(labdocker.FabricTunnelPort),
		"--secret-file", "/s", "--plane-speed", "100M"}
	for _, s := range dockerLabSets {
		args = append(args, "--set", s)
	}
	if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", stranger).Run() })
	// A stranger's frames fail the tag check (another secret) or name a
	// host the fabric does not know.
	dropsOf := func(s map[string]uint64) uint64 { return s["bad-tag"] + s["unknown-host"] }
	deadline := time.Now().Add(90 * time.Second)
	var now uint64
	for {
		s, err := fabricStatus(ctx, fab.API)
		if err != nil {
			t.Fatalf("the fabric's status with a stranger about: %v", err)
		}
		if now = dropsOf(s.Drops); now > dropsOf(before.Drops) {
			t.Logf("fabric drops: before %v, now %v", before.Drops, s.Drops)
			break
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("docker", "logs", "--tail", "20", stranger).CombinedOutput()
			t.Fatalf("the fabric's drops did not grow in 90 s with a stranger sending (before %v, now %v)\nstranger's log:\n%s", before.Drops, s.Drops, logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range st.Processes {
		if !d.Alive(p) {
			t.Errorf("%s is not running with a stranger about\n%s", p.Name, d.LogTail(p, 20))
		}
	}
	verifiedCollective(t, d, dir, "1M")
}

// killedHostStartedAgain kills h2's container mid-collective (docker
// kill): the run fails naming h2, the others run on, ps shows h2 down;
// the docker start path (lab restart) brings it back and a collective
// verifies.
func killedHostStartedAgain(t *testing.T, d *DockerRuntime, dir string) {
	ctx := context.Background()
	st, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := st.Process("h2")
	var (
		wg     sync.WaitGroup
		cerr   error
		errOut bytes.Buffer
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// 16M at 100 Mb/s per plane: over a second of traffic.
		_, cerr = RunCollective(ctx, dir, CollectiveOptions{Op: "allreduce", Size: "16M", Iters: 1, Timeout: 30 * time.Second}, &bytes.Buffer{}, &errOut)
	}()
	time.Sleep(500 * time.Millisecond)
	if err := d.eng.Kill(ctx, h2.Container); err != nil {
		t.Fatalf("docker kill %s: %v", h2.Container, err)
	}
	wg.Wait()
	var cf *CollectiveFailedError
	if !errors.As(cerr, &cf) || !slices.Contains(cf.Hosts, 2) {
		t.Errorf("the collective with h2 killed: %v, want a failure naming h2\n%s", cerr, errOut.String())
	}
	for _, p := range st.Processes {
		if p.Name != "h2" && !d.Alive(p) {
			t.Errorf("%s is not running after h2 was killed\n%s", p.Name, d.LogTail(p, 20))
		}
	}
	rows, err := Ps(ctx, dir, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		want := map[bool]string{true: StateDown, false: StateUp}[r.Name == "h2"]
		if r.State != want {
			t.Errorf("ps: %s is %s (%s), want %s", r.Name, r.State, r.Why, want)
		}
	}
	var out bytes.Buffer
	if err := Restart(ctx, dir, "h2", RestartOptions{ReadyTimeout: 2 * time.Minute, HealthTimeout: 3 * time.Minute}, &out); err != nil {
		t.Fatalf("lab restart h2 (docker start): %v\n%s\n%s", err, out.String(), d.LogTail(*h2, 30))
	}
	now, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := now.Process("h2"); !d.Alive(*p) || p.PID == h2.PID || p.PID <= 0 {
		t.Errorf("h2 after the restart: pid %d (was %d), running %v", p.PID, h2.PID, d.Alive(*p))
	}
	verifiedCollective(t, d, dir, "1M")
}

// A binary the image cannot run (dynamically linked) is refused before
// anything is written, saying how to build a static one.
func TestDockerUpRefusesDynamicBinary(t *testing.T) {
	dyn := ""
	for _, p := range []string{"/bin/ls", "/usr/bin/env"} {
		if ok, err := labdocker.IsStaticELF(p); err == nil && !ok {
			dyn = p
			break
		}
	}
	if dyn == "" {
		t.Skip("skipping: no dynamically linked program on this machine to offer")
	}
	err := checkStatic(dyn, "--binary")
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "CGO_ENABLED=0 go build -o vcluster-static ./cmd/vcluster") || !strings.Contains(err.Error(), "--binary") {
		t.Errorf("checkStatic(%s) = %v; want an InvalidError saying how to build a static binary", dyn, err)
	}
	d, derr := newDockerRuntime()
	if derr != nil {
		t.Logf("the Up part needs a Docker Engine: %v", derr)
		return
	}
	defer d.eng.Close()
	dir := filepath.Join(t.TempDir(), "lab")
	_, err = Up(context.Background(), UpOptions{Dir: dir, Runtime: d, Executable: dyn, Binary: dyn, Name: testLabName(),
		Sets: dockerLabSets, PlaneBps: dockerLabPlaneBps}, &bytes.Buffer{})
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "static") {
		t.Errorf("Up with %s: %v; want an InvalidError about a static binary", dyn, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Up refused but wrote %s: %v", dir, err)
	}
}

// Capture finds the port's plane's fabric when there is one per plane.
func TestFabricOfPort(t *testing.T) {
	st := &State{Processes: []Process{{Name: "fabric-p0", Role: RoleFabric}, {Name: "fabric-p1", Role: RoleFabric}, {Name: "h0", Role: RoleHost}}}
	for port, want := range map[string]string{"p1.t0.0/3": "fabric-p1", "h5/p1": "fabric-p1", "p0.t1.2/0": "fabric-p0", "nonsense": "fabric-p0", "p7.t0.0/0": "fabric-p0"} {
		p, err := fabricOfPort(st, port)
		if err != nil || p.Name != want {
			t.Errorf("fabricOfPort(%q) = %v, %v; want %s", port, p, err, want)
		}
	}
	one := &State{Processes: []Process{{Name: FabricName, Role: RoleFabric}}}
	if p, err := fabricOfPort(one, "p1.t0.0/3"); err != nil || p.Name != FabricName {
		t.Errorf("one fabric: %v, %v", p, err)
	}
}

// A lab with a fabric per plane: a fabric container per plane, a
// verified collective across them, a capture from the port's plane's
// fabric, a fault plan every fabric gets, and ps. Two planes, not
// preset C's four: six real-time processes, as few as the test needs.
func TestDockerFabricPerPlane(t *testing.T) {
	d := dockerRuntime(t)
	ctx := context.Background()
	bin, name, dir := dockerTestLab(t, d)
	var out bytes.Buffer
	t0 := time.Now()
	st, err := Up(ctx, UpOptions{Dir: dir, Runtime: d, Executable: bin, Name: name, FabricPerPlane: true,
		Sets: append(slices.Clone(dockerLabSets), "fabric.planes=2"), PlaneBps: dockerLabPlaneBps, HealthTimeout: 3 * time.Minute, ReadyTimeout: 2 * time.Minute}, &out)
	if err != nil {
		t.Fatalf("Up: %v\n%s", err, out.String())
	}
	t.Logf("Up (2 fabrics + 4 hosts): %s", time.Since(t0).Round(time.Millisecond))
	if !strings.Contains(out.String(), "2 fabrics + 4 hosts") {
		t.Errorf("lab up's summary does not say 2 fabrics + 4 hosts:\n%s", out.String())
	}
	for p := range 2 {
		if f, ok := st.Process(PlaneFabricName(p)); !ok || f.Role != RoleFabric {
			t.Errorf("no fabric process %s in %v", PlaneFabricName(p), st.Names())
		}
	}
	rows, err := Ps(ctx, dir, &bytes.Buffer{})
	if err != nil || len(rows) != 6 {
		t.Fatalf("ps: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.State != StateUp {
			t.Errorf("ps: %s is %s (%s)", r.Name, r.State, r.Why)
		}
	}
	verifiedCollective(t, d, dir, "1M")

	// A capture of plane 1's host port comes from fabric-p1 while a
	// collective runs.
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunCollective(ctx, dir, CollectiveOptions{Op: "allreduce", Size: "1M", Iters: 1, Timeout: time.Minute}, &bytes.Buffer{}, &bytes.Buffer{})
	}()
	cctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	var pcap bytes.Buffer
	n, err := Capture(cctx, dir, "h0/p1", 5, &pcap)
	cancel()
	<-done
	if err != nil || n != 5 {
		t.Errorf("capture h0/p1: %d packets, %v; want 5", n, err)
	}
	plan := filepath.Join(t.TempDir(), "cut.yaml")
	os.WriteFile(plan, []byte("events:\n  - at: 0s\n    kind: link_down\n    target: link:p1.t0.0-p1.t1.0\n"), 0o644)
	if _, err := Fault(ctx, dir, plan, &bytes.Buffer{}); err != nil {
		t.Fatalf("fault: %v", err)
	}
	f1, _ := st.Process(PlaneFabricName(1))
	s, err := fabricStatus(ctx, f1.API)
	if err != nil || len(s.LinksDown) == 0 {
		t.Errorf("fabric-p1 after the fault: links down %v, %v; want p1.t0.0–p1.t1.0", s.LinksDown, err)
	}
	// No collective across the cut here: with eight lab processes on a
	// loaded 2-core machine, one failed (retry limit) in 1 of 2 runs;
	// the process e2e (TestE2ELiveFault) checks MRC around a cut.
	var g bytes.Buffer
	if err := Graph(ctx, dir, "dot", &g); err != nil || !strings.Contains(g.String(), "p1.t0.0") {
		t.Errorf("graph: %v\n%.300s", err, g.String())
	}
}

// lab exec is the docker runtime's; a process lab refuses it.
func TestExecNeedsDocker(t *testing.T) {
	dir := t.TempDir()
	st := &State{Version: StateVersion, Dir: dir, Runtime: RuntimeProcess, Processes: []Process{{Name: "h0", Role: RoleHost}}}
	if err := st.Save(); err != nil {
		t.Fatal(err)
	}
	_, err := Exec(context.Background(), dir, "h0", []string{"true"}, nil, nil, nil)
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "lab exec needs the docker runtime") {
		t.Errorf("Exec on a process lab: %v", err)
	}
}

// Without --runtime, lab up takes docker when an Engine answers.
func TestDefaultRuntime(t *testing.T) {
	name, why := DefaultRuntime(context.Background())
	_, err := newDockerRuntime()
	switch {
	case err == nil && (name != RuntimeDocker || !strings.Contains(why, "Docker Engine")):
		t.Errorf("an Engine answers, but DefaultRuntime = %s (%s)", name, why)
	case err != nil && (name != RuntimeProcess || !strings.Contains(why, "no Docker Engine")):
		t.Errorf("no Engine (%v), but DefaultRuntime = %s (%s)", err, name, why)
	}
	t.Logf("%s: %s", name, why)
}

// A lab whose processes end at once (an image whose /vcluster is
// busybox, which has no fabric applet) fails lab up naming the process
// with its log tail, keeps the logs and leaves nothing on the Engine.
func TestDockerUpFailureCleansUp(t *testing.T) {
	d := dockerRuntime(t)
	bb := ""
	for _, p := range busyboxPaths {
		if ok, err := labdocker.IsStaticELF(p); err == nil && ok {
			bb = p
			break
		}
	}
	if bb == "" {
		t.Skip("skipping: needs a static busybox as a binary that is no vcluster (Debian: busybox-static)")
	}
	ctx := context.Background()
	name := testLabName()
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { d.eng.RemoveLab(context.Background(), name, true, &bytes.Buffer{}) })
	var out bytes.Buffer
	_, err := Up(ctx, UpOptions{Dir: dir, Runtime: d, Executable: bb, Name: name,
		Sets: dockerLabSets, PlaneBps: dockerLabPlaneBps, HealthTimeout: time.Minute}, &out)
	if err == nil {
		t.Fatalf("Up with busybox as vcluster succeeded\n%s", out.String())
	}
	t.Logf("Up: %v", err)
	if !strings.Contains(err.Error(), "docker logs "+name+"-") || !strings.Contains(err.Error(), "applet not found") || !strings.Contains(err.Error(), "logs kept in") {
		t.Errorf("Up's error does not name the container with its log tail and where the logs are:\n%v", err)
	}
	left, lerr := d.eng.Leftovers(ctx, name)
	if lerr != nil || len(left) != 0 {
		t.Errorf("after a failed lab up: %v, %v; want nothing with the label", left, lerr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, LogDir, FabricName+".log")); err != nil || !strings.Contains(string(b), "applet not found") {
		t.Errorf("the fabric's log is not kept: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json left after a failed lab up: %v", err)
	}
}
