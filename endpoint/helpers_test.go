package endpoint

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// testSpec is the 4-plane Clos of the brief: 2 T0 × 2 hosts, 2 T1.
var testSpec = fabric.ClosSpec{Planes: 4, HostsPerT0: 2, T0: 2, T1: 2,
	HostRate: 100e9, FabricRate: 100e9, HostDelay: 500 * time.Nanosecond, FabricDelay: time.Microsecond}

type testNet struct {
	loop  *sim.Loop
	topo  *fabric.Topology
	hosts []*Host
}

func newTestNet(t testing.TB, mode fabric.ForwardingMode, seed uint64) *testNet {
	t.Helper()
	loop := sim.NewLoop(sim.Options{Seed: seed})
	topo, err := fabric.BuildClos(loop, testSpec, fabric.DefaultOptions(mode))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := NewHosts(loop, topo, HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &testNet{loop: loop, topo: topo, hosts: hosts}
}

func modes() []fabric.ForwardingMode {
	return []fabric.ForwardingMode{fabric.ForwardECMP, fabric.ForwardUSID}
}

// serNs is one hop's serialization time from first principles: the frame
// (padded to Ethernet's 60-byte minimum) plus 4 bytes FCS plus 20 bytes
// preamble/SFD/IFG, at rate bits/s, rounded down to whole nanoseconds (each
// port's remainder accumulator starts at 0 and every port in these tests
// sends one frame).
func serNs(frame int, rate uint64) time.Duration {
	if frame < 60 {
		frame = 60
	}
	wire := frame + 4
	return time.Duration(uint64(wire+20) * 8 * 1_000_000_000 / rate)
}

// oneWay is the latency of one frame over the hops from host to host:
// host link, then (across T0s) two fabric links, then the host link.
func oneWay(frame int, sameT0 bool) time.Duration {
	s := testSpec
	d := serNs(frame, s.HostRate) + s.HostDelay
	if !sameT0 {
		d += 2 * (serNs(frame, s.FabricRate) + s.FabricDelay)
	}
	return d + serNs(frame, s.HostRate) + s.HostDelay
}

// echoFrame is the frame size of an ICMPv6 echo request or reply carrying
// payload data bytes: Ethernet 14 + IPv6 40 + ICMPv6 echo header 8 +
// payload, and 40 more for the outer IPv6 header in uSID mode.
func echoFrame(payload int, mode fabric.ForwardingMode) int {
	f := 14 + 40 + 8 + payload
	if mode == fabric.ForwardUSID {
		f += 40
	}
	return f
}
