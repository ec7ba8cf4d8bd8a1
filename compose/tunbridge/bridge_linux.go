//go:build linux

package tunbridge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const tunDevice = "/dev/net/tun"

// Bridge is an open TUN device in a network namespace.
type Bridge struct {
	file  *os.File        // the TUN queue; pollable, so Close wakes a blocked Read
	link  *netlink.Handle // a netlink socket in the device's namespace
	name  string
	index int
	mtu   int

	closeOnce sync.Once
	closeErr  error
}

// Open creates the device described by o in its namespace, configured and
// up. Invalid options are rejected before anything is created; an error
// wrapping ErrUnavailable says what the machine or process lacks.
func Open(o Options) (*Bridge, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(tunDevice); err != nil {
		return nil, fmt.Errorf("%w: no %s (%v)", ErrUnavailable, tunDevice, err)
	}
	target, err := openNetNS(o)
	if err != nil {
		return nil, err
	}
	defer target.Close()

	// The namespace switch happens on a thread of its own: the goroutine
	// locks it, and should switching back fail it exits still locked, so
	// the runtime discards the thread instead of reusing it elsewhere.
	type result struct {
		b   *Bridge
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("tunbridge: the current network namespace: %w", err)}
			return
		}
		defer orig.Close()
		if orig.Equal(target) {
			b, err := create(o)
			runtime.UnlockOSThread()
			done <- result{b, err}
			return
		}
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: nsError(o, "entering", err)}
			return
		}
		b, err := create(o)
		if err := netns.Set(orig); err != nil {
			if b != nil {
				b.Close()
			}
			done <- result{err: fmt.Errorf("tunbridge: switching back from NetNS %q: %w", o.NetNS, err)}
			return // still locked: the thread dies with this goroutine
		}
		runtime.UnlockOSThread()
		done <- result{b, err}
	}()
	r := <-done
	return r.b, r.err
}

// openNetNS opens the namespace o names ("" = the calling thread's).
func openNetNS(o Options) (netns.NsHandle, error) {
	path := o.netnsPath()
	if path == "" {
		h, err := netns.Get()
		if err != nil {
			return netns.None(), fmt.Errorf("tunbridge: the current network namespace: %w", err)
		}
		return h, nil
	}
	h, err := netns.GetFromPath(path)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT):
		return netns.None(), fmt.Errorf("NetNS: no such network namespace %q (%s does not exist): %w", o.NetNS, path, ErrUnavailable)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return netns.None(), fmt.Errorf("NetNS: %s: %v: %w", path, err, ErrUnavailable)
	default:
		return netns.None(), fmt.Errorf("NetNS: %s: %w", path, err)
	}
	// A bind mount of a namespace is an nsfs inode; anything else (a
	// plain file left behind by a deleted namespace) is not one, and an
	// nsfs inode may be another kind of namespace (/proc/PID/ns/mnt).
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(h), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		h.Close()
		return netns.None(), fmt.Errorf("NetNS: %s is not a network namespace (not an nsfs file; was the namespace deleted?)", path)
	}
	if kind, err := unix.IoctlRetInt(int(h), unix.NS_GET_NSTYPE); err == nil && kind != unix.CLONE_NEWNET {
		h.Close()
		return netns.None(), fmt.Errorf("NetNS: %s is a namespace, but not a network namespace", path)
	}
	return h, nil
}

// nsError explains a failed setns.
func nsError(o Options, doing string, err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("NetNS: %s %q needs CAP_SYS_ADMIN: %v: %w", doing, o.NetNS, err, ErrUnavailable)
	}
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("NetNS: %q is not a network namespace: %v", o.NetNS, err)
	}
	return fmt.Errorf("NetNS: %s %q: %w", doing, o.NetNS, err)
}

