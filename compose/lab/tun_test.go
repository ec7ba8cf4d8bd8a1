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
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
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
	nsA, nsB := tunTestNamespace(t, "a"), tunTestNamespace(t, "b")
	dir := filepath.Join(t.TempDir(), "lab")

	// Two hosts under one T0 (plane-0 addresses in one /64), slow planes:
	// a ping needs no bandwidth.
	r := vcluster(t, 4*time.Minute, "lab", "up", "--dir", dir, "--runtime", "process",
		"--preset", "C", "--hosts", "2", "--plane-speed", "100M", "--tun-netns", nsA+","+nsB)
	t.Cleanup(func() {
		st, err := LoadState(dir)
		if err != nil {
			return
		}
		if r := vcluster(t, time.Minute, "lab", "down", "--dir", dir); r.code != 0 {
			t.Errorf("lab down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, p := range st.Processes {
			if !waitGonePID(p.PID, 15*time.Second) {
				t.Errorf("%s (pid %d) still exists after lab down", p.Name, p.PID)
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	if r.code != 0 {
		t.Fatalf("lab up: exit %d\nstdout:\n%s\nstderr:\n%s\n%s", r.code, r.stdout, r.stderr, labLogs(dir))
	}
	st, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{nsA, nsB} {
		if !tunTestHasLink(t, ns, tunbridge.DefaultName) {
			t.Fatalf("lab up returned, but namespace %s has no %s\n%s", ns, tunbridge.DefaultName, labLogs(dir))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	addr0, addr1 := tunTestHostAddress(t, st, "h0"), tunTestHostAddress(t, st, "h1")
	before := tunTestICMP6(t, nsB)

	// Wait until the path works (the first echo may race the hosts'
	// attachment), then three of three must come back.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := exec.Command("ip", "netns", "exec", nsA, "ping", "-6", "-c", "1", "-W", "5", addr1.String()).Run(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no echo reply from host 1 (%s) in namespace %s within 60s\n%s", addr1, nsA, labLogs(dir))
		}
		time.Sleep(200 * time.Millisecond) // ping can fail at once (no route yet)
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", nsA, "ping", "-6", "-c", "3", "-W", "5", addr1.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s ping -6 -c 3 -W 5 %s: %v\n%s\n%s", nsA, addr1, err, out, labLogs(dir))
	}
	t.Logf("ip netns exec %s ping -6 -c 3 -W 5 %s:\n%s", nsA, addr1, out)
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

	// A packet bigger than an Ethernet MTU crosses as well.
	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", nsA, "ping", "-6", "-c", "1", "-W", "5", "-s", "3000", addr1.String()).CombinedOutput()
	if err != nil {
		t.Errorf("ip netns exec %s ping -6 -c 1 -W 5 -s 3000 %s: %v\n%s", nsA, addr1, err, out)
	}

	// And the other way round.
	out, err = exec.CommandContext(ctx, "ip", "netns", "exec", nsB, "ping", "-6", "-c", "2", "-W", "5", addr0.String()).CombinedOutput()
	if err != nil {
		t.Errorf("ip netns exec %s ping -6 -c 2 -W 5 %s: %v\n%s", nsB, addr0, err, out)
	}

	// lab down takes the devices away with the hosts.
	if r := vcluster(t, time.Minute, "lab", "down", "--dir", dir); r.code != 0 {
		t.Fatalf("lab down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, ns := range []string{nsA, nsB} {
		deadline := time.Now().Add(15 * time.Second)
		for tunTestHasLink(t, ns, tunbridge.DefaultName) {
			if time.Now().After(deadline) {
				t.Errorf("namespace %s still has %s 15s after lab down", ns, tunbridge.DefaultName)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tunTestHasLink reports whether namespace ns has an interface name.
func tunTestHasLink(t *testing.T, ns, name string) bool {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	_, err = nl.LinkByName(name)
	return err == nil
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

// tunTestHostAddress asks host name's API for its plane-0 address.
func tunTestHostAddress(t *testing.T, st *State, name string) netip.Addr {
	t.Helper()
	p, ok := st.Process(name)
	if !ok {
		t.Fatalf("the lab's state has no %s: %v", name, st.Names())
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
