package cluster

import (
	"math"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
)

// The resolved marking per port rate, for each kind of preset, on a Clos
// of 100G host links and 400G fabric links marking at the last hop too.
func TestECNPresetsResolvePerPortRate(t *testing.T) {
	base := []string{"fabric.hostLinkSpeed=100G", "fabric.fabricLinkSpeed=400G", "fabric.queue.ecn.lastHop=true", "fabric.queue.bufferBytes=16000000"}
	ecnOf := func(sets ...string) (*Cluster, map[bool]fabric.PortECN) {
		t.Helper()
		cfg := load(t, append(append([]string{}, base...), sets...)...)
		cfg.Fabric.Planes = 1 // keep the build small
		cl, err := New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		by := map[bool]fabric.PortECN{}
		for _, p := range cl.ECN() {
			if _, dup := by[p.HostFacing]; dup {
				t.Fatalf("two markings for host-facing=%v: %+v", p.HostFacing, cl.ECN())
			}
			by[p.HostFacing] = p
		}
		return cl, by
	}
	// auto (the default) is htsim's for MRC (below) and, for RoCE,
	// dcqcn-sigcomm15: the same everywhere.
	cl, by := ecnOf("transport.kind=roce", "fabric.forwarding=ecmp")
	for hf, rate := range map[bool]uint64{false: 400e9, true: 100e9} {
		if p := by[hf]; p.RateBps != rate || p.ECN != (fabric.ECNConfig{Enabled: true, Kmin: 5000, Kmax: 200000, Pmax: 0.01}) {
			t.Errorf("default, host-facing %v: %+v", hf, p)
		}
	}
	if s := cl.ECNSummary(); !strings.Contains(s, "dcqcn-sigcomm15") || !strings.Contains(s, "400G Kmin 5000 B, Kmax 200000 B, Pmax 0.01") {
		t.Errorf("summary %q", s)
	}
	// hpcc: 4 KB and 16 KB per Gb/s of each port's own rate.
	_, by = ecnOf("fabric.queue.ecn.preset=hpcc")
	if p := by[false].ECN; p != (fabric.ECNConfig{Enabled: true, Kmin: 1_600_000, Kmax: 6_400_000, Pmax: 0.2}) {
		t.Errorf("hpcc at 400G: %+v", p)
	}
	if p := by[true].ECN; p != (fabric.ECNConfig{Enabled: true, Kmin: 400_000, Kmax: 1_600_000, Pmax: 0.2}) {
		t.Errorf("hpcc at 100G: %+v", p)
	}
	// htsim: 0.2 and 0.8 of the port's BDP over the base RTT, in whole
	// data frames (uSID: Ethernet, outer IPv6, MRC's packet, FCS).
	const frame = 14 + 40 + 4096 + 88 + 4                                    // MRC's full data packet (PMTU 4096 + its 88 B of headers), not the 4200 B MTU
	for _, sets := range [][]string{{"fabric.queue.ecn.preset=htsim"}, {}} { // named, and auto for MRC
		cl, by = ecnOf(sets...)
		rtt := cl.BaseRTT().Seconds()
		for hf, rate := range map[bool]float64{false: 400e9, true: 100e9} {
			bdp := math.Ceil(rtt * rate / 8 / frame)
			want := fabric.ECNConfig{Enabled: true, Kmin: int(math.Ceil(0.2*bdp)) * frame, Kmax: int(math.Ceil(0.8*bdp)) * frame, Pmax: 1}
			if p := by[hf].ECN; p != want || p.Kmin == 0 {
				t.Errorf("%v: htsim at %g, base RTT %v: %+v, want %+v", sets, rate, cl.BaseRTT(), p, want)
			}
		}
		if s := cl.ECNSummary(); !strings.Contains(s, "htsim") {
			t.Errorf("%v: summary %q", sets, s)
		}
	}
	// custom: as given.
	_, by = ecnOf("fabric.queue.ecn.kminBytes=1000", "fabric.queue.ecn.kmaxBytes=2000", "fabric.queue.ecn.pmax=0.5")
	if p := by[true].ECN; p != (fabric.ECNConfig{Enabled: true, Kmin: 1000, Kmax: 2000, Pmax: 0.5}) {
		t.Errorf("custom: %+v", p)
	}
	// htsim's Kmax beyond the buffer is refused when the fabric is built.
	cfg := load(t, "fabric.queue.ecn.preset=htsim", "fabric.queue.bufferBytes=20000", "fabric.mtu=4200")
	if _, err := BuildTopology(sim.NewLoop(sim.Options{}), cfg); err == nil || !strings.Contains(err.Error(), "fabric.queue.bufferBytes: must be ≥") {
		t.Errorf("htsim Kmax beyond a 20 KB buffer: %v", err)
	}
}

