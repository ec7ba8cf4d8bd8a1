package faults

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/vcluster/vcluster/fabric"
)

// Selector syntax (the target of an event):
//
//	link:A-B            the cable(s) between ends A and B; an end is a switch
//	                    name (p1.t0.0), a host (h3) or a glob of either
//	                    (p1.t0.*); forward is A → B
//	link:PORT           the cable at one port (p1.t0.0/6, h3/p1)
//	port:GLOB           the cables at every port matching (a port group:
//	                    port:p1.t0.0/*)
//	switch:GLOB         switches (switch:p1.t1.2, switch:p*.t1.0)
//	plane:N             every switch of plane N
//	nic:hH/pP | nic:hH  a host's NIC port in plane P, or in every plane
//	osfp:SWITCH/G       a T0-side OSFP: host ports 8G..8G+7 of a T0 (one
//	                    plane-port of each of 8 nodes)
//	osfp:hH             a NIC-side OSFP: every plane of host H's NIC
//	random:CLASS[,plane=N][,tier=T]
//	                    one element drawn with the plan seed at validation;
//	                    CLASS is t0-t1 (a T0–T1 cable), nic (a NIC cable) or
//	                    switch
//	busiest:t0-t1[,plane=N]
//	                    the T0–T1 cable that carried the most data frames so
//	                    far, chosen when the event starts (an active path)
//	busiest:t1-t0[,plane=N]
//	                    the same, counting only frames sent down (T1 → T0):
//	                    the last fabric cable of an active path, which the
//	                    source T0 does not own (under ECMP reconvergence it
//	                    hears of the cut only through routing)
type Selector struct {
	Type  string // link, port, switch, plane, nic, osfp, random, busiest
	A, B  string
	Class string
	Plane int // -1: any
	Tier  int // -1: any
	raw   string
}

func (s Selector) String() string { return s.raw }

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// ParseSelector parses a target selector (syntax only).
func ParseSelector(s string) (Selector, error) {
	sel := Selector{Plane: -1, Tier: -1, raw: s}
	typ, arg, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || arg == "" {
		return sel, fmt.Errorf("bad selector %q: want TYPE:ARG with TYPE one of link, port, switch, plane, nic, osfp, random, busiest", s)
	}
	sel.Type = typ
	checkGlob := func(g string) error {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("bad selector %q: bad pattern %q", s, g)
		}
		return nil
	}
	switch typ {
	case "link":
		if a, b, ok := strings.Cut(arg, "-"); ok {
			sel.A, sel.B = a, b
			if a == "" || b == "" {
				return sel, fmt.Errorf("bad selector %q: want link:A-B or link:PORT", s)
			}
			if err := checkGlob(a); err != nil {
				return sel, err
			}
			return sel, checkGlob(b)
		}
		if !strings.Contains(arg, "/") {
			return sel, fmt.Errorf("bad selector %q: want link:A-B or link:PORT", s)
		}
		sel.Type, sel.A = "port", arg
		return sel, checkGlob(arg)
	case "port", "switch":
		sel.A = arg
		return sel, checkGlob(arg)
	case "plane":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 {
			return sel, fmt.Errorf("bad selector %q: plane must be a number", s)
		}
		sel.Plane = n
	case "nic", "osfp":
		sel.A = arg
		return sel, checkGlob(arg)
	case "random", "busiest":
		parts := strings.Split(arg, ",")
		sel.Class = parts[0]
		switch sel.Class {
		case "t0-t1":
		case "t1-t0":
			if typ != "busiest" {
				return sel, fmt.Errorf("bad selector %q: t1-t0 is for busiest only (random:t0-t1 draws any T0–T1 cable)", s)
			}
		case "nic", "switch":
			if typ == "busiest" {
				return sel, fmt.Errorf("bad selector %q: busiest takes t0-t1 only", s)
			}
		default:
			return sel, fmt.Errorf("bad selector %q: unknown class %q (want t0-t1, t1-t0, nic or switch)", s, sel.Class)
		}
		for _, p := range parts[1:] {
			k, v, _ := strings.Cut(p, "=")
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return sel, fmt.Errorf("bad selector %q: %q is not key=number", s, p)
			}
			switch k {
			case "plane":
				sel.Plane = n
			case "tier":
				sel.Tier = n
			default:
				return sel, fmt.Errorf("bad selector %q: unknown option %q (want plane, tier)", s, k)
			}
		}
	default:
		return sel, fmt.Errorf("bad selector %q: unknown type %q (want link, port, switch, plane, nic, osfp, random, busiest)", s, typ)
	}
	return sel, nil
}

