package labcni

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vcluster/vcluster/compose/tunbridge"
)

// renameLink renames the host's TUN device (tunbridge.DefaultName) to
// ifname in netns, since `vcluster host` has no flag for its name. A
// link must be down to be renamed, and IPv6 drops a down link's
// addresses and routes: keep_addr_on_down keeps the address (and its
// NODAD flag), and the routes are put back once it is up again.
func renameLink(netnsPath, ifname string) error {
	if ifname == tunbridge.DefaultName {
		return nil
	}
	return ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(tunbridge.DefaultName)
		if err != nil {
			return fmt.Errorf("the host's TUN %q in %s: %v", tunbridge.DefaultName, netnsPath, err)
		}
		if _, err := netlinksafe.LinkByName(ifname); err == nil {
			return fmt.Errorf("CNI_IFNAME: an interface %q already exists in %s", ifname, netnsPath)
		}
		routes, err := netlinksafe.RouteList(link, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("routes of %q: %v", tunbridge.DefaultName, err)
		}
		keep := filepath.Join("/proc/sys/net/ipv6/conf", tunbridge.DefaultName, "keep_addr_on_down")
		if err := os.WriteFile(keep, []byte("1"), 0); err != nil {
			return fmt.Errorf("%s: %v", keep, err)
		}
		if err := netlink.LinkSetDown(link); err != nil {
			return fmt.Errorf("setting %q down: %v", tunbridge.DefaultName, err)
		}
		if err := netlink.LinkSetName(link, ifname); err != nil {
			netlink.LinkSetUp(link)
			return fmt.Errorf("CNI_IFNAME: renaming %q to %q: %v", tunbridge.DefaultName, ifname, err)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("setting %q up: %v", ifname, err)
		}
		for _, r := range routes {
			if r.Protocol == unix.RTPROT_KERNEL || r.Dst == nil || r.Table != unix.RT_TABLE_MAIN {
				continue // the kernel puts its own back
			}
			r := r
			r.LinkIndex = link.Attrs().Index
			if err := netlink.RouteReplace(&r); err != nil {
				return fmt.Errorf("route %s via %q: %v", r.Dst, ifname, err)
			}
		}
		return nil
	})
}

// inspect reads the attachment's interface in netns: its global IPv6
// addresses and the routes added through it (not the kernel's own).
func inspect(netnsPath, ifname string) (*current.Interface, []*current.IPConfig, []*types.Route, error) {
	iface := &current.Interface{Name: ifname, Sandbox: netnsPath}
	var ips []*current.IPConfig
	var routes []*types.Route
	err := ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlinksafe.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("interface %q in %s: %v", ifname, netnsPath, err)
		}
		if mac := link.Attrs().HardwareAddr; len(mac) > 0 {
			iface.Mac = mac.String()
		}
		iface.Mtu = link.Attrs().MTU
		addrs, err := netlinksafe.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("addresses of %q: %v", ifname, err)
		}
		zero := 0
		for _, a := range addrs {
			if a.IP.IsGlobalUnicast() {
				ips = append(ips, &current.IPConfig{Interface: &zero, Address: *a.IPNet})
			}
		}
		rs, err := netlinksafe.RouteList(link, netlink.FAMILY_V6)
		if err != nil {
			return fmt.Errorf("routes of %q: %v", ifname, err)
		}
		for _, r := range rs {
			if r.Protocol == unix.RTPROT_KERNEL || r.Dst == nil || r.Table != unix.RT_TABLE_MAIN {
				continue
			}
			routes = append(routes, &types.Route{Dst: net.IPNet{IP: r.Dst.IP, Mask: r.Dst.Mask}})
		}
		return nil
	})
	return iface, ips, routes, err
}
