package labfabric

import (
	"bufio"
	"fmt"
	"io"

	"github.com/vcluster/vcluster/fabric"
)

// writeDOT is fabric.Topology.WriteDOT with the links' state: a cable
// with a direction down is drawn red and dashed, labelled with which way
// is down. Loop goroutine only.
func writeDOT(w io.Writer, t *fabric.Topology) error {
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
	owner := func(p *fabric.Port) string {
		if s, ok := p.Owner.(*fabric.Switch); ok {
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
		attr := fmt.Sprintf("label=\"%s\"", fabric.FormatRate(l.Rate))
		switch {
		case !l.Up() && !back.Up():
			attr = fmt.Sprintf("label=\"%s DOWN\", color=red, style=dashed", fabric.FormatRate(l.Rate))
		case !l.Up() || !back.Up():
			down := l.Name
			if l.Up() {
				down = back.Name
			}
			attr = fmt.Sprintf("label=\"%s %s DOWN\", color=red, style=dashed", fabric.FormatRate(l.Rate), down)
		}
		fmt.Fprintf(b, "  %q -- %q [%s];\n", owner(a), owner(z), attr)
	}
	fmt.Fprintln(b, "}")
	return b.Flush()
}