// Cable is both directions of one physical cable; forward is A → B.
type Cable struct{ A, B *fabric.Port }

// Name is "A<>B" by port names.
func (c Cable) Name() string { return c.A.Name + "<>" + c.B.Name }

// Target is what a selector resolved to.
type Target struct {
	Cables   []Cable
	Switches []*fabric.Switch
	NICPorts []*fabric.Port // host NIC ports (PFC storms)
	Dynamic  *Selector      // resolved when the event starts (busiest)
}

// Names lists the target's elements.
func (t *Target) Names() []string {
	var n []string
	for _, c := range t.Cables {
		n = append(n, c.Name())
	}
	for _, s := range t.Switches {
		n = append(n, s.Name)
	}
	for _, p := range t.NICPorts {
		n = append(n, p.Name)
	}
	return n
}

// resolver resolves selectors against one topology, caching pattern
// results and candidate lists.
type resolver struct {
	topo   *fabric.Topology
	rng    *rand.Rand
	cables []Cable // every cable, build order
	cache  map[string]*Target
	cands  map[string][]Cable
}

func newResolver(t *fabric.Topology, rng *rand.Rand) *resolver {
	r := &resolver{topo: t, rng: rng, cache: map[string]*Target{}, cands: map[string][]Cable{}}
	for i := 0; i+1 < len(t.Links); i += 2 {
		// connect() appends a.Tx then b.Tx: Links[i] delivers to b.
		b, a := t.Links[i].Dst(), t.Links[i+1].Dst()
		r.cables = append(r.cables, Cable{A: a, B: b})
	}
	return r
}

// endName is the name of the device owning p: a switch name, or hH for a
// host NIC port.
func endName(p *fabric.Port) string {
	if s, ok := p.Owner.(*fabric.Switch); ok {
		return s.Name
	}
	h, _, _ := strings.Cut(p.Name, "/")
	return h
}

func match(pat, s string) bool {
	if !isGlob(pat) {
		return pat == s
	}
	ok, _ := path.Match(pat, s)
	return ok
}

// cablesAt returns the cables of device name (switch or hH), as (own, peer).
func (r *resolver) cablesAt(name string) []Cable {
	if s := r.topo.Switch(name); s != nil {
		var out []Cable
		for _, p := range s.Ports {
			if p.Peer != nil {
				out = append(out, Cable{A: p, B: p.Peer})
			}
		}
		return out
	}
	if h, ok := hostIndex(name); ok && h < r.topo.Hosts {
		var out []Cable
		for _, p := range r.topo.HostPorts[h] {
			if p.Peer != nil {
				out = append(out, Cable{A: p, B: p.Peer})
			}
		}
		return out
	}
	return nil
}

func hostIndex(s string) (int, bool) {
	if !strings.HasPrefix(s, "h") {
		return 0, false
	}
	n, err := strconv.Atoi(s[1:])
	return n, err == nil && n >= 0
}

// resolve resolves sel; an empty result is an error naming the selector.
func (r *resolver) resolve(sel Selector) (*Target, error) {
	if sel.Type != "random" && sel.Type != "busiest" {
		if t, ok := r.cache[sel.raw]; ok {
			return t, nil
		}
	}
	t, err := r.resolve1(sel)
	if err != nil {
		return nil, err
	}
	if t.Dynamic == nil && len(t.Cables)+len(t.Switches)+len(t.NICPorts) == 0 {
		return nil, fmt.Errorf("%q matches nothing in this topology", sel.raw)
	}
	if sel.Type != "random" && sel.Type != "busiest" {
		r.cache[sel.raw] = t
	}
	return t, nil
}

