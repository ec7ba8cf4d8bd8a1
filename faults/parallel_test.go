package faults

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
)

// parallelPlan exercises every kind of action a plan takes on a
// partitioned cluster: cables down (cut T0–T1 links and host links), a
// switch reboot, flaps, gray loss, extra latency on a cut link, a black
// hole, a PFC storm and a dynamic (busiest) selector.
const parallelPlan = `events:
  - at: 10us
    duration: 600us
    kind: loss
    target: link:p3.t0.1-p3.t1.0
    params: {rate: 5%}
  - at: 15us
    duration: 200us
    kind: latency
    target: link:p0.t0.2-p0.t1.3
    params: {delay: 5us}
  - at: 20us
    duration: 500us
    kind: link_down
    target: link:p1.t0.0-p1.t1.2
  - at: 30us
    kind: switch_reboot
    target: switch:p2.t1.1
    params: {boot: 300us}
  - at: 40us
    duration: 300us
    kind: link_flap
    target: link:p0.t0.5-p0.t1.0
    params: {period: 60us, down: 20us, jitter: 5us}
  - at: 50us
    duration: 200us
    kind: nic_down
    target: nic:h3/p2
  - at: 60us
    duration: 500us
    kind: black_hole
    target: switch:p1.t1.3
    params: {usid: p1.t0.3, fraction: 0.5}
  - at: 70us
    duration: 100us
    kind: pfc_storm
    target: nic:h15/p1
  - at: 80us
    duration: 300us
    kind: link_down
    target: busiest:t0-t1
`

// A drill — fault plan, Clustermapper, controller, recorder — gives the
// same summary and event log for any number of partitions and workers.
func TestDrillPartitionedIdentical(t *testing.T) {
	cfg := mrcC(t, "fabric.hostsPerT0=2") // 8 T0s per plane: up to 8 partitions
	run := func(parallel, parts int) (string, string, *Summary) {
		var log bytes.Buffer
		o := DrillOptions{Plan: mustPlan(t, parallelPlan), Workload: Workload{Pattern: "shift", Bytes: 8 << 20},
			Mapper: true, MapperCfg: MapperConfig{Interval: 40 * time.Microsecond, Timeout: 15 * time.Microsecond}, Period: 100 * time.Microsecond, Log: &log, Parallel: parallel, Partitions: parts}
		var c *cluster.Cluster
		o.OnCluster = func(cl *cluster.Cluster) { c = cl }
		s, err := Drill(cfg, o)
		if err != nil {
			t.Fatalf("parallel %d, %d partitions: %v", parallel, parts, err)
		}
		if parallel > 0 {
			if p := c.Partitioning(); p == nil || len(p.Loops) != parts || (parts > 1 && p.CrossFrames() == 0) {
				t.Fatalf("parallel %d: not run on %d partitions", parallel, parts)
			}
		}
		j, _ := json.Marshal(s)
		return string(j), log.String(), s
	}
	refSum, refLog, ref := run(1, 1)
	if ref.Completed != ref.Transfers || ref.Verified != ref.Transfers || len(ref.Faults) != 9 {
		t.Fatalf("reference drill: %d/%d completed, %d verified, %d faults:\n%s", ref.Completed, ref.Transfers, ref.Verified, len(ref.Faults), refSum)
	}
	if len(ref.Findings) == 0 || ref.ProbesLost == 0 || len(ref.Denylist) == 0 {
		t.Fatalf("Clustermapper found nothing: %s", refSum)
	}
	for _, ev := range []string{`"inject"`, `"recovered"`, `"located"`, `"deny_pushed"`, `"flap_down"`, `"first_loss"`, `"probe_loss"`} {
		if !strings.Contains(refLog, `"event":`+ev) {
			t.Errorf("event log lacks %s", ev)
		}
	}
	for _, pw := range [][2]int{{2, 3}, {4, 8}} {
		sum, log, _ := run(pw[0], pw[1])
		if sum != refSum {
			t.Errorf("%d workers, %d partitions: summary differs:\n%s\nwant\n%s", pw[0], pw[1], sum, refSum)
		}
		if log != refLog {
			t.Errorf("%d workers, %d partitions: event log differs:\n%s\nwant\n%s", pw[0], pw[1], log, refLog)
		}
	}
	// The classic loop runs the same drill (its simultaneous arrivals
	// order differently, so only the outcome is compared).
	_, _, classic := run(0, 0)
	if classic.Completed != ref.Completed || len(classic.Faults) != len(ref.Faults) {
		t.Errorf("classic loop: %d completed, %d faults; partitioned %d, %d", classic.Completed, len(classic.Faults), ref.Completed, len(ref.Faults))
	}
	t.Logf("partitioned: job %d ns, %d retx, findings %v; classic: job %d ns, %d retx, findings %v",
		ref.JobNs, ref.Retransmissions, ref.Findings, classic.JobNs, classic.Retransmissions, classic.Findings)
}
