package cluster

import (
	"strings"
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

func load(t testing.TB, sets ...string) config.Config {
	t.Helper()
	c, err := config.Load("", sets)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBuildFromConfig(t *testing.T) {
	c, err := New(load(t, "fabric.preset=B", "fabric.hosts=32", "fabric.queue.pfc.enabled=true", "fabric.queue.pfc.priorities=3,5", "fabric.queue.ecn.lastHop=true"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topo := c.Topo
	if topo.Kind != "clos" || topo.Planes != 8 || topo.Hosts != 32 || len(c.Hosts) != 32 || topo.Mode != fabric.ForwardUSID {
		t.Fatalf("preset B, 32 hosts: %s %d planes %d hosts %v", topo.Kind, topo.Planes, topo.Hosts, topo.Mode)
	}
	if topo.Clos.HostRate != 100e9 || len(topo.HostPorts[0]) != 8 {
		t.Fatalf("host rate %d, ports %d", topo.Clos.HostRate, len(topo.HostPorts[0]))
	}
	down := topo.Switch("p0.t0.0").Ports[0]
	pfc := down.Config().PFC
	if pfc == nil || !pfc.Enabled || pfc.Lossless != 1<<3|1<<5 || pfc.Headroom <= 0 {
		t.Fatalf("PFC not mapped: %+v", pfc)
	}
	if !down.HostFacing || !down.Config().ECN.Enabled {
		t.Fatal("ecn.lastHop=true must enable ECN on host-facing ports")
	}
	if topo.HostPorts[0][0].Config().ECN.Enabled || topo.HostPorts[0][0].Config().Trim.Enabled {
		t.Fatal("NIC ports neither mark nor trim")
	}
}

func TestBuildFatTreeAndErrors(t *testing.T) {
	loop := sim.NewLoop(sim.Options{})
	topo, err := BuildTopology(loop, load(t, "fabric.topology=fattree", "fabric.k=6", "fabric.forwarding=ecmp"))
	if err != nil {
		t.Fatal(err)
	}
	if topo.Hosts != 54 || len(topo.Switches) != 45 {
		t.Fatalf("k=6: %d hosts, %d switches", topo.Hosts, len(topo.Switches))
	}
	if _, err := config.Load("", []string{"fabric.topology=fattree", "fabric.k=6", "fabric.fabricLinkSpeed=400G"}); err == nil ||
		!strings.Contains(err.Error(), "fabric.fabricLinkSpeed: must equal fabric.hostLinkSpeed") {
		t.Fatalf("mismatched fat-tree speeds: %v", err)
	}
	if _, err := New(load(t, "run.pacing=realtime"), nil); err == nil || !strings.Contains(err.Error(), "run.pacing") {
		t.Fatalf("realtime without a wall clock: %v", err)
	}
}