func (r *resolver) resolve1(sel Selector) (*Target, error) {
	t := &Target{}
	topo := r.topo
	switch sel.Type {
	case "link":
		if !isGlob(sel.A) {
			if topo.Switch(sel.A) == nil {
				if h, ok := hostIndex(sel.A); !ok || h >= topo.Hosts {
					return nil, fmt.Errorf("%q: no switch or host %q", sel.raw, sel.A)
				}
			}
			for _, c := range r.cablesAt(sel.A) {
				if match(sel.B, endName(c.B)) {
					t.Cables = append(t.Cables, c)
				}
			}
			if len(t.Cables) == 0 && !isGlob(sel.B) {
				return nil, fmt.Errorf("%q: no cable between %q and %q", sel.raw, sel.A, sel.B)
			}
			return t, nil
		}
		for _, c := range r.cables {
			switch {
			case match(sel.A, endName(c.A)) && match(sel.B, endName(c.B)):
				t.Cables = append(t.Cables, c)
			case match(sel.A, endName(c.B)) && match(sel.B, endName(c.A)):
				t.Cables = append(t.Cables, Cable{A: c.B, B: c.A})
			}
		}
	case "port":
		if !isGlob(sel.A) {
			p := topo.Port(sel.A)
			if p == nil {
				return nil, fmt.Errorf("%q: no port %q", sel.raw, sel.A)
			}
			if p.Peer == nil {
				return nil, fmt.Errorf("%q: port %q has no cable", sel.raw, sel.A)
			}
			t.Cables = append(t.Cables, Cable{A: p, B: p.Peer})
			return t, nil
		}
		for _, n := range topo.PortNames() {
			if match(sel.A, n) {
				if p := topo.Port(n); p.Peer != nil {
					t.Cables = append(t.Cables, Cable{A: p, B: p.Peer})
				}
			}
		}
	case "switch":
		if !isGlob(sel.A) {
			s := topo.Switch(sel.A)
			if s == nil {
				return nil, fmt.Errorf("%q: no switch %q", sel.raw, sel.A)
			}
			t.Switches = append(t.Switches, s)
			return t, nil
		}
		for _, s := range topo.Switches {
			if match(sel.A, s.Name) {
				t.Switches = append(t.Switches, s)
			}
		}
	case "plane":
		if sel.Plane >= topo.Planes {
			return nil, fmt.Errorf("%q: no plane %d (the fabric has %d)", sel.raw, sel.Plane, topo.Planes)
		}
		for _, s := range topo.Switches {
			if s.Plane == sel.Plane {
				t.Switches = append(t.Switches, s)
			}
		}
	case "nic":
		hs, ps, _ := strings.Cut(sel.A, "/")
		if !isGlob(sel.A) {
			h, ok := hostIndex(hs)
			if !ok || h >= topo.Hosts {
				return nil, fmt.Errorf("%q: no host %q", sel.raw, hs)
			}
			for pl, p := range topo.HostPorts[h] {
				if ps == "" || ps == fmt.Sprintf("p%d", pl) {
					t.Cables = append(t.Cables, Cable{A: p, B: p.Peer})
					t.NICPorts = append(t.NICPorts, p)
				}
			}
			if len(t.Cables) == 0 {
				return nil, fmt.Errorf("%q: no NIC port %q", sel.raw, sel.A)
			}
			return t, nil
		}
		for _, hp := range topo.HostPorts {
			for _, p := range hp {
				if match(sel.A, p.Name) || ps == "" && match(hs, endName(p)) {
					t.Cables = append(t.Cables, Cable{A: p, B: p.Peer})
					t.NICPorts = append(t.NICPorts, p)
				}
			}
		}
	case "osfp":
		if h, ok := hostIndex(sel.A); ok {
			if h >= topo.Hosts {
				return nil, fmt.Errorf("%q: no host %q", sel.raw, sel.A)
			}
			for _, p := range topo.HostPorts[h] {
				t.Cables = append(t.Cables, Cable{A: p, B: p.Peer})
				t.NICPorts = append(t.NICPorts, p)
			}
			return t, nil
		}
		sw, gs, _ := strings.Cut(sel.A, "/")
		s := topo.Switch(sw)
		g, err := strconv.Atoi(gs)
		if s == nil || s.Tier != 0 || err != nil || g < 0 {
			return nil, fmt.Errorf("%q: want osfp:<T0 switch>/<group> or osfp:h<host>", sel.raw)
		}
		for i := 8 * g; i < 8*g+8 && i < len(s.Ports); i++ {
			p := s.Ports[i]
			if p.HostFacing && p.Peer != nil {
				t.Cables = append(t.Cables, Cable{A: p.Peer, B: p}) // forward: host → T0
			}
		}
		if len(t.Cables) == 0 {
			return nil, fmt.Errorf("%q: %s has no host ports in OSFP group %d", sel.raw, sw, g)
		}
	case "random":
		c := r.candidates(sel)
		if len(c.cables)+len(c.switches) == 0 {
			return nil, fmt.Errorf("%q: no candidates", sel.raw)
		}
		if len(c.switches) > 0 {
			t.Switches = append(t.Switches, c.switches[r.rng.IntN(len(c.switches))])
		} else {
			x := c.cables[r.rng.IntN(len(c.cables))]
			t.Cables = append(t.Cables, x)
			if sel.Class == "nic" {
				t.NICPorts = append(t.NICPorts, x.A)
			}
		}
	case "busiest":
		if len(r.candidates(sel).cables) == 0 {
			return nil, fmt.Errorf("%q: no candidates", sel.raw)
		}
		s := sel
		t.Dynamic = &s
	}
	return t, nil
}

