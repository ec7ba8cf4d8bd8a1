package collectives

import (
	"regexp"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

// A rank's NIC dies for good mid-collective: the QPs toward it (and its
// own) hit their retry limit, and the collective returns an error naming
// the pair and the cause, in time, instead of stalling until a deadline.
func TestCollectiveReportsQPError(t *testing.T) {
	c := newCluster(t, "mrc", 16, "transport.payload=elided")
	m := newComm(t, c, Options{Hosts: firstHosts(8)})
	const dead = 3
	c.Loop.At(20*sim.Microsecond, func() {
		for _, p := range c.Topo.HostPorts[dead] {
			p.Tx.SetUp(false)
			p.Peer.Tx.SetUp(false)
		}
	})
	_, err := m.Run(mustLookup(t, "allreduce/ring"), 16<<20, RunOptions{})
	if err == nil {
		t.Fatal("the collective succeeded with a rank's NIC down")
	}
	t.Logf("error at %v: %v", c.Now(), err)
	re := regexp.MustCompile(`rank (\d+) → rank (\d+) \(h(\d+)→h(\d+)\): QP error: retry limit exceeded after 13 timeouts`)
	g := re.FindStringSubmatch(err.Error())
	if g == nil {
		t.Fatalf("error %q does not name the pair and the retry limit", err)
	}
	if g[1] != itoa(dead) && g[2] != itoa(dead) {
		t.Errorf("error names ranks %s → %s, neither is the dead rank %d", g[1], g[2], dead)
	}
	// No later than the retry schedule of a packet sent at the failure
	// (RetryLinear+1 RTOs, then RetryExp doubling ones), plus slack.
	mc, err := c.MRCConfig()
	if err != nil {
		t.Fatal(err)
	}
	var sched sim.Time
	for k := 0; k <= mc.RetryLinear+mc.RetryExp; k++ {
		sched += sim.Time(mc.RTO << uint(max(0, k-mc.RetryLinear)))
	}
	if limit := 20*sim.Microsecond + sched + sim.Millisecond; c.Now() > limit {
		t.Errorf("error only at %v, after the retry schedule allows (%v)", c.Now(), limit)
	}
}
