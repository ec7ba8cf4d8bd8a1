package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/labcni"
	"github.com/vcluster/vcluster/compose/tunnel"
)

// The binaries under test, built once (go build) into binDir.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds vcluster-cni and vcluster; it returns their paths.
func binaries(t *testing.T) (plugin, vcluster string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "vct-cni-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg string }{
			{"vcluster-cni", "github.com/vcluster/vcluster/cmd/vcluster-cni"},
			{"vcluster", "github.com/vcluster/vcluster/cmd/vcluster"},
		} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, b.out), b.pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "vcluster-cni"), filepath.Join(binDir, "vcluster")
}

// call runs the plugin as a runtime does: env, the config on stdin; it
// returns stdout and, when the plugin failed, its CNI error.
func call(t *testing.T, env map[string]string, conf any) ([]byte, *types.Error) {
	t.Helper()
	plugin, _ := binaries(t)
	stdin, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(plugin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CNI_PATH=" + filepath.Dir(plugin)}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if runErr == nil {
		return stdout.Bytes(), nil
	}
	var e types.Error
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil || e.Msg == "" {
		t.Fatalf("%s failed (%v) without a CNI error on stdout: %q (stderr %q)", env["CNI_COMMAND"], runErr, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), &e
}

func env(command, containerID, netns, ifname string, extra ...string) map[string]string {
	m := map[string]string{"CNI_COMMAND": command, "CNI_CONTAINERID": containerID, "CNI_NETNS": netns, "CNI_IFNAME": ifname}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

func prefix() string { return fmt.Sprintf("vct-%06x", rand.Uint32()&0xffffff) }

// fabric is a running `vcluster fabric` of 2 hosts on one T0.
type fabric struct {
	api, secret string
	sets        []string
}

func startFabric(t *testing.T) fabric {
	t.Helper()
	_, vcluster := binaries(t)
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	s, err := tunnel.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, s, 0o600); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "fabric.ready")
	sets := []string{"fabric.preset=C", "fabric.hosts=2", "fabric.hostsPerT0=2"}
	args := []string{"fabric", "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0", "--secret-file", secret, "--ready-file", ready}
	for _, kv := range sets {
		args = append(args, "--set", kv)
	}
	logf, err := os.Create(filepath.Join(dir, "fabric.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command(vcluster, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		var rd labapi.Ready
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &rd) == nil && rd.API != "" {
			return fabric{api: rd.API, secret: secret, sets: sets}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "fabric.log"))
			t.Fatalf("the fabric wrote no ready file in 60s; its log:\n%s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// conf is a network config for f with its state in a fresh directory.
func (f fabric) conf(t *testing.T, name string) map[string]any {
	_, vcluster := binaries(t)
	return map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": "vcluster-cni",
		"vcluster": vcluster, "fabricApi": f.api, "secretFile": f.secret,
		"sets": f.sets, "planeSpeed": "1G", "stateDir": t.TempDir(), "timeout": "60s",
	}
}

// needRoot skips unless the test can make network namespaces and TUN
// devices.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, TUN devices): run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs ip(8) (iproute2) for ip netns")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("needs /dev/net/tun: " + err.Error())
	}
}

// newNetns makes a named network namespace, deleted at cleanup.
func newNetns(t *testing.T, name string) string {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add %s: %v: %s (needs root and a writable /run/netns)", name, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return "/run/netns/" + name
}

// records reads the plugin's attachment records of conf.
func records(t *testing.T, conf map[string]any) map[string]labcni.Record {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(conf["stateDir"].(string), conf["name"].(string), "*.json"))
	out := map[string]labcni.Record{}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var r labcni.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[r.ContainerID] = r
	}
	return out
}

// running reports whether a recorded host process still runs.
func running(r labcni.Record) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.PID))
	return err == nil && bytes.Contains(b, []byte(r.ReadyFile))
}

// killHostsAtCleanup stops whatever host of conf a failed test left.
func killHostsAtCleanup(t *testing.T, conf map[string]any) {
	t.Cleanup(func() {
		for _, r := range records(t, conf) {
			if running(r) {
				syscall.Kill(r.PID, syscall.SIGKILL)
			}
		}
	})
}

