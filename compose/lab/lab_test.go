package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vcluster/vcluster/compose/labapi"
)

// fakeUp starts a lab of the fake fabric and hosts in a fresh directory
// and stops it when the test ends.
func fakeUp(t *testing.T, hosts string, extra ...string) (string, *State, string) {
	t.Helper()
	dir := fakeDir(t.TempDir())
	var out bytes.Buffer
	st, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t),
		Sets: append([]string{"fabric.preset=C", "fabric.hosts=" + hosts}, extra...), PlaneBps: 1e9,
		ReadyTimeout: 20 * time.Second, HealthTimeout: 20 * time.Second}, &out)
	if err != nil {
		t.Fatalf("Up: %v\n%s", err, out.String())
	}
	t.Cleanup(func() { Down(dir, &bytes.Buffer{}) })
	return dir, st, out.String()
}

// The whole life of a lab on the stand-ins: up writes the state, the
// secret and a summary; ps says every process is up; a collective is
// verified; down stops every recorded PID and removes the run files but
// keeps the logs.
func TestUpPsCollectiveDown(t *testing.T) {
	dir, st, summary := fakeUp(t, "4")
	if len(st.Processes) != 5 || st.Processes[0].Name != FabricName || st.Processes[4].Name != "h3" {
		t.Fatalf("processes %v, want fabric, h0..h3", st.Names())
	}
	for _, want := range []string{"1 fabric + 4 hosts", "scaling: host links 1G (configured 100G)", "NAME", "LAG-p99", "lab down --dir " + dir} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	loaded, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	fab := loaded.Processes[0]
	for _, p := range loaded.Processes[1:] {
		if i := slices.Index(p.Args, "--fabric"); i < 0 || p.Args[i+1] != fab.Tunnel {
			t.Errorf("%s args %v: --fabric is not the fabric's tunnel %s", p.Name, p.Args, fab.Tunnel)
		}
		if !slices.Contains(p.Args, p.ReadyFile) || !filepath.IsAbs(p.ReadyFile) {
			t.Errorf("%s: ready file %q not absolute or not in its args", p.Name, p.ReadyFile)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 65 {
		t.Errorf("secret: %v, mode %v, %d bytes; want 0600 and 64 hex + newline", err, fi.Mode(), fi.Size())
	}

	var ps bytes.Buffer
	rows, err := Ps(context.Background(), dir, &ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.State != StateUp || r.PID <= 0 || r.LagP99 < 0 {
			t.Errorf("ps row %+v, want up with a pid and a lag", r)
		}
	}
	if !regexp.MustCompile(`(?m)^h2\s+host\s+\d+\s+up\s+127\.0\.0\.1:\d+\s+fd00::2\s+7µs$`).MatchString(ps.String()) {
		t.Errorf("ps table has no up row for h2:\n%s", ps.String())
	}

	var out, errOut bytes.Buffer
	outs, err := RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: "1M", Iters: 1, Timeout: 10 * time.Second}, &out, &errOut)
	if err != nil || len(outs) != 4 {
		t.Fatalf("collective: %v (%d answers)\n%s", err, len(outs), errOut.String())
	}
	// The slowest rank (the fake's rank 3: 4 µs) sets the time.
	if !regexp.MustCompile(`(?m)^\s+1048576\s+262144\s+float\s+sum\s+-1\s+4\.00\s+262\.14\s+393\.22\s+0\s+ok$`).MatchString(out.String()) {
		t.Errorf("no verified row with the slowest rank's time:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "#       size") && !strings.Contains(out.String(), "size") {
		t.Errorf("no nccl-tests header:\n%s", out.String())
	}

	var down bytes.Buffer
	if err := Down(dir, &down); err != nil {
		t.Fatalf("Down: %v\n%s", err, down.String())
	}
	for _, p := range st.Processes {
		if !waitGonePID(p.PID, 10*time.Second) {
			t.Errorf("%s (pid %d) still exists after lab down", p.Name, p.PID)
		}
		if !strings.Contains(down.String(), "stopped "+p.Name) {
			t.Errorf("down does not say it stopped %s:\n%s", p.Name, down.String())
		}
	}
	for _, f := range []string{StateFile, SecretFile, RunDir} {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after down (%v)", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, LogDir, "h3.log")); err != nil {
		t.Errorf("logs not kept: %v", err)
	}
	if !strings.Contains(down.String(), filepath.Join(dir, LogDir)) {
		t.Errorf("down does not say where the logs are:\n%s", down.String())
	}
}

// A second lab up in the same directory is refused before anything
// starts; so are bad options.
func TestUpRefusals(t *testing.T) {
	dir, st, _ := fakeUp(t, "2", "fabric.hostsPerT0=2")
	_, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t), Sets: []string{"fabric.preset=C", "fabric.hosts=4"}, PlaneBps: 1e9}, &bytes.Buffer{})
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "a lab is up there") || !strings.Contains(err.Error(), "fabric pid") {
		t.Errorf("second up: %v, want an InvalidError saying a lab is up", err)
	}
	if now, _ := LoadState(dir); now == nil || now.Processes[0].PID != st.Processes[0].PID {
		t.Errorf("the refused up changed the state")
	}

	base := UpOptions{Dir: fakeDir(t.TempDir()), Runtime: ProcessRuntime{}, Executable: testExe(t), PlaneBps: 1e9, Sets: []string{"fabric.preset=C", "fabric.hosts=4"}}
	for _, tc := range []struct {
		name string
		mod  func(o *UpOptions)
		want string
	}{
		{"slow plane", func(o *UpOptions) { o.PlaneBps = 1000 }, "--plane-speed: 1k is outside 1M..100G"},
		{"bad set", func(o *UpOptions) { o.Sets = append(o.Sets, "fabric.planes=0") }, "fabric.planes"},
		{"too many hosts", func(o *UpOptions) { o.Sets = []string{"fabric.preset=C", "fabric.hosts=128", "fabric.t0PerPlane=32"} }, "--hosts: the config has 128 hosts; a process lab runs 1..64"},
		{"netns count", func(o *UpOptions) { o.TunNetns = []string{"a", "b", "c", "d", "e"} }, "--tun-netns: 5 namespaces for 4 hosts"},
		{"netns name", func(o *UpOptions) { o.TunNetns = []string{"a b"} }, "is not a namespace name"},
		{"netns path", func(o *UpOptions) { o.TunNetns = []string{"/nonexistent/ns"} }, "no network namespace file /nonexistent/ns"},
		{"netns missing", func(o *UpOptions) { o.TunNetns = []string{"vcluster-no-such-ns"} }, `no network namespace "vcluster-no-such-ns"`},
		{"missing config", func(o *UpOptions) { o.Config = "/nonexistent/lab.yaml" }, "/nonexistent/lab.yaml"},
	} {
		o := base
		tc.mod(&o)
		_, err := Up(context.Background(), o, &bytes.Buffer{})
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an InvalidError with %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(o.Dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the refused up created %s", tc.name, o.Dir)
		}
	}
}

