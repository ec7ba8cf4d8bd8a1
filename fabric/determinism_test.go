package fabric

import (
	"bytes"
	"testing"

	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

// randomRun drives random traffic through a lossy ECMP Clos and returns the
// pcap of two ports and the counters CSV.
func randomRun(t *testing.T, seed uint64) (pcapBytes, counters []byte) {
	loop := sim.NewLoop(sim.Options{Seed: seed})
	o := DefaultOptions(ForwardECMP)
	o.ECMPSeed = seed
	o.FabricPort.BufferBytes = 128 << 10
	o.FabricPort.ECN = ECNConfig{Enabled: true, Kmin: 10_000, Kmax: 60_000, Pmax: 0.5}
	topo := smallClos(t, loop, 2, 2, 2, 2, o)
	attach(topo)
	for _, l := range topo.Links {
		l.Loss = NewBernoulli(0.01, seed, l.Name)
	}
	var buf bytes.Buffer
	w, err := pcap.NewWriter(&buf, pcap.LinkTypeEthernet, 256)
	if err != nil {
		t.Fatal(err)
	}
	topo.Port("p0.t1.0/1").Tap(w)
	topo.Port("h3/p1").Tap(w)
	rng := loop.Rand("traffic")
	for i := 0; i < 2000; i++ {
		at := sim.Time(rng.IntN(200_000))
		src, dst, plane := rng.IntN(4), rng.IntN(4), rng.IntN(2)
		flow := rng.Uint32()
		size := 200 + rng.IntN(3800)
		loop.At(at, func() {
			topo.HostPorts[src][plane].Enqueue(BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(src, plane), Dst: topo.HostAddr(dst, plane),
				Sport: uint16(flow), Flow: flow >> 12, DSCP: DSCPTrimmable, ECN: ECNECT0, Payload: size, Stored: 16, Seq: uint32(i)}))
		})
	}
	loop.Run()
	w.Flush()
	var c bytes.Buffer
	if err := topo.WriteCountersCSV(&c); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), c.Bytes()
}

func TestDeterministicPcapAndCounters(t *testing.T) {
	p1, c1 := randomRun(t, 42)
	p2, c2 := randomRun(t, 42)
	if !bytes.Equal(p1, p2) || !bytes.Equal(c1, c2) {
		t.Fatal("same seed, different pcap or counters")
	}
	if len(p1) < 10000 || !bytes.Contains(c1, []byte("p0.t1.0/1,")) {
		t.Fatalf("run too small to mean anything: pcap %d bytes", len(p1))
	}
	p3, c3 := randomRun(t, 43)
	if bytes.Equal(p1, p3) || bytes.Equal(c1, c3) {
		t.Fatal("different seeds gave identical pcap or counters")
	}
}
