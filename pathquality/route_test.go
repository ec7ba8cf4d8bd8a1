package pathquality

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// scaled are periods for a microsecond fabric (docs/pathquality.md).
var scaled = Config{SamplePeriod: 20 * time.Microsecond, AdvertisePeriod: 100 * time.Microsecond,
	ControlDelay: 10 * time.Microsecond, Apply: true}

const us = sim.Time(time.Microsecond)

// TestStaticDegradeKnownAtSessionUp: a link degraded before New is in
// the first advertisements, so the weights follow it one control delay
// later, before any sample.
func TestStaticDegradeKnownAtSessionUp(t *testing.T) {
	r := newRig(t, 1, 2, 2)
	r.setCableRate(1, 0, 25e9)
	cp := mustNew(t, r, scaled)
	r.runUntil(sim.Time(scaled.ControlDelay))
	if got := route(t, cp, "p0.t1.0", 1).Advertised; got != 25 {
		t.Fatalf("t1.0 advertises %v Gb/s toward subnet 1, want 25", got)
	}
	if got := route(t, cp, "p0.t0.1", 1).Advertised; got != 100 {
		t.Fatalf("t0.1 advertises %v Gb/s for its own subnet, want its host port's 100", got)
	}
	w := route(t, cp, "p0.t0.0", 1).Weights
	if len(w) != 2 || math.Abs(w[0]-25) > 1e-3 || math.Abs(w[1]-100) > 1e-3 {
		t.Fatalf("t0.0 weights toward subnet 1: %v, want [25 100]", w)
	}
	_, buckets := r.topo.Switch("p0.t0.0").PathWeights(1)
	if want := []int{51, 205}; buckets[0] != want[0] || buckets[1] != want[1] {
		t.Fatalf("buckets %v, want %v", buckets, want)
	}
	// Split horizon: t0.0 sends nothing about subnet 1 (its neighbours
	// are its next hops toward it); t1s send subnet 1 to t0.0 only.
	st := cp.Stats()
	// t0.x: own subnet to 2 T1s (2 × 2); t1.x: each subnet to the other T0 (2 × 2).
	if st.UpdatesSent != 8 || st.UpdateBytes == 0 {
		t.Fatalf("stats %+v, want 8 updates at session up", st)
	}
}

// degradeRun drives 64 flows of 0.5 Gb/s from T0 0's hosts to T0 1's over
// two spines; the cable T0 1–T1 0 drops to 25 Gb/s at 1 ms, recovers at
// 2 ms and drops by 5 % (under the damping threshold) at 3 ms.
type degradeRun struct {
	r           *rig
	cp          *ControlPlane
	tx          map[sim.Time][]uint64 // spine tx bytes at chosen times
	wAt         map[sim.Time][]float64
	suppressed  map[sim.Time]uint64
	samples     []byte
	adverts     []byte
	hdc         []byte
	updatesSent map[sim.Time]uint64
}

func runDegrade(t testing.TB, cfg Config) *degradeRun {
	return runDegradeOn(t, newRig(t, 2, 2, 2), cfg, 25e9)
}

// runDegradeOn runs the degradation on r (its link at low during the
// degraded millisecond).
func runDegradeOn(t testing.TB, r *rig, cfg Config, low uint64) *degradeRun {
	cp := mustNew(t, r, cfg)
	d := &degradeRun{r: r, cp: cp, tx: map[sim.Time][]uint64{}, wAt: map[sim.Time][]float64{},
		suppressed: map[sim.Time]uint64{}, updatesSent: map[sim.Time]uint64{}}
	for i := 0; i < 64; i++ {
		r.startCBR(i%2, 2+(i/2)%2, uint16(1000+i*7919), 1000, 0.5e9, sim.Time(i)*250, 4000*us)
	}
	react := sim.Time(cfg.SamplePeriod + cfg.AdvertisePeriod + cfg.ControlDelay)
	marks := []sim.Time{500 * us, 1000 * us, 1000*us + react, 2000 * us, 2000*us + react, 3000 * us, 3000*us + react, 4000 * us}
	for _, m := range marks {
		r.sched.At(m, func() {
			d.tx[m] = r.spineTx()
			w, _ := r.topo.Switch("p0.t0.0").PathWeights(1)
			d.wAt[m] = w
			d.suppressed[m] = cp.Stats().UpdatesSuppressed
			d.updatesSent[m] = cp.Stats().UpdatesSent
		})
	}
	r.sched.At(1000*us, func() { r.setCableRate(1, 0, low) })
	r.sched.At(2000*us, func() { r.setCableRate(1, 0, 100e9) })
	r.sched.At(3000*us, func() { r.setCableRate(1, 0, 95e9) })
	r.runUntil(4000 * us)
	cp.Stop()
	var s, a bytes.Buffer
	if err := cp.WriteSamplesCSV(&s); err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteAdvertsCSV(&a); err != nil {
		t.Fatal(err)
	}
	var h bytes.Buffer
	if err := cp.WriteHDCJSONL(&h); err != nil {
		t.Fatal(err)
	}
	d.samples, d.adverts, d.hdc = s.Bytes(), a.Bytes(), h.Bytes()
	return d
}

