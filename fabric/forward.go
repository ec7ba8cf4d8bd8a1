package fabric

import "fmt"

// ForwardingMode selects how every switch of a fabric forwards. Each mode
// is one file (forward_<name>.go) that declares its ForwardingMode
// constant and config word and registers its forwarding; nothing else in
// fabric needs to know the list of modes.
type ForwardingMode uint8

// nextHop picks the egress port of frame p at switch s: the port index,
// or -1 when s has no route for it. It may rewrite p's outer destination
// (uSID's shift) and count in s.Counters; the switch does everything
// else (hop limit, black hole, PFC admission, enqueue).
type nextHop func(s *Switch, p *Packet) int32

// forwarding is what a mode registers: its config word, its per-hop
// decision and the few facts the rest of fabric asks of a mode.
type forwarding struct {
	// name is the mode's config word (fabric.forwarding).
	name string
	// next is the per-hop decision. Every switch built in the mode keeps
	// a copy (Switch.next) in its forwarding line, so a hop calls it
	// without looking the mode up.
	next nextHop
	// prefetch, if set, follows next's lookups for a frame about to
	// arrive at s, for stages PrefetchNextHop and later (prefetch.go):
	// read only, p's header line is cached.
	prefetch func(s *Switch, stage int, p *Packet)
	// holeOffset is where, in the outer destination as next leaves it,
	// the 16-bit id a black hole matches sits (Switch.BlackHole).
	holeOffset int
	// reconverges: the mode forwards from the switches' next-hop groups,
	// which routing reconvergence rewrites (Topology.SetReconvergence).
	reconverges bool
}

// maxModes bounds the registry (a small array: a mode is a byte).
const maxModes = 16

// forwardings is the registry, indexed by mode; filled by the mode files'
// init functions, read-only afterwards.
var forwardings [maxModes]*forwarding

// registerForwarding makes f the forwarding of mode m. It is called from
// the init function of the mode's file; registering a mode or a name twice
// panics.
func registerForwarding(m ForwardingMode, f forwarding) {
	switch {
	case int(m) >= maxModes:
		panic(fmt.Sprintf("fabric: forwarding mode %d out of range", m))
	case forwardings[m] != nil:
		panic(fmt.Sprintf("fabric: forwarding mode %d registered twice (%s, %s)", m, forwardings[m].name, f.name))
	case f.next == nil || f.name == "":
		panic(fmt.Sprintf("fabric: forwarding mode %d needs a name and a next-hop function", m))
	}
	if _, dup := ParseForwardingMode(f.name); dup {
		panic(fmt.Sprintf("fabric: forwarding mode name %q registered twice", f.name))
	}
	forwardings[m] = &f
}

// forwarding returns mode m's registration, or nil.
func (m ForwardingMode) forwarding() *forwarding {
	if int(m) >= maxModes {
		return nil
	}
	return forwardings[m]
}

// Valid reports whether m is a registered mode.
func (m ForwardingMode) Valid() bool { return m.forwarding() != nil }

func (m ForwardingMode) String() string {
	if f := m.forwarding(); f != nil {
		return f.name
	}
	return fmt.Sprintf("ForwardingMode(%d)", uint8(m))
}

// ParseForwardingMode maps a config word to a mode.
func ParseForwardingMode(s string) (ForwardingMode, bool) {
	for m, f := range forwardings {
		if f != nil && f.name == s {
			return ForwardingMode(m), true
		}
	}
	return 0, false
}

// ForwardingModes lists the registered modes in order.
func ForwardingModes() []ForwardingMode {
	var ms []ForwardingMode
	for m, f := range forwardings {
		if f != nil {
			ms = append(ms, ForwardingMode(m))
		}
	}
	return ms
}
