package collectives

import (
	"testing"
)

// Under 0.1% loss on every link (every direction) results stay correct
// over both transports.
func TestCorrectUnderLoss(t *testing.T) {
	const P, S = 8, 4 << 20
	for _, tr := range []string{"mrc", "roce"} {
		for _, name := range []string{"allreduce/ring", "alltoall/pairwise", "allreduce/halving-doubling"} {
			c := newCluster(t, tr, 16)
			lossEverywhere(c, 0.001)
			m := newComm(t, c, Options{Hosts: firstHosts(P)})
			r, err := m.Run(mustLookup(t, name), S, RunOptions{})
			if err != nil {
				t.Fatalf("%s %s: %v", tr, name, err)
			}
			if r.Check != CheckOK {
				t.Errorf("%s %s: %s, %d wrong", tr, name, r.Check, r.Wrong)
			}
			t.Logf("%-4s %-27s 4 MiB, 8 ranks, 0.1%% loss: %s, %8.1f µs, busbw %5.2f GB/s", tr, name, r.Check, float64(r.TimeNs)/1e3, r.BusBW)
		}
	}
}

// The cost of 0.1% loss on a large ring all-reduce: RoCE (go-back-N)
// slows down, and more than MRC does — when MRC's PSN window (MPR) has room
// beyond the BDP. At the spec's one unit (128 PSNs, the default since issue
// #16) every hole stalls the window until it is repaired, and MRC slows
// down more than RoCE 1 QP (which uses one plane, a quarter of the NIC):
// measured 1.56× vs 1.12×. The test asserts both: with 4 units MRC is less
// affected than RoCE, and one unit costs MRC more than four.
func TestLossSlowsRoCEMore(t *testing.T) {
	const P, S = 8, 64 << 20
	slow := map[string]float64{}
	for _, v := range []struct{ name, tr, mpr string }{{"mrc/mpr1", "mrc", "1"}, {"mrc/mpr4", "mrc", "4"}, {"roce", "roce", "1"}} {
		var times [2]float64
		for i, loss := range []float64{0, 0.001} {
			c := newCluster(t, v.tr, 16, "transport.payload=elided", "transport.mrc.mprUnits="+v.mpr)
			if loss > 0 {
				lossEverywhere(c, loss)
			}
			m := newComm(t, c, Options{Hosts: firstHosts(P)})
			r, err := m.Run(mustLookup(t, "allreduce/ring"), S, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			times[i] = float64(r.TimeNs)
			t.Logf("%-8s ring all-reduce 64 MiB, 8 ranks, loss %g: %8.1f µs, busbw %5.2f GB/s", v.name, loss, times[i]/1e3, r.BusBW)
		}
		slow[v.name] = times[1] / times[0]
	}
	t.Logf("slowdown at 0.1%% loss: MRC MPR 1 %.3f×, MPR 4 %.3f×, RoCE %.3f×", slow["mrc/mpr1"], slow["mrc/mpr4"], slow["roce"])
	if slow["roce"] <= 1 {
		t.Errorf("RoCE not slower under loss (%.3f×)", slow["roce"])
	}
	if slow["mrc/mpr4"] >= slow["roce"] {
		t.Errorf("MRC (MPR 4) slowed %.3f×, RoCE %.3f×: want MRC less affected", slow["mrc/mpr4"], slow["roce"])
	}
	if slow["mrc/mpr1"] <= slow["mrc/mpr4"] {
		t.Errorf("MRC slowed %.3f× with MPR 1 and %.3f× with 4: a smaller window should cost more under loss", slow["mrc/mpr1"], slow["mrc/mpr4"])
	}
}

func mustLookup(t testing.TB, name string) *Algorithm {
	t.Helper()
	for i := range name {
		if name[i] == '/' {
			a, err := Lookup(Op(name[:i]), name[i+1:])
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
	}
	t.Fatalf("bad algorithm name %q", name)
	return nil
}
