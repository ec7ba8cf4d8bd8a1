package fabric

import "encoding/binary"

// fibGroup looks p's outer destination, a host address, up in s's FIB
// (the tables ECMP and static forwarding share): a host of the switch's
// own subnet gives a one-port group, any other subnet its next-hop group;
// nil is no route. dest numbers the destination host fabric-wide (a
// static choice over the group). A path address (HostPathAddr) narrows a
// group of several members to member path mod size: the caller's choice
// over one member is then that member, whatever the mode hashes.
func (s *Switch) fibGroup(p *Packet) (g []int32, dest int) {
	plane, subnet, host, ok := ParseHostAddr(p.Data[offIPv6Dst : offIPv6Dst+16])
	if !ok || plane != s.Plane {
		return nil, 0
	}
	if subnet == s.localSubnet {
		if host >= len(s.hostPorts) {
			return nil, 0
		}
		return s.hostPorts[host : host+1], 0
	}
	if subnet >= len(s.subnetGroup) || s.subnetGroup[subnet] < 0 {
		return nil, 0
	}
	g = s.groups[s.subnetGroup[subnet]]
	if f := int(binary.BigEndian.Uint16(p.Data[offIPv6Dst+8:])); f != 0 && len(g) > 1 {
		i := (f - 1) % len(g)
		g = g[i : i+1]
	}
	return g, subnet*65536 + host
}