// fabric.queue.pfc.mode=dynamic maps to HPCC's MMU: 4 KB reserve, 3 KB
// resume offset, shift 3 at the host link rate, the shared buffer as set
// (or the sum of the switch's port buffers).
func TestPFCDynamicFromConfig(t *testing.T) {
	pfcOn := []string{"fabric.queue.pfc.enabled=true", "fabric.queue.pfc.mode=dynamic", "fabric.planes=1"}
	topo, err := BuildTopology(sim.NewLoop(sim.Options{}), load(t, pfcOn...))
	if err != nil {
		t.Fatal(err)
	}
	sw := topo.Switch("p0.t0.0")
	p := sw.Ports[0].Config().PFC
	if !p.Dynamic || p.Reserve != 4096 || p.ResumeOffset != 3072 || p.NICRate != 100e9 || p.SharedBuffer != 0 {
		t.Fatalf("dynamic PFC not mapped: %+v", p)
	}
	// An empty T0 of 8 ports × 1 MiB: threshold (8 MiB − 8 × (headroom + 4 KB)) >> 3.
	free := 8<<20 - 8*(p.Headroom+p.Reserve)
	if th := sw.PFC().Threshold(0); th != free>>3 {
		t.Fatalf("threshold %d, want %d", th, free>>3)
	}
	topo, err = BuildTopology(sim.NewLoop(sim.Options{}), load(t, append(pfcOn, "fabric.queue.pfc.sharedBufferBytes=4000000")...))
	if err != nil {
		t.Fatal(err)
	}
	if th := topo.Switch("p0.t0.0").PFC().Threshold(0); th != (4000000-8*(p.Headroom+p.Reserve))>>3 {
		t.Fatalf("threshold with a 4 MB shared buffer: %d", th)
	}
	// Static stays the default.
	topo, _ = BuildTopology(sim.NewLoop(sim.Options{}), load(t, "fabric.queue.pfc.enabled=true", "fabric.planes=1"))
	if topo.Switch("p0.t0.0").Ports[0].Config().PFC.Dynamic {
		t.Fatal("dynamic PFC without mode dynamic")
	}
}

// A shared buffer that the ports' headroom and reserve use up is refused
// when the fabric is built, naming the field.
func TestPFCDynamicSharedBufferTooSmall(t *testing.T) {
	cfg := load(t, "fabric.queue.pfc.enabled=true", "fabric.queue.pfc.mode=dynamic", "fabric.queue.pfc.sharedBufferBytes=65536")
	_, err := BuildTopology(sim.NewLoop(sim.Options{}), cfg)
	if err == nil || !strings.Contains(err.Error(), "fabric.queue.pfc.sharedBufferBytes") {
		t.Fatalf("a 64 KiB shared buffer: %v", err)
	}
	if _, err := BuildTopology(sim.NewLoop(sim.Options{}), load(t, "fabric.queue.pfc.enabled=true", "fabric.queue.pfc.mode=dynamic")); err != nil {
		t.Fatalf("the default shared buffer: %v", err)
	}
}
