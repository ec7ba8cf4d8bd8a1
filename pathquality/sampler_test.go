package pathquality

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/internal/tshark"
	"github.com/vcluster/vcluster/sim"
)

// incast: hosts 0 and 1 send to host 2 under one T0, 30 Gb/s each all
// the time and another 30 Gb/s each in bursts of 100 µs every 200 µs, so
// host 2's port (100 Gb/s) builds a queue of ~250 KB in every burst and
// drains it between. Frames are RoCEv2 (UDP 4791): the 5 µs threshold.
type incast struct {
	r     *rig
	cp    *ControlPlane
	port  *fabric.Port // the congested host-facing port
	truth *fabric.QueueSampler
	end   sim.Time
}

const incastPayload = 1000

func runIncast(t testing.TB, cfg Config) *incast {
	r := newRig(t, 3, 1, 1)
	cp := mustNew(t, r, cfg)
	x := &incast{r: r, cp: cp, port: r.topo.Switch("p0.t0.0").Ports[2], end: 1000 * us}
	r.sinks[2].log = true
	x.truth = fabric.NewQueueSampler(r.loop, []*fabric.Port{x.port}, 50*time.Nanosecond, x.end)
	for h := 0; h < 2; h++ {
		r.startCBR(h, 2, uint16(100+h), incastPayload, 30e9, sim.Time(h)*37, x.end)
		for b := sim.Time(0); b < x.end; b += 200 * us {
			r.startCBR(h, 2, uint16(200+h), incastPayload, 30e9, b+sim.Time(h)*53, b+100*us)
		}
	}
	r.runUntil(x.end + 5*us) // the last period's frames reach the sink
	cp.Stop()
	return x
}

// series returns the port's samples and their times.
func (x *incast) series(t testing.TB) ([]sample, []sim.Time) {
	for _, sc := range x.cp.sw {
		for i := range sc.ports {
			if sc.ports[i].p == x.port {
				return sc.ports[i].series, x.cp.ticks
			}
		}
	}
	t.Fatal("port not sampled")
	return nil, nil
}

// TestSampledUtilizationAndQueueMatchTruth: every sample period's
// utilization matches the bytes the sink received in that period (shifted
// by the fixed serialization + pipeline + propagation delay), within one
// frame, and its mean queue matches a 50 ns queue sampler's mean over the
// same period within a frame or 2 %.
func TestSampledUtilizationAndQueueMatchTruth(t *testing.T) {
	cfg := scaled
	x := runIncast(t, cfg)
	ss, ticks := x.series(t)
	if len(ss) != len(ticks) || len(ss) < 40 {
		t.Fatalf("%d samples at %d ticks", len(ss), len(ticks))
	}
	wire := fabric.EthHeaderLen + fabric.IPv6HeaderLen + fabric.UDPHeaderLen + incastPayload + fabric.FCSLen
	spec := x.r.topo.Clos
	ser := sim.Time(math.Ceil(float64(wire+x.port.Config().IFGBytes) * 8 / 100e9 * 1e9))
	shift := ser + sim.Time(spec.SwitchLatency+spec.HostDelay)
	period := float64(cfg.SamplePeriod)
	frameUtil := float64(wire*8) / (period / 1e9 * 100e9)
	arr := x.r.sinks[2].arrivals
	prev := sim.Time(0)
	var maxUErr, maxQErr, peakQ float64
	for k, s := range ss {
		at := ticks[k]
		var b int
		for _, a := range arr {
			if a.at >= prev+shift && a.at < at+shift {
				b += a.bytes
			}
		}
		trueU := float64(b*8) / (float64(at-prev) / 1e9 * 100e9)
		if e := math.Abs(float64(s.util) - trueU); e > frameUtil+1e-9 {
			t.Errorf("sample %d at %v: utilization %.4f, true %.4f (tolerance one frame, %.4f)", k, at, s.util, trueU, frameUtil)
		} else {
			maxUErr = max(maxUErr, e)
		}
		var sum float64
		var n int
		for _, q := range x.truth.Samples {
			if q.At >= prev && q.At < at {
				sum += float64(q.Bytes)
				n++
			}
		}
		trueQ := sum / float64(n)
		peakQ = max(peakQ, trueQ)
		if e := math.Abs(float64(s.meanQ) - trueQ); e > max(float64(wire), 0.02*trueQ) {
			t.Errorf("sample %d at %v: mean queue %.0f B, true %.0f B", k, at, s.meanQ, trueQ)
		} else {
			maxQErr = max(maxQErr, e)
		}
		prev = at
	}
	if peakQ < 100e3 {
		t.Fatalf("the incast built a mean queue of only %.0f B: the test checks nothing", peakQ)
	}
	t.Logf("%d periods: max |Δutilization| %.4f (one frame %.4f), max |Δmean queue| %.0f B (peak period mean %.0f B)",
		len(ss), maxUErr, frameUtil, maxQErr, peakQ)
}

