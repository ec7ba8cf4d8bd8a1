package fabric

import (
	"bufio"
	"fmt"
	"io"
)

// WriteDOT writes the topology as a Graphviz graph: switches by tier, hosts,
// and one edge per cable labelled with its rate; a cable with a direction
// down (a fault, a lab's live plan) is drawn red and dashed, labelled with
// the direction that is down.
func (t *Topology) WriteDOT(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "graph vcluster {\n  graph [rankdir=BT, label=%q];\n  node [fontsize=10];\n",
		fmt.Sprintf("%s, %d planes, %d hosts, %s", t.Kind, t.Planes, t.Hosts, t.Mode))
	shapes := []string{"box", "box3d", "doubleoctagon"}
	for _, s := range t.Switches {
		fmt.Fprintf(b, "  %q [shape=%s, label=\"%s\\nuSID %04x\"];\n", s.Name, shapes[min(s.Tier, len(shapes)-1)], s.Name, s.USID)
	}
	for h := range t.HostPorts {
		fmt.Fprintf(b, "  \"h%d\" [shape=ellipse];\n", h)
	}
	owner := func(p *Port) string {
		if s, ok := p.Owner.(*Switch); ok {
			return s.Name
		}
		for i, c := range p.Name {
			if c == '/' {
				return p.Name[:i]
			}
		}
		return p.Name
	}
	for i := 0; i+1 < len(t.Links); i += 2 {
		l, back := t.Links[i], t.Links[i+1]
		a, z := l.Dst().Peer, l.Dst()
		attr := fmt.Sprintf("label=\"%s\"", FormatRate(l.Rate))
		switch {
		case !l.Up() && !back.Up():
			attr = fmt.Sprintf("label=\"%s DOWN\", color=red, style=dashed", FormatRate(l.Rate))
		case !l.Up() || !back.Up():
			down := l.Name
			if l.Up() {
				down = back.Name
			}
			attr = fmt.Sprintf("label=\"%s %s DOWN\", color=red, style=dashed", FormatRate(l.Rate), down)
		}
		fmt.Fprintf(b, "  %q -- %q [%s];\n", owner(a), owner(z), attr)
	}
	fmt.Fprintln(b, "}")
	return b.Flush()
}

// FormatRate formats bits/s as "100G", "400G", "1.6T", "25M".
func FormatRate(r uint64) string {
	switch {
	case r >= 1e12 && r%1e12 == 0:
		return fmt.Sprintf("%dT", r/1e12)
	case r >= 1e12:
		return fmt.Sprintf("%gT", float64(r)/1e12)
	case r >= 1e9 && r%1e9 == 0:
		return fmt.Sprintf("%dG", r/1e9)
	case r >= 1e9:
		return fmt.Sprintf("%gG", float64(r)/1e9)
	default:
		return fmt.Sprintf("%gM", float64(r)/1e6)
	}
}