// A host that fails to start stops the lab: the error names it and shows
// its log's tail; every process started is gone and no state remains.
func TestUpHostCrashStopsEverything(t *testing.T) {
	t.Setenv("LAB_FAKE_CRASH", "2")
	dir := fakeDir(t.TempDir())
	_, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t),
		Sets: []string{"fabric.preset=C", "fabric.hosts=4"}, PlaneBps: 1e9, ReadyTimeout: 20 * time.Second}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("up succeeded with a crashing host")
	}
	for _, want := range []string{"h2 (pid", "ended before it was ready", "crashing on purpose", filepath.Join(dir, LogDir, "h2.log"), "logs kept in"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, StateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state.json left behind: %v", err)
	}
	assertNoProcessOf(t, dir)
}

// A host that never says "up" is named after the bounded wait, with why.
func TestUpHostNeverUp(t *testing.T) {
	t.Setenv("LAB_FAKE_STARTING", "1")
	dir := fakeDir(t.TempDir())
	start := time.Now()
	_, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t),
		Sets: []string{"fabric.preset=C", "fabric.hosts=4"}, PlaneBps: 1e9, ReadyTimeout: 20 * time.Second, HealthTimeout: time.Second}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "h1 (pid") || !strings.Contains(err.Error(), `not up after 1s: health says "starting"`) {
		t.Fatalf("err %v, want h1 not up after 1s", err)
	}
	if strings.Contains(err.Error(), "h0 (pid") || strings.Contains(err.Error(), "h2 (pid") || strings.Contains(err.Error(), "h3 (pid") {
		t.Errorf("hosts that were up are named too: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the bounded wait took %s", d)
	}
	assertNoProcessOf(t, dir)
}