// create makes and configures the device; it runs on a thread already in
// the target namespace, and cleans up after itself on failure.
func create(o Options) (*Bridge, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("tunbridge: a netlink socket: %w", err)
	}
	if _, err := h.LinkByName(o.Name); err == nil {
		h.Close()
		return nil, fmt.Errorf("Name: an interface %q already exists in %s", o.Name, nsLabel(o))
	}

	fd, err := unix.Open(tunDevice, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		h.Close()
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) {
			return nil, fmt.Errorf("%w: opening %s: %v", ErrUnavailable, tunDevice, err)
		}
		return nil, fmt.Errorf("tunbridge: opening %s: %w", tunDevice, err)
	}
	ifr, err := unix.NewIfreq(o.Name)
	if err != nil {
		unix.Close(fd)
		h.Close()
		return nil, fmt.Errorf("Name: %q: %v", o.Name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		h.Close()
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: creating TUN device %q needs CAP_NET_ADMIN: %v", ErrUnavailable, o.Name, err)
		}
		return nil, fmt.Errorf("tunbridge: TUNSETIFF %q: %w", o.Name, err)
	}
	b := &Bridge{
		file: os.NewFile(uintptr(fd), tunDevice),
		link: h,
		name: ifr.Name(),
		mtu:  o.MTU,
	}
	if err := b.configure(o); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// configure quiets IPv6 autoconfiguration on the device (no link-local
// address, no DAD, no router solicitations, so no packet appears on Read
// that nobody sent), then sets the MTU, the address, the link up and the
// routes.
func (b *Bridge) configure(o Options) error {
	link, err := b.link.LinkByName(b.name)
	if err != nil {
		return fmt.Errorf("tunbridge: the new device %q: %w", b.name, err)
	}
	b.index = link.Attrs().Index
	conf := filepath.Join("/proc/sys/net/ipv6/conf", b.name)
	for _, s := range []struct{ key, value string }{
		{"disable_ipv6", "0"},
		{"accept_ra", "0"},
		{"router_solicitations", "0"},
		{"accept_dad", "0"},
		{"dad_transmits", "0"},
	} {
		if cur, err := os.ReadFile(filepath.Join(conf, s.key)); err == nil && strings.TrimSpace(string(cur)) == s.value {
			continue // inherited from conf/default (a container's /proc/sys is read-only)
		}
		if err := os.WriteFile(filepath.Join(conf, s.key), []byte(s.value), 0); errors.Is(err, unix.EROFS) && s.key != "disable_ipv6" {
			continue // a container's read-only /proc/sys: NODAD and addrgenmode none cover these
		} else if err != nil {
			return fmt.Errorf("tunbridge: IPv6 on %q (%s=%s): %w", b.name, s.key, s.value, err)
		}
	}
	if err := b.link.LinkSetIP6AddrGenMode(link, nl.IN6_ADDR_GEN_MODE_NONE); err != nil {
		return fmt.Errorf("tunbridge: addrgenmode none on %q: %w", b.name, err)
	}
	if err := b.link.LinkSetMTU(link, o.MTU); err != nil {
		return fmt.Errorf("MTU: %d on %q: %w", o.MTU, b.name, err)
	}
	addr := &netlink.Addr{
		IPNet: &net.IPNet{IP: o.Addr.Addr().AsSlice(), Mask: net.CIDRMask(o.Addr.Bits(), 128)},
		Flags: unix.IFA_F_NODAD,
	}
	if err := b.link.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("Addr: %s on %q: %w", o.Addr, b.name, err)
	}
	if err := b.link.LinkSetUp(link); err != nil {
		return fmt.Errorf("tunbridge: setting %q up: %w", b.name, err)
	}
	for i, r := range o.Routes {
		route := &netlink.Route{
			LinkIndex: b.index,
			Dst:       &net.IPNet{IP: r.Addr().AsSlice(), Mask: net.CIDRMask(r.Bits(), 128)},
			Scope:     netlink.SCOPE_UNIVERSE,
		}
		// Replace: a route equal to Addr's own prefix already exists.
		if err := b.link.RouteReplace(route); err != nil {
			return fmt.Errorf("Routes[%d]: %s via %q: %w", i, r, b.name, err)
		}
	}
	return b.awaitAddress(o.Addr.Addr())
}

