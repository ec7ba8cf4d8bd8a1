package cluster

import (
	"math/big"
	"testing"

	"github.com/vcluster/vcluster/config"
)

// perLink25G is step × rate / 25G, without overflow.
func perLink25G(step int64, rate uint64) int64 {
	r := new(big.Int).Mul(big.NewInt(step), new(big.Int).SetUint64(rate))
	return r.Quo(r, big.NewInt(25e9)).Int64()
}

// Every fabric preset's link speed, and the faster ports the config
// accepts, gives a valid RoCE configuration for every congestion-control
// preset and both reliabilities, with DCQCN's increase steps scaled
// linearly from the link rate and every rate within (0, line rate]. The
// DCQCN default overflowed above ~184 Gb/s, so every RoCE run on preset A
// (200G) failed here.
func TestRoCEConfigEveryLinkSpeed(t *testing.T) {
	type run struct {
		name string
		sets []string
		bps  int64 // the host link rate the case sets (0: the preset's)
	}
	var runs []run
	for _, p := range config.PresetNames() {
		runs = append(runs, run{"preset " + p, []string{"fabric.preset=" + p}, 0})
	}
	for s, bps := range map[string]int64{"200G": 200e9, "400G": 400e9, "800G": 800e9, "1.6T": 1600e9} {
		runs = append(runs, run{"preset C at " + s, []string{"fabric.preset=C", "fabric.hostLinkSpeed=" + s, "fabric.fabricLinkSpeed=" + s}, bps})
	}
	for _, r := range runs {
		for _, cc := range config.RoCECCPresets {
			for _, rel := range []string{"gbn", "irn"} {
				c, err := New(load(t, append(r.sets, "transport.kind=roce", "host.netstack=false", "transport.roce.cc="+cc, "transport.roce.reliability="+rel)...), nil)
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				rc, err := c.RoCEConfig(0)
				c.Close()
				if err != nil {
					t.Errorf("%s, %s, %s: %v", r.name, cc, rel, err)
					continue
				}
				line := c.hostRate()
				if rc.LineRateBps != int64(line) || (r.bps != 0 && rc.LineRateBps != r.bps) {
					t.Errorf("%s: LineRateBps %d, want the host link's %d (set: %d)", r.name, rc.LineRateBps, line, r.bps)
				}
				d := rc.DCQCN
				for f, v := range map[string]int64{"RAIBps": d.RAIBps, "RHAIBps": d.RHAIBps, "MinRateBps": d.MinRateBps,
					"Timely.DeltaBps": rc.Timely.DeltaBps, "Timely.MinRateBps": rc.Timely.MinRateBps} {
					if v <= 0 || v > rc.LineRateBps {
						t.Errorf("%s, %s: %s = %d outside (0, %d]", r.name, cc, f, v, rc.LineRateBps)
					}
				}
				if b := rc.BDPBytes(); b < int64(rc.PMTU) || b > int64(line)/8/1000 { // at least a packet, below 1 ms of line rate
					t.Errorf("%s: BDPBytes %d implausible at %d b/s", r.name, b, line)
				}
				if cc == "timely_hpcc" && rc.Timely.DeltaBps != int64(line)/1000 {
					t.Errorf("%s, %s: Timely.DeltaBps %d, want bw Mb/s = %d", r.name, cc, rc.Timely.DeltaBps, line/1000)
				}
				slow := map[string]int64{"dcqcn_hpcc": 1, "dcqcn_hpcc_paper": 1, "dcqcn_hpcc_g4_slow2": 2, "dcqcn_hpcc_g16_slow4": 4}[cc]
				if slow == 0 {
					continue
				}
				if want := perLink25G(5e6, line) / slow; d.RAIBps != want {
					t.Errorf("%s, %s: RAIBps %d, want 5 Mb/s × rate/25G / %d = %d", r.name, cc, d.RAIBps, slow, want)
				}
				if want := perLink25G(50e6, line) / slow; d.RHAIBps != want {
					t.Errorf("%s, %s: RHAIBps %d, want 50 Mb/s × rate/25G / %d = %d", r.name, cc, d.RHAIBps, slow, want)
				}
			}
		}
	}
}

// A RoCE transfer on preset A (4 × 200G planes) completes with every byte
// verified (it failed at QP creation before the overflow fix).
func TestRoCEPresetA200GTransfer(t *testing.T) {
	for _, rel := range []string{"gbn", "irn"} {
		r, err := RunP2P(load(t, "fabric.preset=A", "transport.kind=roce", "host.netstack=false", "transport.roce.reliability="+rel), 0, 15, 8<<20, 0.001)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if !r.Verified || r.LineRateBps != 200e9 {
			t.Fatalf("%s: verified %v, line rate %.0f (want 200G)", rel, r.Verified, r.LineRateBps)
		}
		if r.GoodputBps < 0.2*r.LineRateBps {
			t.Errorf("%s: %s on one 200G plane", rel, gbps(r.GoodputBps))
		}
		t.Logf("RoCE %s, 8 MiB on preset A at 0.1%% loss: %s (%.1f%% of 200G), %d retransmitted, bytes verified",
			rel, gbps(r.GoodputBps), 100*r.GoodputBps/r.LineRateBps, r.Retransmitted)
	}
}
