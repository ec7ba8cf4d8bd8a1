package tunbridge

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// Invalid options are rejected before anything is created, naming the
// field, the reason and the allowed range.
func TestOpenRejectsBadOptions(t *testing.T) {
	addr := netip.MustParsePrefix("fd00:0:0:1::2/64")
	route := netip.MustParsePrefix("fd00:0:0:2::/64")
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"MTU too small", Options{Addr: addr, MTU: 1279}, "MTU: 1279 is outside 1280..9000"},
		{"MTU too big", Options{Addr: addr, MTU: 9001}, "MTU: 9001 is outside 1280..9000"},
		{"MTU negative", Options{Addr: addr, MTU: -1}, "MTU: -1 is outside 1280..9000"},
		{"no address", Options{}, "Addr: not a valid prefix"},
		{"IPv4 address", Options{Addr: netip.MustParsePrefix("10.0.0.1/24")}, "Addr: 10.0.0.1/24 is not an IPv6 address"},
		{"mapped IPv4 address", Options{Addr: netip.MustParsePrefix("::ffff:10.0.0.1/120")}, "is not an IPv6 address"},
		{"link-local address", Options{Addr: netip.MustParsePrefix("fe80::1/64")}, "Addr: fe80::1/64 is not a global or unique-local"},
		{"multicast address", Options{Addr: netip.MustParsePrefix("ff02::1/128")}, "Addr: ff02::1/128 is not a global"},
		{"unspecified address", Options{Addr: netip.MustParsePrefix("::/0")}, "Addr: ::/0 is not a global"},
		{"loopback address", Options{Addr: netip.MustParsePrefix("::1/128")}, "Addr: ::1/128 is not a global"},
		{"invalid route", Options{Addr: addr, Routes: []netip.Prefix{route, {}}}, "Routes[1]: not a valid prefix"},
		{"IPv4 route", Options{Addr: addr, Routes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "Routes[0]: 10.0.0.0/8 is not an IPv6 prefix"},
		{"route with host bits", Options{Addr: addr, Routes: []netip.Prefix{netip.MustParsePrefix("fd00:0:0:2::5/64")}}, "Routes[0]: fd00:0:0:2::5/64 has bits set past its length; write fd00:0:0:2::/64"},
		{"multicast route", Options{Addr: addr, Routes: []netip.Prefix{netip.MustParsePrefix("ff00::/8")}}, "Routes[0]: ff00::/8 is not a unicast"},
		{"duplicate route", Options{Addr: addr, Routes: []netip.Prefix{route, route}}, "Routes[1]: fd00:0:0:2::/64 repeats Routes[0]"},
		{"name too long", Options{Addr: addr, Name: "abcdefghijklmnop"}, "Name: \"abcdefghijklmnop\" is 16 bytes; an interface name has 1..15"},
		{"name with slash", Options{Addr: addr, Name: "vc/0"}, "Name: \"vc/0\" contains '/'"},
		{"name with colon", Options{Addr: addr, Name: "vc:0"}, "Name: \"vc:0\" contains ':'"},
		{"name with space", Options{Addr: addr, Name: "vc 0"}, "Name: \"vc 0\" contains ' '"},
		{"name dot", Options{Addr: addr, Name: ".."}, "Name: \"..\" is not an interface name"},
		{"namespace dot", Options{Addr: addr, NetNS: ".."}, "NetNS: \"..\" is not a namespace name"},
	} {
		b, err := Open(c.o)
		if err == nil {
			b.Close()
			t.Errorf("%s: Open(%+v) succeeded, want an error containing %q", c.name, c.o, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open(%+v): %v\nwant an error containing %q", c.name, c.o, err, c.want)
		}
		if errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: a bad option reported as ErrUnavailable: %v", c.name, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	o := Options{Addr: netip.MustParsePrefix("fd00::1/64")}.withDefaults()
	if o.Name != DefaultName || o.MTU != DefaultMTU {
		t.Fatalf("defaults: Name %q MTU %d, want %q and %d", o.Name, o.MTU, DefaultName, DefaultMTU)
	}
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults do not validate: %v", err)
	}
	for in, want := range map[string]string{"": "", "lab-a": "/run/netns/lab-a", "/proc/1/ns/net": "/proc/1/ns/net", "./x": "./x"} {
		if got := (Options{NetNS: in}).netnsPath(); got != want {
			t.Errorf("NetNS %q → %q, want %q", in, got, want)
		}
	}
}

// checkPacket accepts exactly the whole IPv6 packets within the MTU and
// never panics.
func FuzzCheckPacket(f *testing.F) {
	ok := make([]byte, 48)
	ok[0] = 0x60
	binary.BigEndian.PutUint16(ok[4:6], 8)
	f.Add(ok, 1500)
	f.Add(ok[:40], 1500)
	f.Add([]byte{0x45, 0, 0, 20}, 1500)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, p []byte, mtu int) {
		err := checkPacket(p, mtu)
		valid := len(p) >= 40 && p[0]>>4 == 6 && 40+int(binary.BigEndian.Uint16(p[4:6])) == len(p) && len(p) <= mtu
		if (err == nil) != valid {
			t.Fatalf("checkPacket(% x, %d) = %v, want valid=%v", p, mtu, err, valid)
		}
	})
}

// validate never panics, and what it accepts is within the documented
// ranges.
func FuzzValidate(f *testing.F) {
	f.Add("lab-a", "vc0", "fd00:0:0:1::2/64", 1500, "fd00:0:0:2::/64")
	f.Add("", "", "10.0.0.1/8", 0, "")
	f.Add("/proc/1/ns/net", "x:y", "fe80::1/64", 99999, "fd00::5/64")
	f.Fuzz(func(t *testing.T, ns, name, addr string, mtu int, route string) {
		o := Options{NetNS: ns, Name: name, MTU: mtu}
		o.Addr, _ = netip.ParsePrefix(addr)
		if r, err := netip.ParsePrefix(route); err == nil {
			o.Routes = []netip.Prefix{r}
		}
		o = o.withDefaults()
		if o.validate() != nil {
			return
		}
		if o.MTU < MinMTU || o.MTU > MaxMTU || len(o.Name) == 0 || len(o.Name) > 15 || !o.Addr.Addr().Is6() {
			t.Fatalf("accepted %+v", o)
		}
		for _, r := range o.Routes {
			if r.Masked() != r || !r.Addr().Is6() {
				t.Fatalf("accepted route %s", r)
			}
		}
	})
}