// add attaches containerID in netns and checks the result.
func add(t *testing.T, conf map[string]any, containerID, netns string) *current.Result {
	t.Helper()
	start := time.Now()
	out, cerr := call(t, env("ADD", containerID, netns, "eth0"), conf)
	if cerr != nil {
		t.Fatalf("ADD %s: %v", containerID, cerr)
	}
	t.Logf("ADD %s took %v", containerID, time.Since(start).Round(time.Millisecond))
	res, err := current.NewResult(out)
	if err != nil {
		t.Fatalf("ADD %s: result %s: %v", containerID, out, err)
	}
	r, err := current.GetResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if r.CNIVersion != "1.1.0" || len(r.Interfaces) != 1 || r.Interfaces[0].Name != "eth0" || r.Interfaces[0].Sandbox != netns {
		t.Fatalf("ADD %s: want version 1.1.0 and one interface eth0 in %s, got %s", containerID, netns, out)
	}
	if len(r.IPs) != 1 || r.IPs[0].Address.IP.To4() != nil || r.IPs[0].Interface == nil || *r.IPs[0].Interface != 0 {
		t.Fatalf("ADD %s: want one IPv6 address on interface 0, got %s", containerID, out)
	}
	if ones, _ := r.IPs[0].Address.Mask.Size(); ones != 64 {
		t.Fatalf("ADD %s: want a /64, got %s", containerID, r.IPs[0].Address.String())
	}
	return r
}

func ipAddr(t *testing.T, ns string) string {
	out, err := exec.Command("ip", "-n", ns, "-6", "addr").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s -6 addr: %v: %s", ns, err, out)
	}
	return string(out)
}

// links lists the interfaces in ns other than lo.
func links(t *testing.T, ns string) []string {
	out, err := exec.Command("ip", "-n", ns, "-o", "link").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s link: %v: %s", ns, err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.TrimSuffix(f[1], ":") != "lo" {
			names = append(names, strings.TrimSuffix(f[1], ":"))
		}
	}
	return names
}

func TestAddPingCheckDel(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("needs ping (Debian iputils-ping: apt-get install iputils-ping)")
	}
	f := startFabric(t)
	p := prefix()
	nsA, nsB := newNetns(t, p+"-a"), newNetns(t, p+"-b")
	conf := f.conf(t, "vlab")
	killHostsAtCleanup(t, conf)

	ra := add(t, conf, p+"-ca", nsA)
	rb := add(t, conf, p+"-cb", nsB)
	addrA, addrB := ra.IPs[0].Address.IP.String(), rb.IPs[0].Address.IP.String()
	if addrA == addrB {
		t.Fatalf("a and b got the same address %s", addrA)
	}
	if s := ipAddr(t, p+"-a"); !strings.Contains(s, addrA+"/64") {
		t.Fatalf("ip -n %s-a -6 addr does not show %s/64:\n%s", p, addrA, s)
	}
	if s := ipAddr(t, p+"-b"); !strings.Contains(s, addrB+"/64") {
		t.Fatalf("ip -n %s-b -6 addr does not show %s/64:\n%s", p, addrB, s)
	}
	start := time.Now()
	if out, err := exec.Command("ip", "netns", "exec", p+"-a", "ping", "-6", "-c", "3", "-W", "5", addrB).CombinedOutput(); err != nil {
		t.Fatalf("ping -6 from a to b's %s: %v\n%s", addrB, err, out)
	}
	t.Logf("ping a → b (3 echoes) took %v", time.Since(start).Round(time.Millisecond))

	// CHECK with the ADD's result as prevResult, as a runtime sends it.
	confA := map[string]any{}
	for k, v := range conf {
		confA[k] = v
	}
	confA["prevResult"] = ra
	if _, cerr := call(t, env("CHECK", p+"-ca", nsA, "eth0"), confA); cerr != nil {
		t.Fatalf("CHECK a (healthy): %v", cerr)
	}
	// A repeated ADD gives the same attachment, not a second host.
	if r := add(t, conf, p+"-ca", nsA); r.IPs[0].Address.String() != ra.IPs[0].Address.String() {
		t.Fatalf("repeated ADD a: address %s, first ADD %s", r.IPs[0].Address.String(), ra.IPs[0].Address.String())
	}
	if out, err := exec.Command("ip", "-n", p+"-a", "link", "del", "eth0").CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	_, cerr := call(t, env("CHECK", p+"-ca", nsA, "eth0"), confA)
	if cerr == nil || !strings.Contains(cerr.Msg, "eth0") {
		t.Fatalf("CHECK a after its interface was deleted: want an error naming eth0, got %v", cerr)
	}
	t.Logf("CHECK a, interface deleted: %v", cerr)
	// b: its host killed.
	recs := records(t, conf)
	syscall.Kill(recs[p+"-cb"].PID, syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for running(recs[p+"-cb"]) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	_, cerr = call(t, env("CHECK", p+"-cb", nsB, "eth0"), conf)
	if cerr == nil || !strings.Contains(cerr.Msg, "not running") {
		t.Fatalf("CHECK b after its host was killed: want an error saying it is not running, got %v", cerr)
	}
	t.Logf("CHECK b, host killed: %v", cerr)

	for _, c := range []struct{ id, ns string }{{p + "-ca", nsA}, {p + "-cb", nsB}} {
		if _, cerr := call(t, env("DEL", c.id, c.ns, "eth0"), conf); cerr != nil {
			t.Fatalf("DEL %s: %v", c.id, cerr)
		}
	}
	for _, ns := range []string{p + "-a", p + "-b"} {
		if l := links(t, ns); len(l) != 0 {
			t.Errorf("after DEL, %s still has %v", ns, l)
		}
	}
	for id, r := range recs {
		if running(r) {
			t.Errorf("after DEL, %s's host (pid %d) still runs", id, r.PID)
		}
	}
	if left := records(t, conf); len(left) != 0 {
		t.Errorf("after DEL, records left: %v", left)
	}
	// DEL again, and DEL without a netns: success.
	if _, cerr := call(t, env("DEL", p+"-ca", nsA, "eth0"), conf); cerr != nil {
		t.Fatalf("second DEL a: %v", cerr)
	}
	if _, cerr := call(t, env("DEL", p+"-cb", "", "eth0"), conf); cerr != nil {
		t.Fatalf("second DEL b, no CNI_NETNS: %v", cerr)
	}
}