// TestHDCDelayInLinkState: the congested port's HDC-derived mean delay is
// in its samples and LinkState, matches Σ captured latency / frames sent,
// and tracks the queue (delay ≈ bytes ahead × 8 / rate) in deep periods.
func TestHDCDelayInLinkState(t *testing.T) {
	cfg := scaled
	x := runIncast(t, cfg)
	ss, _ := x.series(t)
	var deep int
	var weighted time.Duration
	for _, s := range ss {
		if s.meanQ > 150e3 {
			deep++
			want := float64(s.meanQ) * 8 / 100e9 * 1e9 // ns
			if r := float64(s.delay) / want; r < 0.7 || r > 1.3 {
				t.Errorf("mean queue %.0f B (%.1f µs at line rate) but HDC mean delay %v", s.meanQ, want/1e3, s.delay)
			}
		}
		if s.hdc > 0 && s.delay <= 0 {
			t.Errorf("a period with %d captures has mean delay %v", s.hdc, s.delay)
		}
		weighted += s.delay
	}
	if deep == 0 || weighted == 0 {
		t.Fatalf("no deep periods (%d) or no delay at all", deep)
	}
	col := x.r.topo.Switch("p0.t0.0").HDC()
	if col.Total[2].Records == 0 {
		t.Fatal("no HDC records at the congested port")
	}
	var recs uint64
	for _, s := range ss {
		recs += uint64(s.hdc)
	}
	if recs != col.Total[2].Records {
		t.Fatalf("samples count %d captures, the collector %d", recs, col.Total[2].Records)
	}
	// The uncongested host ports see no capture and no delay.
	for _, l := range x.cp.Links() {
		if l.Port == "p0.t0.0/0" && l.MeanDelay != 0 {
			t.Fatalf("%s: delay %v on an idle port", l.Port, l.MeanDelay)
		}
	}
	if st := x.cp.Stats(); st.HDCRecords != col.Total[2].Records {
		t.Fatalf("Stats.HDCRecords %d, collector %d", st.HDCRecords, col.Total[2].Records)
	}
}

// TestHDCOutputs: the JSON lines carry the seed's fields for every kept
// record, and the pcap holds the same records' 150-byte excerpts.
func TestHDCOutputs(t *testing.T) {
	x := runIncast(t, scaled)
	col := x.r.topo.Switch("p0.t0.0").HDC()
	var jb, pb bytes.Buffer
	if err := x.cp.WriteHDCJSONL(&jb); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(jb.Bytes(), []byte("\n")), []byte("\n"))
	if len(lines) != len(col.Records) || len(lines) == 0 {
		t.Fatalf("%d JSON lines for %d records", len(lines), len(col.Records))
	}
	for i, l := range lines {
		var m struct {
			Switch      string  `json:"switch"`
			IngressPort string  `json:"ingress_port"`
			EgressPort  string  `json:"egress_port"`
			QueueID     int     `json:"queue_id"`
			QueueDepth  int     `json:"queue_depth"`
			Latency     float64 `json:"latency"`
			Timestamp   int64   `json:"timestamp"`
			Class       string  `json:"class"`
			OrigLen     int     `json:"orig_len"`
		}
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		r := col.Records[i]
		if m.Switch != "p0.t0.0" || m.EgressPort != "p0.t0.0/2" || m.Class != "rdma" ||
			m.Timestamp != int64(r.Timestamp) || math.Abs(m.Latency-float64(r.Latency)/1e3) > 1e-9 ||
			m.QueueDepth != r.QueueDepth || m.QueueID != int(r.QueueID) || m.OrigLen != r.OrigLen ||
			(m.IngressPort != "p0.t0.0/0" && m.IngressPort != "p0.t0.0/1") {
			t.Fatalf("line %d: %s for record %+v", i, l, r)
		}
		if m.Latency <= 5 {
			t.Fatalf("line %d: latency %v µs is not above the 5 µs RDMA threshold", i, m.Latency)
		}
	}
	if err := x.cp.WriteHDCPcap(&pb); err != nil {
		t.Fatal(err)
	}
	lt, prs, err := pcap.ReadAll(&pb)
	if err != nil {
		t.Fatal(err)
	}
	if lt != pcap.LinkTypeEthernet || len(prs) != len(col.Records) {
		t.Fatalf("pcap: link type %d, %d records for %d", lt, len(prs), len(col.Records))
	}
	for i, pr := range prs {
		r := col.Records[i]
		if len(pr.Data) != min(fabric.HDCSnapLen, r.SnapLen) || pr.OrigLen != r.OrigLen || !bytes.Equal(pr.Data, r.Excerpt[:r.SnapLen]) {
			t.Fatalf("pcap record %d: %d bytes of %d, record keeps %d of %d", i, len(pr.Data), pr.OrigLen, r.SnapLen, r.OrigLen)
		}
	}
	if _, ok := tshark.Path(); !ok {
		t.Log(tshark.SkipMessage)
		return
	}
	file := filepath.Join(t.TempDir(), HDCPcapFile)
	pb.Reset()
	if err := x.cp.WriteHDCPcap(&pb); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := tshark.FieldsArgs(t, file, tshark.IgnoreIPv6ZeroChecksum, "", "udp.dstport", "ipv6.dst", "frame.len", "frame.cap_len")
	if len(rows) != len(col.Records) {
		t.Fatalf("tshark reads %d frames of %d", len(rows), len(col.Records))
	}
	for i, r := range rows {
		if r[0] != "4791" || r[1] != "fd00::3" || r[2] != strconv.Itoa(col.Records[i].OrigLen) || r[3] != strconv.Itoa(col.Records[i].SnapLen) {
			t.Fatalf("frame %d: tshark reads %v", i, r)
		}
	}
}
