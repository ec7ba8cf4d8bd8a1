package wireshark

import (
	"testing"

	"github.com/vcluster/vcluster/endpoint"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/verbs"
)

// On the wire the UDP source port is EV & 0xffff: every EV the NIC, MRC
// and RoCE build must give a port in 0xC000..0xFFFF (never 0) and come back
// unchanged from the port and the flow label.
func TestEVSourcePort(t *testing.T) {
	check := func(who string, ev uint32) {
		t.Helper()
		e := endpoint.EV(ev)
		if sp := e.SrcPort(); sp < 0xc000 || sp != uint16(ev) {
			t.Fatalf("%s: EV %#x gives source port %#x, want EV&0xffff ≥ 0xC000", who, ev, sp)
		}
		if back := endpoint.EVFromWire(e.SrcPort(), e.FlowLabel()); back != e {
			t.Fatalf("%s: EV %#x comes back from the wire as %#x", who, ev, back)
		}
	}
	// The two builders agree field by field (mrc keeps a copy of the
	// layout: it does not import endpoint).
	for plane := range 16 {
		for _, choice := range []int{0, 1, 2, 511, 1023} {
			for _, label := range []uint16{0, 1, 0xbeef, 0xffff} {
				a, b := endpoint.MakeEV(plane, choice, label), mrc.MakeEV(plane, choice, label)
				if uint32(a) != b || a.Plane() != plane || a.Choice() != choice || a.FlowLabel() != uint32(label) {
					t.Fatalf("MakeEV(%d, %d, %#x): endpoint %#x (plane %d choice %d label %#x), mrc %#x",
						plane, choice, label, a, a.Plane(), a.Choice(), a.FlowLabel(), b)
				}
				check("MakeEV", b)
			}
		}
	}
	// A hand-built EV without bits 14..15 still leaves with a valid port.
	if sp := endpoint.EV(0).SrcPort(); sp != 0xc000 {
		t.Fatalf("EV 0 leaves with source port %#x, want 0xC000", sp)
	}
	// MRC's pools: random EVs (ECMP), one EV per path (uSID) up to as
	// many paths as the choice bits name; more are refused.
	over := mrc.DefaultConfig()
	over.PathsPerPlane = mrc.MaxPathChoices + 1
	if err := over.Validate(); err == nil {
		t.Fatalf("PathsPerPlane %d accepted: the EV's choice bits name only %d paths", over.PathsPerPlane, mrc.MaxPathChoices)
	}
	for _, paths := range []int{0, 4, 484, mrc.MaxPathChoices} {
		cfg := mrc.DefaultConfig()
		cfg.PathsPerPlane = paths
		cfg.EVsPerQP = 256
		q := mrc.New(cfg, &verbs.Memory{}, 7, 1)
		for _, e := range q.EVStates() {
			check("mrc pool", e.EV)
		}
		if n := len(q.EVStates()); n != cfg.EVsPerQP {
			t.Fatalf("PathsPerPlane %d: %d EVs, want %d", paths, n, cfg.EVsPerQP)
		}
	}
	// RoCE: derived ports, and explicit ones below the dynamic range.
	for _, sp := range []uint16{0, 1, 0x0010, 0x3fff, 0x8000, 0xc000, 0xffff} {
		for plane := range 4 {
			check("roce.EV", roce.EV(sp, plane, 0x1234))
		}
	}
	c := roce.DefaultConfig()
	for qpn := uint32(1); qpn < 64; qpn++ {
		check("roce QP", roce.New(c, &verbs.Memory{}, qpn, 3).EV())
	}
}
