package lab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/tunbridge"
)

// TestTunPingAcrossTheLab is the end-to-end test of the TUN bridge:
// two hosts of a process lab, each with its TUN in a namespace of its own;
// the ordinary ping(8) in host 0's namespace reaches host 1's address
// through host 0's NIC, the fabric process and host 1's NIC, and the
// kernel in host 1's namespace answers.
func TestTunPingAcrossTheLab(t *testing.T) {
	if err := tunbridge.Available(); err != nil {
		t.Skipf("skipping: TUN devices in network namespaces are unavailable: %v", err)
	}
	for _, tool := range []string{"ip", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s(8) is not installed: %v", tool, err)
		}
	}
	bin := tunTestBinary(t)
	nsA, nsB := tunTestNamespace(t, "a"), tunTestNamespace(t, "b")
	dir := t.TempDir()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, bin, "lab", "up", "--dir", dir, "--runtime", "process",
		"--preset", "C", "--hosts", "2", "--tun-netns", nsA+","+nsB)
	out, err := up.CombinedOutput()
	t.Cleanup(func() {
		down := exec.Command(bin, "lab", "down", "--dir", dir)
		if out, err := down.CombinedOutput(); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("lab up: %v\n%s\n%s", err, out, tunTestLogs(dir))
	}

	addr0, addr1 := tunTestHostAddress(t, dir, "h0"), tunTestHostAddress(t, dir, "h1")
	before := tunTestICMP6(t, nsB)

	// Wait until the path works (the first echo may race the hosts'
	// attachment), then three of three must come back.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := exec.Command("ip", "netns", "exec", nsA, "ping", "-6", "-c", "1", "-W", "5", addr1.String()).Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo reply from host 1 (%s) in namespace %s within 60s\n%s", addr1, nsA, tunTestLogs(dir))
		}
		time.Sleep(200 * time.Millisecond) // ping can fail at once (no route yet)
	}
	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", nsA, "ping", "-6", "-c", "3", "-W", "5", addr1.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s ping -6 -c 3 -W 5 %s: %v\n%s\n%s", nsA, addr1, err, out, tunTestLogs(dir))
	}
	if n := tunTestReceived(t, out); n != 3 {
		t.Errorf("ping got %d of 3 replies:\n%s", n, out)
	}

	// The replies are the kernel's in host 1's namespace, not host 1's
	// netstack: its ICMPv6 counters saw the echoes.
	after := tunTestICMP6(t, nsB)
	if in := after["Icmp6InEchos"] - before["Icmp6InEchos"]; in < 4 {
		t.Errorf("namespace %s received %d echo requests, want ≥ 4 (one probe + three)", nsB, in)
	}
	if replies := after["Icmp6OutEchoReplies"] - before["Icmp6OutEchoReplies"]; replies < 4 {
		t.Errorf("namespace %s sent %d echo replies, want ≥ 4", nsB, replies)
	}

	// And the other way round.
	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", nsB, "ping", "-6", "-c", "2", "-W", "5", addr0.String()).CombinedOutput()
	if err != nil {
		t.Errorf("ip netns exec %s ping -6 -c 2 -W 5 %s: %v\n%s", nsB, addr0, err, out)
	}
}

// tunTestBinary builds the vcluster binary for this test.
func tunTestBinary(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	root, err := exec.Command(goTool, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "vcluster")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/vcluster")
	build.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/vcluster: %v\n%s", err, out)
	}
	return bin
}

// tunTestNamespace creates a named network namespace, deleted in Cleanup.
func tunTestNamespace(t *testing.T, suffix string) string {
	t.Helper()
	name := fmt.Sprintf("vclab-%d-%s", os.Getpid(), suffix)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies in the new namespace
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("creating network namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("deleting network namespace %s: %v", name, err)
		}
	})
	return name
}

// tunTestHostAddress asks host name's API (from the lab's state file) for
// its plane-0 address.
func tunTestHostAddress(t *testing.T, dir, name string) netip.Addr {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatalf("the lab's state: %v", err)
	}
	var state struct {
		Processes []struct {
			Name string `json:"name"`
			API  string `json:"api"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		t.Fatalf("state.json: %v\n%s", err, raw)
	}
	for _, p := range state.Processes {
		if p.Name != name {
			continue
		}
		c := http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get("http://" + p.API + "/v1/health")
		if err != nil {
			t.Fatalf("%s health: %v", name, err)
		}
		defer resp.Body.Close()
		var h labapi.HostHealth
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatalf("%s health: %v", name, err)
		}
		a, err := netip.ParseAddr(h.Address)
		if err != nil || !a.Is6() {
			t.Fatalf("%s health: address %q is not an IPv6 address (%v)", name, h.Address, err)
		}
		return a
	}
	t.Fatalf("state.json has no process %q:\n%s", name, raw)
	return netip.Addr{}
}

// tunTestICMP6 reads a namespace's ICMPv6 counters (/proc/net/snmp6).
func tunTestICMP6(t *testing.T, ns string) map[string]int64 {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp6").Output()
	if err != nil {
		t.Fatalf("/proc/net/snmp6 in %s: %v", ns, err)
	}
	m := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasPrefix(f[0], "Icmp6") {
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				m[f[0]] = v
			}
		}
	}
	if _, ok := m["Icmp6InEchos"]; !ok {
		t.Fatalf("/proc/net/snmp6 in %s has no Icmp6InEchos:\n%s", ns, out)
	}
	return m
}

var tunTestReceivedRE = regexp.MustCompile(`(\d+) (packets )?received`)

// tunTestReceived is the "N received" of ping's summary.
func tunTestReceived(t *testing.T, out []byte) int {
	t.Helper()
	m := tunTestReceivedRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no 'received' count in ping's output:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// tunTestLogs is the tail of every process log of the lab in dir.
func tunTestLogs(dir string) string {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	var b strings.Builder
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(raw) > 3000 {
			raw = raw[len(raw)-3000:]
		}
		fmt.Fprintf(&b, "--- %s (tail)\n%s\n", l, raw)
	}
	return b.String()
}