type candSet struct {
	cables   []Cable
	switches []*fabric.Switch
}

func (r *resolver) candidates(sel Selector) candSet {
	key := fmt.Sprintf("%s/%d/%d", sel.Class, sel.Plane, sel.Tier)
	var out candSet
	if sel.Class == "switch" {
		for _, s := range r.topo.Switches {
			if (sel.Plane < 0 || s.Plane == sel.Plane) && (sel.Tier < 0 || s.Tier == sel.Tier) {
				out.switches = append(out.switches, s)
			}
		}
		return out
	}
	if c, ok := r.cands[key]; ok {
		return candSet{cables: c}
	}
	for _, c := range r.cables {
		sa, aSw := c.A.Owner.(*fabric.Switch)
		sb, bSw := c.B.Owner.(*fabric.Switch)
		switch sel.Class {
		case "t0-t1", "t1-t0":
			if aSw && bSw && sa.Tier == 0 && sb.Tier == 1 && (sel.Plane < 0 || sa.Plane == sel.Plane) {
				out.cables = append(out.cables, c)
			}
		case "nic":
			if !aSw && bSw && (sel.Plane < 0 || sb.Plane == sel.Plane) {
				out.cables = append(out.cables, c)
			}
		}
	}
	r.cands[key] = out.cables
	return out
}

// busiest picks the candidate cable with the most data frames sent so far
// (both directions; for t1-t0 only those the T1 sent down, c.B being the
// T1's port).
func (r *resolver) busiest(sel Selector) *Target {
	var best Cable
	var most uint64
	cs := r.candidates(sel).cables
	for _, c := range cs {
		n := dataTx(c.B)
		if sel.Class != "t1-t0" {
			n += dataTx(c.A)
		}
		if n > most || best.A == nil {
			best, most = c, n
		}
	}
	return &Target{Cables: []Cable{best}}
}

// dataTx is the data frames a port has sent (every class below trimmed
// headers and control: probes and ACKs do not count).
func dataTx(p *fabric.Port) uint64 {
	var n uint64
	for c := 0; c < fabric.ClassTrimmed; c++ {
		n += p.QCounters[c].TxPackets
	}
	return n
}

// parseUSID resolves a black-hole prefix: a switch name (its uSID),
// host:hH/pP (the host-facing downlink uSID of that NIC's port at its T0),
// or a number.
func parseUSID(topo *fabric.Topology, v string) (uint16, error) {
	if s := topo.Switch(v); s != nil {
		return s.USID, nil
	}
	if rest, ok := strings.CutPrefix(v, "host:"); ok {
		p := topo.Port(rest)
		if p == nil || p.Peer == nil {
			return 0, fmt.Errorf("no NIC port %q", rest)
		}
		sw := p.Peer.Owner.(*fabric.Switch)
		return fabric.HostPortUSID(sw.Plane, int(p.Peer.Index)), nil
	}
	n, err := strconv.ParseUint(v, 0, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a switch, host:hH/pP or a 16-bit number", v)
	}
	return uint16(n), nil
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
