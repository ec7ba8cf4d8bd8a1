package fabric

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// TestPathAddressPicksSpine: under ECMP and static forwarding a path
// address takes uplink path mod T1s at the source T0, whatever the flow
// hashes to, and arrives at the host; a host address keeps the mode's
// choice.
func TestPathAddressPicksSpine(t *testing.T) {
	for _, mode := range []ForwardingMode{ForwardECMP, ForwardStatic} {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		topo := smallClos(t, loop, 1, 2, 3, 4, DefaultOptions(mode))
		hs := attach(topo)
		hops := traceHops(topo)
		for path := 0; path < 9; path++ {
			*hops = (*hops)[:0]
			f := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostPathAddr(5, 0, path), Payload: 100, Stored: -1})
			topo.HostPorts[0][0].Enqueue(f)
			loop.Run()
			u := path % 4
			want := []string{"p0.t0.0/" + fmt.Sprint(2+u), fmt.Sprintf("p0.t1.%d/2", u), "p0.t0.2/1"}
			if strings.Join(*hops, " ") != strings.Join(want, " ") {
				t.Fatalf("%v path %d: hops %v, want %v", mode, path, *hops, want)
			}
			if n := len(hs[5].got); n != path+1 {
				t.Fatalf("%v path %d: host 5 got %d frames", mode, path, n)
			}
		}
	}
}

func TestPathAddrRoundTrip(t *testing.T) {
	a := HostPathAddr(3, 7, 2, 5)
	if got := AddrString(a); got != "fd00:0:3:7:6::3" {
		t.Fatalf("path address %s", got)
	}
	pl, sub, idx, ok := ParseHostAddr(a[:])
	p, isPath := AddrPath(a[:])
	if !ok || pl != 3 || sub != 7 || idx != 2 || !isPath || p != 5 {
		t.Fatalf("parse: %d %d %d %v path %d %v", pl, sub, idx, ok, p, isPath)
	}
	h := HostAddr(3, 7, 2)
	if _, isPath := AddrPath(h[:]); isPath {
		t.Fatal("a host address reported a path")
	}
	bad := a
	bad[11] = 1 // bytes 10..13 stay zero in the plan
	if _, _, _, ok := ParseHostAddr(bad[:]); ok {
		t.Fatal("an address outside the plan parsed")
	}
}