func TestGC(t *testing.T) {
	needRoot(t)
	f := startFabric(t)
	p := prefix()
	nsA, nsB := newNetns(t, p+"-a"), newNetns(t, p+"-b")
	conf := f.conf(t, "vlab")
	killHostsAtCleanup(t, conf)
	// a asks for host 1 (CNI_ARGS); b gets the lowest free one, 0.
	if _, cerr := call(t, env("ADD", p+"-ca", nsA, "eth0", "CNI_ARGS", "IgnoreUnknown=1;VCLUSTER_HOST=2"), conf); cerr == nil ||
		cerr.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(cerr.Msg, "[0, 1]") {
		t.Fatalf("ADD with VCLUSTER_HOST=2 of a 2-host fabric: want code 4 with the range [0, 1], got %v", cerr)
	}
	if _, cerr := call(t, env("ADD", p+"-ca", nsA, "eth0", "CNI_ARGS", "IgnoreUnknown=1;VCLUSTER_HOST=1"), conf); cerr != nil {
		t.Fatalf("ADD a as host 1: %v", cerr)
	}
	add(t, conf, p+"-cb", nsB)
	recs := records(t, conf)
	if recs[p+"-ca"].Host != 1 || recs[p+"-cb"].Host != 0 {
		t.Fatalf("hosts: a %d (asked 1), b %d (want the free 0)", recs[p+"-ca"].Host, recs[p+"-cb"].Host)
	}
	if _, cerr := call(t, env("ADD", p+"-cc", nsB, "eth1"), conf); cerr == nil || !strings.Contains(cerr.Msg, "every host") {
		t.Fatalf("a third ADD on a 2-host fabric: want an error saying every host is attached, got %v", cerr)
	}

	gc := map[string]any{}
	for k, v := range conf {
		gc[k] = v
	}
	gc["cni.dev/valid-attachments"] = []types.GCAttachment{{ContainerID: p + "-cb", IfName: "eth0"}}
	if _, cerr := call(t, map[string]string{"CNI_COMMAND": "GC"}, gc); cerr != nil {
		t.Fatalf("GC: %v", cerr)
	}
	left := records(t, conf)
	if _, ok := left[p+"-ca"]; ok || running(recs[p+"-ca"]) {
		t.Errorf("after GC with valid [b], a is still attached (record %v, host running %v)", ok, running(recs[p+"-ca"]))
	}
	if l := links(t, p+"-a"); len(l) != 0 {
		t.Errorf("after GC, %s-a still has %v", p, l)
	}
	if _, ok := left[p+"-cb"]; !ok || !running(recs[p+"-cb"]) {
		t.Errorf("after GC with valid [b], b is gone (record %v, host running %v)", ok, running(recs[p+"-cb"]))
	}
	if _, cerr := call(t, env("CHECK", p+"-cb", nsB, "eth0"), conf); cerr != nil {
		t.Errorf("CHECK b after GC: %v", cerr)
	}
	// The runtime may remove the netns before DEL: DEL still succeeds
	// and stops the host (which held the namespace alive through its TUN).
	if out, err := exec.Command("ip", "netns", "del", p+"-b").CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	if _, cerr := call(t, env("DEL", p+"-cb", nsB, "eth0"), conf); cerr != nil {
		t.Fatalf("DEL b, its netns gone: %v", cerr)
	}
	if running(recs[p+"-cb"]) {
		t.Errorf("after DEL b, its host still runs")
	}
}