// share0 is spine 0's share of the spines' bytes between two marks.
func (d *degradeRun) share0(from, to sim.Time) float64 {
	a, b := d.tx[from], d.tx[to]
	s0, s1 := float64(b[0]-a[0]), float64(b[1]-a[1])
	return s0 / (s0 + s1)
}

func TestDegradeShiftsTrafficAndRecovers(t *testing.T) {
	d := runDegrade(t, scaled)
	react := sim.Time(scaled.SamplePeriod + scaled.AdvertisePeriod + scaled.ControlDelay)
	if s := d.share0(500*us, 1000*us); s < 0.4 || s > 0.6 {
		t.Fatalf("before the degradation spine 0 carries %.2f of the bytes, want about half", s)
	}
	// Within SamplePeriod+AdvertisePeriod+ControlDelay the path bandwidth
	// via spine 0 has fallen to at most the degraded link's 25 Gb/s.
	if w := d.wAt[1000*us+react]; w == nil || w[0] > 25 || w[1] < 50 {
		t.Fatalf("t0.0's weights toward subnet 1 at the reaction deadline: %v, want spine 0 ≤ 25 and spine 1 ≥ 50", w)
	}
	t.Logf("spine 0's share: before %.3f, degraded %.3f, recovered %.3f; weights at the deadlines %v, %v",
		d.share0(500*us, 1000*us), d.share0(1000*us+react, 2000*us), d.share0(2000*us+react, 3000*us),
		d.wAt[1000*us+react], d.wAt[2000*us+react])
	if s := d.share0(1000*us+react, 2000*us); s > 0.3 {
		t.Fatalf("with its link at 25%% spine 0 still carries %.2f of the bytes", s)
	}
	if w := d.wAt[2000*us+react]; w == nil || w[0] < 50 {
		t.Fatalf("t0.0's weights toward subnet 1 after recovery: %v, want spine 0 back ≥ 50", w)
	}
	if s := d.share0(2000*us+react, 3000*us); s < 0.35 || s > 0.65 {
		t.Fatalf("after recovery spine 0 carries %.2f of the bytes, want about half", s)
	}
	// A 5% drop is under the damping threshold: suppressed, not sent.
	t10 := -1
	for i, sc := range d.cp.sw {
		if sc.s.Name == "p0.t1.0" {
			t10 = i
		}
	}
	var sentAfter, heldAfter int
	for _, a := range d.cp.adverts {
		if a.at > 3000*us && a.sw == t10 && a.subnet == 1 {
			if a.sent {
				sentAfter++
			} else {
				heldAfter++
			}
		}
	}
	if sentAfter != 0 || heldAfter == 0 {
		t.Fatalf("after the 5%% drop t1.0 sent %d updates toward subnet 1 and held back %d; want 0 sent, some held", sentAfter, heldAfter)
	}
	if d.suppressed[4000*us] <= d.suppressed[3000*us] {
		t.Fatalf("UpdatesSuppressed did not grow after the 5%% drop: %d → %d", d.suppressed[3000*us], d.suppressed[4000*us])
	}
	st := d.cp.Stats()
	if st.WeightChanges == 0 || st.BucketsMoved == 0 || st.Samples == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDeterministicOutputs: the same run twice writes the same bytes.
func TestDeterministicOutputs(t *testing.T) {
	a, b := runDegrade(t, scaled), runDegrade(t, scaled)
	if !bytes.Equal(a.samples, b.samples) || !bytes.Equal(a.adverts, b.adverts) {
		t.Fatal("two identical runs wrote different CSVs")
	}
	if len(a.samples) == 0 || len(a.adverts) == 0 {
		t.Fatal("empty outputs")
	}
	var h [2][2]bytes.Buffer
	for i := range h {
		x := runIncast(t, scaled)
		if err := x.cp.WriteHDCJSONL(&h[i][0]); err != nil {
			t.Fatal(err)
		}
		if err := x.cp.WriteHDCPcap(&h[i][1]); err != nil {
			t.Fatal(err)
		}
	}
	if h[0][0].Len() == 0 || !bytes.Equal(h[0][0].Bytes(), h[1][0].Bytes()) || !bytes.Equal(h[0][1].Bytes(), h[1][1].Bytes()) {
		t.Fatal("two identical runs wrote different (or empty) HDC outputs")
	}
}

// TestMeasureOnlyKeepsECMP: without Apply the same degradation moves no
// traffic (what moves it in the test above is the weights), while the
// control plane still advertises.
func TestMeasureOnlyKeepsECMP(t *testing.T) {
	c := scaled
	c.Apply = false
	d := runDegrade(t, c)
	react := sim.Time(c.SamplePeriod + c.AdvertisePeriod + c.ControlDelay)
	if s := d.share0(1000*us+react, 2000*us); s < 0.3 {
		t.Fatalf("measuring only, spine 0's share fell to %.2f", s)
	}
	if w := d.wAt[2000*us]; w != nil {
		t.Fatalf("measuring only, weights were set: %v", w)
	}
	if st := d.cp.Stats(); st.UpdatesSent == 0 || st.WeightChanges != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestPartitionedIdentical: the degradation run (with the link at 10 Gb/s,
// so that its queue builds and HDC captures) writes the same samples,
// adverts and HDC records on a one-loop sim.Parallel (the classic
// cluster's) as cut into 2 partitions on 1 or 2 workers.
func TestPartitionedIdentical(t *testing.T) {
	ref := runDegradeOn(t, newRigParts(t, 2, 2, 2, 1, 1), scaled, 10e9)
	if len(ref.hdc) == 0 {
		t.Fatal("no HDC records: the run does not congest")
	}
	for _, w := range []int{1, 2} {
		d := runDegradeOn(t, newRigParts(t, 2, 2, 2, 2, w), scaled, 10e9)
		if !bytes.Equal(d.samples, ref.samples) || !bytes.Equal(d.adverts, ref.adverts) || !bytes.Equal(d.hdc, ref.hdc) {
			t.Fatalf("2 partitions on %d workers: outputs differ from one partition's", w)
		}
		if d.cp.Stats() != ref.cp.Stats() {
			t.Fatalf("stats %+v, want %+v", d.cp.Stats(), ref.cp.Stats())
		}
	}
}

// TestLinkDownWeightedOut: a cable that goes down (no routing
// reconvergence) has capacity 0: within the reaction time t0.0 weights
// out the spine behind it and sends nothing more that way (every flow
// goes to subnet 1, which that spine can no longer reach).
func TestLinkDownWeightedOut(t *testing.T) {
	r := newRig(t, 2, 2, 2)
	cp := mustNew(t, r, scaled)
	for i := 0; i < 64; i++ {
		r.startCBR(i%2, 2+(i/2)%2, uint16(1000+i*7919), 1000, 0.5e9, sim.Time(i)*250, 2000*us)
	}
	down := r.topo.Switch("p0.t0.1").Ports[2]  // t0.1 – t1.0
	toT10 := r.topo.Switch("p0.t0.0").Ports[2] // t0.0's uplink to t1.0
	react := sim.Time(scaled.SamplePeriod + scaled.AdvertisePeriod + scaled.ControlDelay)
	var before, atReact uint64
	r.sched.At(500*us, func() {
		before = toT10.Counters.TxBytes
		down.Tx.SetUp(false)
		down.Peer.Tx.SetUp(false)
	})
	r.sched.At(500*us+react, func() { atReact = toT10.Counters.TxBytes })
	r.runUntil(2000 * us)
	cp.Stop()
	w, _ := r.topo.Switch("p0.t0.0").PathWeights(1)
	if len(w) != 2 || w[0] != 0 || w[1] == 0 {
		t.Fatalf("t0.0's weights toward subnet 1 with t1.0's link to it down: %v", w)
	}
	if before == 0 {
		t.Fatal("t0.0 sent nothing via t1.0 before the link went down: the test checks nothing")
	}
	if end := toT10.Counters.TxBytes; end != atReact {
		t.Fatalf("t0.0 still sent %d bytes via t1.0 after the reaction deadline", end-atReact)
	}
}