// readyTimeout bounds how long Open waits for the kernel to finish
// bringing the address up.
const readyTimeout = 10 * time.Second

// awaitAddress returns once addr is usable: the kernel finishes adding an
// address in a work item after the netlink request returns (even with
// IFA_F_NODAD it is tentative, and has no local route, until then), so a
// packet written right after Open could otherwise be dropped.
func (b *Bridge) awaitAddress(addr netip.Addr) error {
	ip := net.IP(addr.AsSlice())
	filter := &netlink.Route{Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL, Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}}
	deadline := time.Now().Add(readyTimeout)
	for {
		ready, err := b.addressReady(ip, filter)
		if err != nil {
			return fmt.Errorf("Addr: waiting for %s on %q: %w", addr, b.name, err)
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Addr: %s on %q is still not usable after %v (tentative, or no local route)", addr, b.name, readyTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *Bridge) addressReady(ip net.IP, local *netlink.Route) (bool, error) {
	addrs, err := b.link.AddrList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: b.index}}, netlink.FAMILY_V6)
	if err != nil {
		return false, err
	}
	settled := false
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			settled = a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0
		}
	}
	if !settled {
		return false, nil
	}
	routes, err := b.link.RouteListFiltered(netlink.FAMILY_V6, local, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_TYPE|netlink.RT_FILTER_DST)
	if err != nil {
		return false, err
	}
	return len(routes) > 0, nil
}

func nsLabel(o Options) string {
	if o.NetNS == "" {
		return "the current network namespace"
	}
	return fmt.Sprintf("network namespace %q", o.NetNS)
}

// Read reads one IPv6 packet the namespace sent into the device; it
// blocks until there is one or the bridge is closed. A p shorter than the
// packet gets its first len(p) bytes and the rest is lost; len(p) ≥ the
// MTU never truncates.
func (b *Bridge) Read(p []byte) (int, error) {
	return b.file.Read(p)
}

// Write hands one whole IPv6 packet to the namespace as if it had arrived
// on the device; anything else (short, not version 6, a payload length
// that disagrees with len(p), longer than the MTU) is rejected unsent.
func (b *Bridge) Write(p []byte) (int, error) {
	if err := checkPacket(p, b.mtu); err != nil {
		return 0, err
	}
	return b.file.Write(p)
}

// Close removes the device (and wakes a blocked Read). It is safe to call
// more than once.
func (b *Bridge) Close() error {
	b.closeOnce.Do(func() {
		// Closing the last queue of a non-persistent TUN device
		// unregisters it; delete it explicitly should it linger.
		b.closeErr = b.file.Close()
		if b.index != 0 {
			if l, err := b.link.LinkByIndex(b.index); err == nil && l.Attrs().Name == b.name {
				if err := b.link.LinkDel(l); err != nil && b.closeErr == nil {
					b.closeErr = fmt.Errorf("tunbridge: removing %q: %w", b.name, err)
				}
			}
		}
		b.link.Close()
	})
	return b.closeErr
}

// Name is the device's interface name.
func (b *Bridge) Name() string { return b.name }

// Available is nil when this process can create TUN devices in network
// namespaces: /dev/net/tun opens read-write and the process holds
// CAP_NET_ADMIN (devices, addresses, routes) and CAP_SYS_ADMIN (setns).
// Otherwise it says what is missing, wrapping ErrUnavailable.
func Available() error {
	fd, err := unix.Open(tunDevice, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: cannot open %s: %v", ErrUnavailable, tunDevice, err)
	}
	unix.Close(fd)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("%w: capget: %v", ErrUnavailable, err)
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(uint(c)%32)) != 0 }
	var missing []string
	if !has(unix.CAP_NET_ADMIN) {
		missing = append(missing, "CAP_NET_ADMIN")
	}
	if !has(unix.CAP_SYS_ADMIN) {
		missing = append(missing, "CAP_SYS_ADMIN")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the process lacks %v (run as root or grant them)", ErrUnavailable, missing)
	}
	return nil
}