func TestStatus(t *testing.T) {
	f := startFabric(t)
	conf := f.conf(t, "vlab")
	if _, cerr := call(t, map[string]string{"CNI_COMMAND": "STATUS"}, conf); cerr != nil {
		t.Fatalf("STATUS with the fabric up: %v", cerr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conf["fabricApi"] = l.Addr().String()
	l.Close() // nobody listens there now
	_, cerr := call(t, map[string]string{"CNI_COMMAND": "STATUS"}, conf)
	if cerr == nil || cerr.Code != types.ErrPluginNotAvailable {
		t.Fatalf("STATUS with nobody at fabricApi: want code 50, got %v", cerr)
	}
	t.Logf("STATUS, no fabric: %v", cerr)
}

func TestVersion(t *testing.T) {
	out, cerr := call(t, map[string]string{"CNI_COMMAND": "VERSION"}, map[string]any{})
	if cerr != nil {
		t.Fatal(cerr)
	}
	var v struct {
		Supported []string `json:"supportedVersions"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("VERSION: %s: %v", out, err)
	}
	if !strings.Contains(" "+strings.Join(v.Supported, " ")+" ", " 1.1.0 ") {
		t.Fatalf("VERSION: supported %v lacks 1.1.0", v.Supported)
	}
}

// TestBadConfig needs neither root nor a fabric: every bad field is
// refused before anything starts, with its name.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := func() map[string]any {
		return map[string]any{"cniVersion": "1.1.0", "name": "vlab", "type": "vcluster-cni",
			"vcluster": "/bin/sh", "fabricApi": "127.0.0.1:7401", "secretFile": secret, "stateDir": dir}
	}
	for _, c := range []struct {
		field string
		value any // nil: delete the field
		code  uint
		want  string
	}{
		{"fabricApi", nil, 7, "fabricApi: required"},
		{"fabricApi", "localhost", 7, "fabricApi"},
		{"fabricApi", "127.0.0.1:70000", 7, "port 1..65535"},
		{"fabric", "127.0.0.1:0", 7, "fabric:"},
		{"secretFile", nil, 7, "secretFile: required"},
		{"secretFile", filepath.Join(dir, "none"), 7, "secretFile"},
		{"vcluster", filepath.Join(dir, "none"), 7, "vcluster:"},
		{"vcluster", dir, 7, "vcluster:"},
		{"labConfig", filepath.Join(dir, "none.yaml"), 7, "labConfig"},
		{"sets", []string{"fabric.hosts=2", "nokey"}, 7, "sets[1]"},
		{"sets", []string{"=2"}, 7, "sets[0]"},
		{"planeSpeed", "fast", 7, "planeSpeed"},
		{"planeSpeed", "1k", 7, "out of range"},
		{"planeSpeed", "1T", 7, "out of range"},
		{"stateDir", "relative/dir", 7, "stateDir"},
		{"timeout", "10ms", 7, "timeout"},
		{"timeout", "soon", 7, "timeout"},
		{"fabricApi", 7401, 6, "fabricApi"},
		{"name", nil, 7, "missing network name"},
	} {
		t.Run(fmt.Sprintf("%s=%v", c.field, c.value), func(t *testing.T) {
			conf := good()
			if c.value == nil {
				delete(conf, c.field)
			} else {
				conf[c.field] = c.value
			}
			_, cerr := call(t, env("ADD", "vct-bad", "/run/netns/vct-none", "eth0"), conf)
			if cerr == nil {
				t.Fatalf("ADD accepted %s=%v", c.field, c.value)
			}
			if cerr.Code != c.code || !strings.Contains(cerr.Msg, c.want) {
				t.Fatalf("ADD with %s=%v: want code %d and %q in the message, got %d %q", c.field, c.value, c.code, c.want, cerr.Code, cerr.Msg)
			}
		})
	}
	t.Run("CNI_ARGS", func(t *testing.T) {
		_, cerr := call(t, env("ADD", "vct-bad", "/run/netns/vct-none", "eth0", "CNI_ARGS", "VCLUSTER_HOST=-1"), good())
		if cerr == nil || cerr.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(cerr.Msg, "VCLUSTER_HOST") {
			t.Fatalf("VCLUSTER_HOST=-1: want code 4 naming VCLUSTER_HOST, got %v", cerr)
		}
	})
}
