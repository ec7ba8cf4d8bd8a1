package fabric

import "github.com/vcluster/vcluster/sim"

// HopBench measures the cost of one packet-hop (parse, decide, enqueue,
// serialize, propagate, deliver): 16 packets circulate host 0 → host 2 of a
// small Clos (4 hops: NIC, T0 up, T1 down, T0 down) and are re-injected at
// the source on arrival, so nothing is allocated in steady state. Used by
// BenchmarkPacketHop* and `vcluster bench fabric`.
type HopBench struct {
	Loop  *sim.Loop
	Topo  *Topology
	Hops  int
	limit int
	mode  ForwardingMode
	paths [][16]byte
	src   *Port
}

// NewHopBench builds the bench in the given forwarding mode, warmed up.
// Under pathquality every switch's multipath groups are weighted 1:2:3:4
// (SetPathWeights), so that the bench measures the weighted bucket
// lookup, not its unweighted ECMP fallback.
func NewHopBench(mode ForwardingMode) (*HopBench, error) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo, err := BuildClos(loop, ClosSpec{Planes: 1, HostsPerT0: 2, T0: 2, T1: 4, HostRate: 100e9, FabricRate: 100e9, HostDelay: 500, FabricDelay: 1000}, DefaultOptions(mode))
	if err != nil {
		return nil, err
	}
	b := &HopBench{Loop: loop, Topo: topo, mode: mode, src: topo.HostPorts[0][0]}
	for u := 0; u < 4; u++ {
		b.paths = append(b.paths, topo.PathUSID(0, 2, 0, u))
	}
	for h := range topo.HostPorts {
		topo.HostPorts[h][0].Owner = b
	}
	if mode == ForwardPathQuality {
		for _, s := range topo.Switches {
			for sub := 0; sub < s.NumSubnets(); sub++ {
				g := s.NextHops(sub)
				if len(g) < 2 {
					continue
				}
				w := make([]float64, len(g))
				for i := range w {
					w[i] = float64(i + 1)
				}
				if _, err := s.SetPathWeights(sub, w); err != nil {
					return nil, err
				}
			}
		}
	}
	b.Run(200_000)
	return b, nil
}

// Observe turns on what a path-quality control plane reads: telemetry at
// every switch port and high-delay capture (default thresholds) at every
// switch, then warms up again. The bench's queues stay far below the
// thresholds: Captures reports what was captured (0 expected), so the
// bench measures the cost of watching, not of recording.
func (b *HopBench) Observe() error {
	for _, s := range b.Topo.Switches {
		for _, pt := range s.Ports {
			pt.EnableTelemetry()
		}
		if _, err := s.EnableHDC(HDCConfig{}); err != nil {
			return err
		}
	}
	b.Run(200_000)
	return nil
}

// Captures returns the HDC captures of every switch so far.
func (b *HopBench) Captures() (n uint64) {
	for _, s := range b.Topo.Switches {
		if c := s.HDC(); c != nil {
			for _, t := range c.Total {
				n += t.Records
			}
		}
	}
	return n
}

// Run forwards about n packet-hops and returns the events executed.
func (b *HopBench) Run(n int) uint64 {
	b.Hops, b.limit = 0, n
	ev := b.Loop.Executed()
	for i := 0; i < 16; i++ {
		f := FrameSpec{Src: b.Topo.HostAddr(0, 0), Dst: b.Topo.HostAddr(2, 0), Sport: uint16(i), Flow: uint32(i), DSCP: DSCPTrimmable, Payload: 4000, Stored: 0}
		if b.mode == ForwardUSID {
			f.Outer = &b.paths[i&3]
		}
		b.src.Enqueue(BuildFrame(b.Topo.Pool, f))
	}
	b.Loop.Run()
	return b.Loop.Executed() - ev
}

// Ingress implements Device for the hosts: count 4 hops and send it again.
func (b *HopBench) Ingress(p *Packet, _ *Port) {
	b.Hops += 4
	if b.Hops >= b.limit {
		p.Release()
		return
	}
	p.Data[offIPv6+7] = 64
	if b.mode == ForwardUSID {
		copy(p.Data[offIPv6Dst:], b.paths[b.Hops&3][:])
	}
	b.src.Enqueue(p)
}
