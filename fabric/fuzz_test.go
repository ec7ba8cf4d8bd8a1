package fabric

import (
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// FuzzSwitchIngress feeds arbitrary frames to a switch port in every
// forwarding mode: nothing may panic and every packet is released.
func FuzzSwitchIngress(f *testing.F) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(f, loop, 2, 2, 2, 2, DefaultOptions(ForwardUSID))
	path := topo.PathUSID(0, 3, 0, 1)
	good := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(3, 0), Outer: &path, DSCP: DSCPTrimmable, Payload: 64, Stored: -1})
	f.Add(append([]byte(nil), good.Data...), uint8(0))
	f.Add(append([]byte(nil), good.Data[:60]...), uint8(1))
	good.Release()
	pfc := make([]byte, 60)
	pfc[12], pfc[13], pfc[15], pfc[17] = 0x88, 0x08, 0x01, 0x08
	f.Add(pfc, uint8(2))
	f.Fuzz(func(t *testing.T, frame []byte, mode uint8) {
		loop := sim.NewLoop(sim.Options{Seed: 1})
		o := DefaultOptions(ForwardingMode(mode % 3))
		if mode&4 != 0 {
			o = o.WithPFC(DefaultPFC())
		}
		topo := smallClos(t, loop, 2, 2, 2, 2, o)
		attach(topo)
		if len(frame) > topo.Pool.LargeCap {
			frame = frame[:topo.Pool.LargeCap]
		}
		p := topo.Pool.Get(len(frame))
		copy(p.Data, frame)
		// Arrive at T0 0's uplink (from a T1) and at a host-facing port.
		q := p.Clone()
		topo.Switch("p0.t0.0").Ports[2].receive(p)
		topo.Switch("p0.t0.0").Ports[0].receive(q)
		loop.Run()
		if topo.Pool.Live != 0 {
			t.Fatalf("%d packets leaked", topo.Pool.Live)
		}
	})
}
