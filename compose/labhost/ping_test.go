package labhost

import (
	"testing"
	"time"
)

// A netstack ping from one host instance to another crosses both tunnels
// and the fabric's switches.
func TestPingAcrossTheTunnel(t *testing.T) {
	lab := testLab(t)
	f, hs := startHosts(t, lab, 2)
	for plane := 0; plane < 4; plane++ {
		got := make(chan bool, 1)
		var rtt time.Duration
		err := hs[0].onLoop(func() {
			err := hs[0].cl.Hosts[0].Ping(hs[0].cl.Topo.HostAddr(1, plane), 5, uint16(plane+1), 56, 20*time.Second, func(d time.Duration, ok bool) { rtt = d; got <- ok })
			if err != nil {
				t.Error(err)
			}
		}, loopTimeout)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ok := <-got:
			if !ok {
				t.Fatalf("plane %d: ping lost (fabric in %d, host 0 in %d out %d, host 1 in %d out %d, fabric drops %v)", plane, f.framesIn.Load(),
					hs[0].framesIn.Load(), hs[0].framesOut.Load(), hs[1].framesIn.Load(), hs[1].framesOut.Load(), f.drops.Snapshot())
			}
			t.Logf("plane %d: ping RTT %v (virtual)", plane, rtt)
		case <-time.After(30 * time.Second):
			t.Fatal("no ping answer")
		}
	}
}
