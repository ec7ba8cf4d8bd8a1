// Package tunbridge makes a virtual host reachable from ordinary tools: it
// creates a TUN device (IFF_TUN|IFF_NO_PI, one IPv6 packet per read or
// write) in a network namespace, gives it the host's address, an MTU and
// routes to the fabric's other hosts, all through netlink and ioctls, and
// hands the caller the packets the namespace's kernel sends to them. The
// caller (compose/labhost) moves those packets to and from its netstack.
//
// It owns the device's life (Close removes it) and its configuration; it
// must not know the netstack, the fabric, the tunnel or the lab: bytes in,
// bytes out. It never shells out to ip(8).
package tunbridge

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
)

// DefaultName is the interface name when Options.Name is empty.
const DefaultName = "vc0"

// DefaultMTU is the MTU when Options.MTU is 0; MinMTU..MaxMTU bound it
// (1280 is IPv6's minimum link MTU; 9000 a jumbo frame).
const (
	DefaultMTU = 1500
	MinMTU     = 1280
	MaxMTU     = 9000
)

// NetNSDir is where named network namespaces live (ip-netns(8)).
const NetNSDir = "/run/netns"

// ErrUnavailable wraps every error Open and Available return because the
// machine or the process lacks something (no /dev/net/tun, no
// CAP_NET_ADMIN, no such namespace): callers and tests may skip on it.
var ErrUnavailable = errors.New("tunbridge unavailable")

// Options say which device to create where.
type Options struct {
	NetNS  string         // a named namespace (/run/netns/NAME) or a path to a netns file; "" = the current one
	Name   string         // interface name, default "vc0"
	Addr   netip.Prefix   // the host's address, e.g. fd00:0:0:1::2/64 — assigned to the TUN
	MTU    int            // default 1500; validated 1280..9000
	Routes []netip.Prefix // routed via the TUN (the fabric's other hosts' prefixes), may be empty
}

// withDefaults is o with its zero fields defaulted.
func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	return o
}

// netnsPath is the file Options.NetNS names ("" when it names the current
// namespace).
func (o Options) netnsPath() string {
	switch {
	case o.NetNS == "":
		return ""
	case strings.ContainsRune(o.NetNS, '/'):
		return o.NetNS
	default:
		return filepath.Join(NetNSDir, o.NetNS)
	}
}

// validate checks the options (already defaulted) without touching the
// machine; every error names the field.
func (o Options) validate() error {
	if o.NetNS != "" && !strings.ContainsRune(o.NetNS, '/') && (o.NetNS == "." || o.NetNS == "..") {
		return fmt.Errorf("NetNS: %q is not a namespace name (a name under %s or a path to a netns file)", o.NetNS, NetNSDir)
	}
	if err := checkIfName(o.Name); err != nil {
		return err
	}
	if o.MTU < MinMTU || o.MTU > MaxMTU {
		return fmt.Errorf("MTU: %d is outside %d..%d", o.MTU, MinMTU, MaxMTU)
	}
	if err := checkAddr(o.Addr); err != nil {
		return err
	}
	seen := make(map[netip.Prefix]int, len(o.Routes))
	for i, r := range o.Routes {
		field := fmt.Sprintf("Routes[%d]", i)
		if !r.IsValid() {
			return fmt.Errorf("%s: not a valid prefix (want an IPv6 prefix such as fd00:0:0:2::/64)", field)
		}
		if !r.Addr().Is6() || r.Addr().Is4In6() {
			return fmt.Errorf("%s: %s is not an IPv6 prefix", field, r)
		}
		if r.Masked() != r {
			return fmt.Errorf("%s: %s has bits set past its length; write %s", field, r, r.Masked())
		}
		if r.Addr().IsMulticast() || r.Addr().IsLinkLocalUnicast() {
			return fmt.Errorf("%s: %s is not a unicast global or unique-local prefix", field, r)
		}
		if j, dup := seen[r]; dup {
			return fmt.Errorf("%s: %s repeats Routes[%d]", field, r, j)
		}
		seen[r] = i
	}
	return nil
}

// checkIfName applies the kernel's rules for interface names
// (dev_valid_name): 1..15 bytes, not "." or "..", no '/', ':' or space.
func checkIfName(name string) error {
	if len(name) > 15 {
		return fmt.Errorf("Name: %q is %d bytes; an interface name has 1..15", name, len(name))
	}
	if name == "." || name == ".." {
		return fmt.Errorf("Name: %q is not an interface name", name)
	}
	for _, c := range name {
		if c == '/' || c == ':' || c <= ' ' || c == 0x7f {
			return fmt.Errorf("Name: %q contains %q; an interface name has no '/', ':', spaces or control characters", name, c)
		}
	}
	return nil
}

// checkAddr accepts a unicast IPv6 address with a prefix length.
func checkAddr(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("Addr: not a valid prefix (want the host's IPv6 address with its prefix length, e.g. fd00:0:0:1::2/64)")
	}
	a := p.Addr()
	if !a.Is6() || a.Is4In6() {
		return fmt.Errorf("Addr: %s is not an IPv6 address", p)
	}
	if a.Zone() != "" {
		return fmt.Errorf("Addr: %s has a zone; want a global or unique-local address", p)
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() {
		return fmt.Errorf("Addr: %s is not a global or unique-local unicast address", p)
	}
	return nil
}

// checkPacket accepts one whole IPv6 packet of at most mtu bytes.
func checkPacket(p []byte, mtu int) error {
	const ipv6Header = 40
	if len(p) < ipv6Header {
		return fmt.Errorf("tunbridge: write of %d bytes: shorter than an IPv6 header (40)", len(p))
	}
	if v := p[0] >> 4; v != 6 {
		return fmt.Errorf("tunbridge: write: IP version %d, want 6", v)
	}
	if payload := int(p[4])<<8 | int(p[5]); ipv6Header+payload != len(p) {
		return fmt.Errorf("tunbridge: write of %d bytes: the IPv6 header says %d (40 + payload length %d)", len(p), ipv6Header+payload, payload)
	}
	if len(p) > mtu {
		return fmt.Errorf("tunbridge: write of %d bytes exceeds the MTU %d", len(p), mtu)
	}
	return nil
}
