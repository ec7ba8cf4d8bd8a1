//go:build linux

package tunbridge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// needTUN skips only when the machine cannot do what the tests need.
func needTUN(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("skipping: TUN devices in network namespaces are unavailable here: %v", err)
	}
}

var nsSeq atomic.Int64

// newNamedNS creates a named network namespace for the test and deletes
// it in Cleanup.
func newNamedNS(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("vctun-%d-%d", os.Getpid(), nsSeq.Add(1))
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread that entered the new namespace
		// dies with this goroutine.
		runtime.LockOSThread()
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

// inNS runs f on a thread inside the named namespace (the thread is
// discarded afterwards).
func inNS(t *testing.T, name string, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(name)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	return <-errc
}

func nsHandle(t *testing.T, name string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func openBridge(t *testing.T, o Options) *Bridge {
	t.Helper()
	b, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%+v): %v", o, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// packet is the part of an IPv6 packet the tests look at.
type packet struct {
	src, dst netip.Addr
	next     uint8
	payload  []byte
}

func parseIPv6(p []byte) (packet, error) {
	if len(p) < 40 || p[0]>>4 != 6 {
		return packet{}, fmt.Errorf("not an IPv6 packet: % x", p)
	}
	n := int(binary.BigEndian.Uint16(p[4:6]))
	if 40+n != len(p) {
		return packet{}, fmt.Errorf("payload length %d in a %d-byte packet", n, len(p))
	}
	return packet{
		src:     netip.AddrFrom16([16]byte(p[8:24])),
		dst:     netip.AddrFrom16([16]byte(p[24:40])),
		next:    p[6],
		payload: p[40:],
	}, nil
}

func (p packet) String() string {
	return fmt.Sprintf("%s → %s next header %d, %d bytes", p.src, p.dst, p.next, len(p.payload))
}

// readPacket reads the next packet within a generous deadline.
func readPacket(t *testing.T, b *Bridge) packet {
	t.Helper()
	if err := b.file.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65536)
	n, err := b.Read(buf)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	p, err := parseIPv6(buf[:n])
	if err != nil {
		t.Fatalf("Read returned %d bytes: %v", n, err)
	}
	return p
}

// checksum is the internet checksum of the IPv6 pseudo-header and msg.
func checksum(src, dst netip.Addr, next uint8, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	var l [8]byte
	binary.BigEndian.PutUint32(l[:4], uint32(len(msg)))
	l[7] = next
	add(l[:])
	add(msg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// echoRequest is an ICMPv6 echo request src → dst.
func echoRequest(src, dst netip.Addr, id, seq uint16, data []byte) []byte {
	icmp := make([]byte, 8+len(data))
	icmp[0] = 128 // echo request
	binary.BigEndian.PutUint16(icmp[4:6], id)
	binary.BigEndian.PutUint16(icmp[6:8], seq)
	copy(icmp[8:], data)
	binary.BigEndian.PutUint16(icmp[2:4], checksum(src, dst, 58, icmp))
	p := make([]byte, 40+len(icmp))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:6], uint16(len(icmp)))
	p[6] = 58 // ICMPv6
	p[7] = 64
	s, d := src.As16(), dst.As16()
	copy(p[8:24], s[:])
	copy(p[24:40], d[:])
	copy(p[40:], icmp)
	return p
}

func TestAvailable(t *testing.T) {
	err := Available()
	if os.Geteuid() == 0 {
		if _, statErr := os.Stat(tunDevice); statErr == nil && err != nil {
			t.Fatalf("Available() = %v as root with %s present", err, tunDevice)
		}
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available() = %v, does not wrap ErrUnavailable", err)
	}
}

// A datagram the namespace sends to a routed prefix comes out of Read as
// one IPv6 packet with that destination and payload, and nothing else
// (no DAD, router solicitation or MLD) comes out before it.
func TestReadCarriesWhatTheNamespaceSends(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	b := openBridge(t, Options{
		NetNS:  ns,
		Addr:   netip.MustParsePrefix("fd00:99::1/64"),
		Routes: []netip.Prefix{netip.MustParsePrefix("fd00:98::/64")},
	})
	if b.Name() != DefaultName {
		t.Fatalf("Name() = %q, want the default %q", b.Name(), DefaultName)
	}

	payload := []byte("hello through the tunbridge")
	dst := netip.MustParseAddrPort("[fd00:98::5]:9")
	if err := inNS(t, ns, func() error {
		c, err := net.DialUDP("udp6", nil, net.UDPAddrFromAddrPort(dst))
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(payload)
		return err
	}); err != nil {
		t.Fatalf("sending from namespace %s: %v", ns, err)
	}

	p := readPacket(t, b)
	if p.dst != dst.Addr() || p.next != 17 {
		t.Fatalf("first packet read is %v, want the UDP datagram to %s (a stray packet?)", p, dst)
	}
	if p.src != netip.MustParseAddr("fd00:99::1") {
		t.Errorf("source %s, want the bridge's address fd00:99::1", p.src)
	}
	if len(p.payload) < 8 {
		t.Fatalf("UDP datagram of %d bytes", len(p.payload))
	}
	if port := binary.BigEndian.Uint16(p.payload[2:4]); port != dst.Port() {
		t.Errorf("UDP destination port %d, want %d", port, dst.Port())
	}
	if got := p.payload[8:]; !bytes.Equal(got, payload) {
		t.Errorf("UDP payload %q, want %q", got, payload)
	}
}

// The device is configured as asked, and quietly: no link-local address,
// no router solicitations.
func TestDeviceConfiguration(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	o := Options{
		NetNS: ns,
		Name:  "vctest7",
		Addr:  netip.MustParsePrefix("fd00:0:0:1::2/64"),
		MTU:   4000,
		Routes: []netip.Prefix{
			netip.MustParsePrefix("fd00:0:0:2::/64"),
			netip.MustParsePrefix("fd00:0:0:3::/64"),
			netip.MustParsePrefix("fd00:0:0:1::/64"), // Addr's own prefix: tolerated
		},
	}
	b := openBridge(t, o)
	h := nsHandle(t, ns)
	link, err := h.LinkByName("vctest7")
	if err != nil {
		t.Fatalf("the device in %s: %v", ns, err)
	}
	a := link.Attrs()
	if a.MTU != 4000 {
		t.Errorf("MTU %d, want 4000", a.MTU)
	}
	if a.Flags&net.FlagUp == 0 {
		t.Errorf("link flags %v, want up", a.Flags)
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || !addrs[0].IP.Equal(net.ParseIP("fd00:0:0:1::2")) {
		t.Errorf("addresses %v, want only fd00:0:0:1::2 (no link-local)", addrs)
	}
	routes, err := h.RouteList(link, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			have[r.Dst.String()] = true
		}
	}
	for _, want := range o.Routes {
		if !have[want.String()] {
			t.Errorf("no route to %s via %s; routes %v", want, b.Name(), routes)
		}
	}
	if err := inNS(t, ns, func() error {
		for _, key := range []string{"accept_ra", "router_solicitations", "accept_dad"} {
			v, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf/vctest7", key))
			if err != nil {
				return err
			}
			if s := strings.TrimSpace(string(v)); s != "0" {
				return fmt.Errorf("%s = %s, want 0", key, s)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// An echo request written into the bridge reaches the namespace's kernel,
// whose reply comes back out of Read.
func TestWriteReachesTheNamespaceKernel(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	b := openBridge(t, Options{
		NetNS:  ns,
		Addr:   netip.MustParsePrefix("fd00:99::1/64"),
		Routes: []netip.Prefix{netip.MustParsePrefix("fd00:98::/64")},
	})
	src, dst := netip.MustParseAddr("fd00:98::5"), netip.MustParseAddr("fd00:99::1")
	data := []byte("ping from the fabric side")
	req := echoRequest(src, dst, 0x1234, 7, data)
	if n, err := b.Write(req); err != nil || n != len(req) {
		t.Fatalf("Write(echo request) = %d, %v; want %d, nil", n, err, len(req))
	}
	p := readPacket(t, b)
	if p.src != dst || p.dst != src || p.next != 58 {
		t.Fatalf("read %v, want an ICMPv6 packet %s → %s", p, dst, src)
	}
	if len(p.payload) != 8+len(data) {
		t.Fatalf("ICMPv6 message of %d bytes, want %d", len(p.payload), 8+len(data))
	}
	if p.payload[0] != 129 {
		t.Errorf("ICMPv6 type %d, want 129 (echo reply)", p.payload[0])
	}
	if id, seq := binary.BigEndian.Uint16(p.payload[4:6]), binary.BigEndian.Uint16(p.payload[6:8]); id != 0x1234 || seq != 7 {
		t.Errorf("echo reply id %#x seq %d, want 0x1234 and 7", id, seq)
	}
	if !bytes.Equal(p.payload[8:], data) {
		t.Errorf("echo reply data %q, want %q", p.payload[8:], data)
	}
	if c := checksum(p.src, p.dst, 58, p.payload); c != 0 && c != 0xffff {
		t.Errorf("echo reply checksum does not verify (residue %#x)", c)
	}

	// A request with a wrong checksum is dropped by the kernel: no reply.
	bad := echoRequest(src, dst, 0x1234, 8, data)
	bad[len(bad)-1] ^= 0xff
	if _, err := b.Write(bad); err != nil {
		t.Fatalf("Write(corrupt echo request): %v", err)
	}
	good := echoRequest(src, dst, 0x1234, 9, data)
	if _, err := b.Write(good); err != nil {
		t.Fatal(err)
	}
	p = readPacket(t, b)
	if seq := binary.BigEndian.Uint16(p.payload[6:8]); p.payload[0] != 129 || seq != 9 {
		t.Errorf("after a corrupt request (seq 8) and a good one (seq 9), read type %d seq %d; want the reply to 9 only", p.payload[0], seq)
	}
}

// Write rejects what is not one whole IPv6 packet within the MTU.
func TestWriteRejectsMalformedPackets(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	b := openBridge(t, Options{NetNS: ns, Addr: netip.MustParsePrefix("fd00:99::1/64"), MTU: 1280})
	good := echoRequest(netip.MustParseAddr("fd00:98::5"), netip.MustParseAddr("fd00:99::1"), 1, 1, nil)
	ipv4 := append([]byte(nil), good...)
	ipv4[0] = 0x45
	long := echoRequest(netip.MustParseAddr("fd00:98::5"), netip.MustParseAddr("fd00:99::1"), 1, 1, make([]byte, 1300))
	for _, c := range []struct {
		name string
		p    []byte
		want string
	}{
		{"empty", nil, "shorter than an IPv6 header"},
		{"short", good[:39], "shorter than an IPv6 header"},
		{"ipv4", ipv4, "IP version 4"},
		{"truncated", good[:len(good)-1], "payload length"},
		{"over the MTU", long, "exceeds the MTU 1280"},
	} {
		n, err := b.Write(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) || n != 0 {
			t.Errorf("Write(%s) = %d, %v; want 0 and an error containing %q", c.name, n, err, c.want)
		}
	}
}

// Close removes the device, wakes a blocked Read, and may be repeated.
func TestCloseRemovesTheDevice(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	b, err := Open(Options{NetNS: filepath.Join(NetNSDir, ns), Name: "vcclose", Addr: netip.MustParsePrefix("fd00:99::1/64")})
	if err != nil {
		t.Fatal(err)
	}
	h := nsHandle(t, ns)
	if _, err := h.LinkByName("vcclose"); err != nil {
		t.Fatalf("after Open (NetNS as a path): %v", err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 2000))
		readErr <- err
	}()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-readErr:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("blocked Read returned %v after Close, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a blocked Read did not return within 10s of Close")
	}
	if _, err := h.LinkByName("vcclose"); err == nil {
		t.Errorf("the device still exists after Close")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := b.Write(echoRequest(netip.MustParseAddr("fd00:98::5"), netip.MustParseAddr("fd00:99::1"), 1, 1, nil)); err == nil {
		t.Errorf("Write after Close succeeded")
	}
	// The name is free again.
	b2 := openBridge(t, Options{NetNS: ns, Name: "vcclose", Addr: netip.MustParsePrefix("fd00:99::1/64")})
	if b2.Name() != "vcclose" {
		t.Errorf("reopened as %q", b2.Name())
	}
}

// A /proc/PID/ns/net path names a namespace as well as a name does.
func TestProcNamespacePath(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	started, release := make(chan string), make(chan struct{})
	go func() {
		// A thread parked in the namespace gives it a /proc path.
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err == nil {
			err = netns.Set(h)
			h.Close()
		}
		if err != nil {
			started <- ""
			return
		}
		started <- fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		<-release
	}()
	path := <-started
	defer close(release)
	if path == "" {
		t.Fatal("could not park a thread in the namespace")
	}
	b := openBridge(t, Options{NetNS: path, Name: "vcproc", Addr: netip.MustParsePrefix("fd00:99::1/64")})
	if _, err := nsHandle(t, ns).LinkByName(b.Name()); err != nil {
		t.Fatalf("NetNS %s: the device is not in namespace %s: %v", path, ns, err)
	}
}

// NetNS "" is the calling thread's namespace.
func TestCurrentNamespace(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	var b *Bridge
	if err := inNS(t, ns, func() error {
		var err error
		b, err = Open(Options{Name: "vccur", Addr: netip.MustParsePrefix("fd00:99::1/64")})
		return err
	}); err != nil {
		t.Fatalf("Open in the current namespace: %v", err)
	}
	defer b.Close()
	if _, err := nsHandle(t, ns).LinkByName("vccur"); err != nil {
		t.Fatalf("the device is not in the calling thread's namespace %s: %v", ns, err)
	}
}

// Open refuses what the machine cannot do, naming the field.
func TestOpenRejectsTheImpossible(t *testing.T) {
	needTUN(t)
	ns := newNamedNS(t)
	addr := netip.MustParsePrefix("fd00:99::1/64")
	openBridge(t, Options{NetNS: ns, Name: "vcdup", Addr: addr})
	plain := filepath.Join(t.TempDir(), "notans")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o           Options
		want        string
		unavailable bool
	}{
		{Options{NetNS: "vctun-no-such-namespace", Addr: addr}, "NetNS: no such network namespace", true},
		{Options{NetNS: "/nonexistent/netns", Addr: addr}, "NetNS: no such network namespace", true},
		{Options{NetNS: plain, Addr: addr}, "is not a network namespace", false},
		{Options{NetNS: "/proc/self/ns/mnt", Addr: addr}, "is a namespace, but not a network namespace", false},
		{Options{NetNS: ns, Name: "vcdup", Addr: addr}, `Name: an interface "vcdup" already exists`, false},
	} {
		b, err := Open(c.o)
		if err == nil {
			b.Close()
			t.Errorf("Open(%+v) succeeded, want an error containing %q", c.o, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v): %v; want an error containing %q", c.o, err, c.want)
		}
		if got := errors.Is(err, ErrUnavailable); got != c.unavailable {
			t.Errorf("Open(%+v): errors.Is(%v, ErrUnavailable) = %v, want %v", c.o, err, got, c.unavailable)
		}
	}
}
