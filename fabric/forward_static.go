package fabric

// ForwardStatic is a plain static FIB: one fixed next hop per destination
// (destination-mod-k over the equal-cost set).
const ForwardStatic ForwardingMode = 2

// ForwardStaticName is ForwardStatic's config word.
const ForwardStaticName = "static"

func init() {
	registerForwarding(ForwardStatic, forwarding{
		name:       ForwardStaticName,
		next:       staticNext,
		holeOffset: 6, // the subnet of a host address
	})
}

// staticNext picks the next hop of p's destination host, the same for
// every flow to it.
func staticNext(s *Switch, p *Packet) int32 {
	g, dest := s.fibGroup(p)
	switch len(g) {
	case 0:
		return -1
	case 1:
		return g[0]
	}
	return g[dest%len(g)]
}