// assertNoProcessOf checks no process has dir's run files in its command
// line.
func assertNoProcessOf(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesMentioning(filepath.Join(dir, RunDir))
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes of the lab still run: %v", left)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesMentioning lists the live PIDs whose command line contains s.
func processesMentioning(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && len(b) > 0 && bytes.Contains(b, []byte(s)) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// A member killed mid-collective fails the run naming it; the rest keep
// running, ps shows it down, restart brings it back, and the next run is
// verified.
func TestKilledHostRestart(t *testing.T) {
	dir, st, _ := fakeUp(t, "4")
	h2, _ := st.Process("h2")
	errc := make(chan error, 1)
	var out, errOut bytes.Buffer
	go func() {
		_, err := RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: "1G", Iters: 1, Timeout: 20 * time.Second}, &out, &errOut)
		errc <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(h2.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	var ce *CollectiveFailedError
	if !errors.As(err, &ce) || !slices.Equal(ce.Hosts, []int{2}) || !strings.Contains(err.Error(), "h2") {
		t.Fatalf("collective err %v, want a failure blaming h2 alone\nstderr:\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "FAILED") {
		t.Errorf("the row does not say FAILED:\n%s", out.String())
	}
	rows, _ := Ps(context.Background(), dir, &bytes.Buffer{})
	for _, r := range rows {
		if want := map[bool]string{true: StateDown, false: StateUp}[r.Name == "h2"]; r.State != want {
			t.Errorf("ps: %s is %s, want %s", r.Name, r.State, want)
		}
	}
	_, err = RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: "1M", Iters: 1, Timeout: 10 * time.Second}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.As(err, &ce) || !slices.Equal(ce.Hosts, []int{2}) || !strings.Contains(err.Error(), "h2 not running: lab restart h2") {
		t.Errorf("collective with h2 gone: %v, want it refused naming h2", err)
	}
	if err := Restart(context.Background(), dir, "h0", RestartOptions{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "h0 is running") {
		t.Errorf("restart of a running host: %v", err)
	}
	if err := Restart(context.Background(), dir, "h9", RestartOptions{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "have fabric, h0, h1, h2, h3") {
		t.Errorf("restart of an unknown name: %v", err)
	}
	var rs bytes.Buffer
	if err := Restart(context.Background(), dir, "h2", RestartOptions{ReadyTimeout: 20 * time.Second, HealthTimeout: 20 * time.Second}, &rs); err != nil {
		t.Fatalf("restart h2: %v", err)
	}
	now, _ := LoadState(dir)
	p2, _ := now.Process("h2")
	if p2.PID == h2.PID || !alivePID(p2.PID) || !strings.Contains(rs.String(), "restarted h2") {
		t.Errorf("h2 after restart: pid %d (was %d), output %q", p2.PID, h2.PID, rs.String())
	}
	if _, err := RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: "1M", Iters: 1, Timeout: 10 * time.Second}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Errorf("collective after the restart: %v", err)
	}
}

// fault, graph and capture reach the fabric; its refusals are
// InvalidErrors with its message, other failures are not.
func TestFabricCommands(t *testing.T) {
	dir, _, _ := fakeUp(t, "2", "fabric.hostsPerT0=2")
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(plan, []byte("events:\n  - at: 0s\n    kind: link_down\n    target: link:p0.t0.0-p0.t1.0\n"), 0o644)
	var out bytes.Buffer
	fr, err := Fault(context.Background(), dir, plan, &out)
	if err != nil || fr.Events != 1 || !strings.Contains(out.String(), "1 event scheduled") || !strings.Contains(out.String(), "link_down") {
		t.Errorf("fault: %v %+v\n%s", err, fr, out.String())
	}
	os.WriteFile(plan, []byte("bad: yes\n"), 0o644)
	var ie *InvalidError
	if _, err := Fault(context.Background(), dir, plan, &out); !errors.As(err, &ie) || !strings.Contains(err.Error(), "no such link") {
		t.Errorf("bad plan: %v, want the fabric's 400 as an InvalidError", err)
	}
	if _, err := Fault(context.Background(), dir, filepath.Join(t.TempDir(), "none.yaml"), &out); !errors.As(err, &ie) {
		t.Errorf("missing plan: %v", err)
	}

	out.Reset()
	if err := Graph(context.Background(), dir, "dot", &out); err != nil || !strings.HasPrefix(out.String(), "graph fabric {") {
		t.Errorf("graph: %v %q", err, out.String())
	}
	if err := Graph(context.Background(), dir, "svg", &out); err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "501") {
		t.Errorf("graph svg without graphviz: %v, want the 501 as a run failure", err)
	}
	if err := Graph(context.Background(), dir, "png", &out); !errors.As(err, &ie) {
		t.Errorf("graph png: %v", err)
	}

	out.Reset()
	n, err := Capture(context.Background(), dir, "p0.t0.0/1", 5, &out)
	if err != nil || n != 5 {
		t.Fatalf("capture: %d packets, %v", n, err)
	}
	if got, err := copyPcapng(&bytes.Buffer{}, bytes.NewReader(out.Bytes()), 0); err != nil || got != 5 {
		t.Errorf("the captured stream re-reads as %d packets, %v", got, err)
	}
	if path, err := exec.LookPath("tshark"); err == nil {
		cmd := exec.Command(path, "-r", "-", "-T", "fields", "-e", "frame.number")
		cmd.Stdin = bytes.NewReader(out.Bytes())
		b, err := cmd.Output()
		if err != nil || strings.Count(string(b), "\n") != 5 {
			t.Errorf("tshark -r - read %q, %v", b, err)
		}
	}
	if _, err := Capture(context.Background(), dir, "p9.x", 1, &out); !errors.As(err, &ie) || !strings.Contains(err.Error(), "ports look like") {
		t.Errorf("unknown port: %v", err)
	}
}

// lab down signals only PIDs that are still the lab's: a recorded PID
// now held by another program is left alone.
func TestDownLeavesForeignPIDAlone(t *testing.T) {
	dir := fakeDir(t.TempDir())
	os.MkdirAll(dir, 0o755)
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	st := &State{Version: StateVersion, Dir: dir, Runtime: RuntimeProcess, Processes: []Process{
		{Name: "h0", Role: RoleHost, PID: other.Process.Pid, ReadyFile: filepath.Join(dir, RunDir, "h0.ready")}}}
	if err := st.Save(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Down(dir, &out); err != nil {
		t.Fatal(err)
	}
	if !alivePID(other.Process.Pid) {
		t.Errorf("lab down killed a process that is not the lab's")
	}
	if !strings.Contains(out.String(), "was not running") {
		t.Errorf("down output %q", out.String())
	}
}

// Stop escalates to SIGKILL after the grace when SIGTERM is ignored.
func TestStopEscalates(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "x.ready")
	cmd := exec.Command("sh", "-c", `trap "" TERM; : > "$0.armed"; while :; do sleep 0.05; done`, marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	p := Process{Name: "stubborn", PID: cmd.Process.Pid, ReadyFile: marker}
	rt := ProcessRuntime{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(marker + ".armed"); err == nil {
			break // SIGTERM is ignored from now on
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !rt.Alive(p) {
		t.Fatal("the stubborn process does not look alive")
	}
	start := time.Now()
	if err := rt.Stop(p, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if rt.Alive(p) || time.Since(start) < 300*time.Millisecond {
		t.Errorf("alive %v after %s", rt.Alive(p), time.Since(start))
	}
}

// A malformed state.json is an error naming the file, never a panic.
func TestDecodeStateErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{`:             "not a lab state",
		`{"version":2}`: "version 2",
		`{"version":1,"processes":[{"name":"a","role":"x"}]}`:                               `role "x"`,
		`{"version":1,"processes":[{"name":"a","role":"host"},{"name":"a","role":"host"}]}`: "repeated",
		`{"version":1,"processes":[{"name":"a","role":"host","pid":-3}]}`:                   "pid -3",
	} {
		if _, err := decodeState("s.json", []byte(in)); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "s.json: ") {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"version":1,"processes":[{"name":"h0","role":"host","pid":5}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeState("s.json", b)
	})
}

// copyPcapng refuses what is not pcapng and stops at the count.
func TestCopyPcapng(t *testing.T) {
	stream := pcapngHeader()
	for i := range 3 {
		stream = append(stream, pcapngPacket(uint64(i), []byte("abc"))...)
	}
	var out bytes.Buffer
	if n, err := copyPcapng(&out, bytes.NewReader(stream), 2); n != 2 || err != nil {
		t.Errorf("count 2: %d, %v", n, err)
	}
	if n, err := copyPcapng(&bytes.Buffer{}, bytes.NewReader(stream), 0); n != 3 || err != nil {
		t.Errorf("to the end: %d, %v", n, err)
	}
	for name, in := range map[string][]byte{
		"not a section first": pcapngPacket(0, []byte("x")),
		"cut short":           stream[:len(stream)-3],
		"no magic":            append([]byte{0x0A, 0x0D, 0x0D, 0x0A, 28, 0, 0, 0, 1, 2, 3, 4}, make([]byte, 16)...),
		"huge block":          append(pcapngHeader(), 6, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f),
	} {
		if _, err := copyPcapng(&bytes.Buffer{}, bytes.NewReader(in), 0); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func FuzzCopyPcapng(f *testing.F) {
	f.Add(append(pcapngHeader(), pcapngPacket(1, []byte("frame"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		copyPcapng(&bytes.Buffer{}, bytes.NewReader(b), 0)
	})
}

// The verdict names the hosts to blame, in short, and each rank's own
// message goes to stderr.
func TestJudge(t *testing.T) {
	ok := labapi.CollectiveResponse{Verified: true, FailedPeer: -1}
	blame2 := labapi.CollectiveResponse{Error: "peer host 2 stopped answering", FailedPeer: 2}
	outs := []RankOutcome{
		{Host: 0, Resp: blame2},
		{Host: 1, Resp: blame2},
		{Host: 2, Err: errors.New("h2 (127.0.0.1:1) gave no answer: connection refused")},
		{Host: 3, Resp: labapi.CollectiveResponse{Error: "QP error", FailedPeer: -1, Rank: 3}},
		{Host: 4, Resp: labapi.CollectiveResponse{Wrong: 7, FailedPeer: -1, Rank: 4}},
		{Host: 5, Resp: ok},
	}
	var errOut bytes.Buffer
	err := judge(outs, &errOut)
	want := "collective failed on h2, h3, h4 (h2 gave no answer; h0, h1 blame h2; h3 failed; h4 not verified)"
	if err == nil || err.Error() != want {
		t.Errorf("verdict %v, want %s", err, want)
	}
	for _, line := range []string{"h0 (rank 0): peer host 2 stopped answering (blames h2)", "h2 (127.0.0.1:1) gave no answer", "h3 (rank 3): QP error", "h4 (rank 4): output not verified (7 wrong elements)"} {
		if !strings.Contains(errOut.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, errOut.String())
		}
	}
	if strings.Contains(errOut.String(), "h5") {
		t.Errorf("a verified rank is reported:\n%s", errOut.String())
	}
	if err := judge([]RankOutcome{{Host: 0, Resp: ok}, {Host: 1, Resp: ok}}, &errOut); err != nil {
		t.Errorf("all verified: %v", err)
	}
}

// A state directory whose processes are all gone (a crashed machine, a
// killed lab) is reused by the next lab up.
func TestUpReusesStaleState(t *testing.T) {
	dir := fakeDir(t.TempDir())
	os.MkdirAll(dir, 0o755)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := &State{Version: StateVersion, Dir: dir, Runtime: RuntimeProcess, Processes: []Process{
		{Name: FabricName, Role: RoleFabric, Host: -1, PID: dead.Process.Pid, ReadyFile: filepath.Join(dir, RunDir, "fabric.ready")}}}
	if err := stale.Save(); err != nil {
		t.Fatal(err)
	}
	st, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t),
		Sets: []string{"fabric.preset=C", "fabric.hosts=2", "fabric.hostsPerT0=2"}, PlaneBps: 1e9, ReadyTimeout: 20 * time.Second, HealthTimeout: 20 * time.Second}, &bytes.Buffer{})
	if err != nil {
		t.Fatalf("up over a stale state: %v", err)
	}
	t.Cleanup(func() { Down(dir, &bytes.Buffer{}) })
	if len(st.Processes) != 3 || st.Processes[0].PID == dead.Process.Pid {
		t.Errorf("state after up: %+v", st.Processes)
	}
}

// lab ps's table: a dash for what is unknown, and why a starting process
// is not up.
func TestWriteRows(t *testing.T) {
	var b bytes.Buffer
	WriteRows(&b, []Row{
		{Name: "fabric", Role: RoleFabric, PID: 10, State: StateUp, API: "127.0.0.1:1", Address: "127.0.0.1:2", LagP99: 1500 * time.Nanosecond},
		{Name: "h0", Role: RoleHost, PID: 11, State: StateStarting, API: "127.0.0.1:3", Address: "-", LagP99: -1, Why: `health says "starting"`},
		{Name: "h1", Role: RoleHost, PID: 12, State: StateDown, API: "127.0.0.1:4", Address: "-", LagP99: -1, Why: "not running"},
	})
	want := `NAME    ROLE    PID  STATE     API          ADDRESS      LAG-p99
fabric  fabric  10   up        127.0.0.1:1  127.0.0.1:2  2µs
h0      host    11   starting  127.0.0.1:3  -            -
h1      host    12   down      127.0.0.1:4  -            -
h0 is starting: health says "starting"
`
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// lab up --config: the processes read a copy in run/ (a restart reads
// what the lab started with, even if the file changed since), and
// lab down removes it.
func TestUpConfigCopy(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "lab.yaml")
	os.WriteFile(cfg, []byte("fabric:\n  preset: C\n  hosts: 2\n  hostsPerT0: 2\n"), 0o644)
	dir := fakeDir(t.TempDir())
	st, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: testExe(t), Config: cfg,
		PlaneBps: 1e9, ReadyTimeout: 20 * time.Second, HealthTimeout: 20 * time.Second}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(dir, &bytes.Buffer{}) })
	copyPath := filepath.Join(dir, RunDir, ConfigCopy)
	if b, err := os.ReadFile(copyPath); err != nil || !strings.Contains(string(b), "hostsPerT0: 2") {
		t.Errorf("config copy: %v %q", err, b)
	}
	if st.Hosts != 2 || len(st.Processes) != 3 {
		t.Errorf("hosts %d, processes %v", st.Hosts, st.Names())
	}
	for _, p := range st.Processes {
		if i := slices.Index(p.Args, "--config"); i < 0 || p.Args[i+1] != copyPath {
			t.Errorf("%s args %v: --config is not the copy", p.Name, p.Args)
		}
	}
	os.WriteFile(cfg, []byte("fabric:\n  planes: 0\n"), 0o644) // the original changes: the lab does not care
	h1, _ := st.Process("h1")
	syscall.Kill(h1.PID, syscall.SIGKILL)
	waitGonePID(h1.PID, 10*time.Second)
	if err := Restart(context.Background(), dir, "h1", RestartOptions{ReadyTimeout: 20 * time.Second, HealthTimeout: 20 * time.Second}, &bytes.Buffer{}); err != nil {
		t.Errorf("restart after the config file changed: %v", err)
	}
	if err := Down(dir, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(copyPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the config copy survives lab down: %v", err)
	}
}

// A restarted fabric listens where it did: the hosts keep its tunnel
// address, the state its API.
func TestRestartFabricKeepsAddresses(t *testing.T) {
	dir, st, _ := fakeUp(t, "2", "fabric.hostsPerT0=2")
	fab, _ := st.Process(FabricName)
	syscall.Kill(fab.PID, syscall.SIGKILL)
	if !waitGonePID(fab.PID, 10*time.Second) {
		t.Fatal("the fabric did not die")
	}
	if err := Restart(context.Background(), dir, FabricName, RestartOptions{ReadyTimeout: 20 * time.Second}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	now, _ := LoadState(dir)
	f2, _ := now.Process(FabricName)
	if f2.PID == fab.PID || f2.API != fab.API || f2.Tunnel != fab.Tunnel {
		t.Errorf("restarted fabric: pid %d api %s tunnel %s; was pid %d api %s tunnel %s", f2.PID, f2.API, f2.Tunnel, fab.PID, fab.API, fab.Tunnel)
	}
	if i := slices.Index(f2.Args, "--listen"); i < 0 || f2.Args[i+1] != fab.Tunnel {
		t.Errorf("restart args %v do not listen on %s", f2.Args, fab.Tunnel)
	}
}

// A fat-tree lab says so in the summary.
func TestUpFatTreeSummary(t *testing.T) {
	_, st, summary := fakeUp(t, "16", "fabric.preset=", "fabric.topology=fattree", "fabric.k=4")
	if st.Hosts != 16 || !strings.Contains(summary, "topology: fattree, k=4, 1 plane\n") {
		t.Errorf("hosts %d, summary:\n%s", st.Hosts, summary)
	}
}
