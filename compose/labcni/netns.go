package labcni

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ifnameFree refuses an ifname that already names an interface in
// netns (the host would fail to create its TUN there).
func ifnameFree(netnsPath, ifname string) error {
	return ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		if _, err := netlinksafe.LinkByName(ifname); err == nil {
			return fmt.Errorf("CNI_IFNAME: an interface %q already exists in %s", ifname, netnsPath)
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
