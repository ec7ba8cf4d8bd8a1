package mrc

import (
	"math"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// tlpSetup sends a 16-packet Write, delivers every packet but the lost
// ones (by index) and every SACK back with the hand-wired 1 µs per hop
// (RTT 2 µs), and returns the time the last SACK arrived.
func tlpSetup(t *testing.T, cfg Config, lost ...int) (a, b *end, pa []pkt, quiet int64) {
	t.Helper()
	a, b = newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 16*pmtu, 0)
	pa = a.drain(0, 0xf)
	var got []pkt
	for i, p := range pa {
		drop := false
		for _, l := range lost {
			drop = drop || i == l
		}
		if !drop {
			got = append(got, p)
		}
	}
	b.recv(1000, got...)
	a.recv(2000, b.drain(1000, 0xf)...)
	if c := a.comps(); len(c) != 0 {
		t.Fatalf("completed despite loss: %+v", c)
	}
	return a, b, pa, 2000
}

// The last packet of a message is lost: nothing after it can reveal the
// hole, so without a tail-loss probe it waits for the RTO. After
// TLPFactor × the smoothed RTT (2 × 2 µs here) of silence the QP sends it
// again, before the RTO, and the loss is repaired without a timeout.
func TestTailLossProbeLastPacket(t *testing.T) {
	cfg := smallCfg()
	a, b, pa, quiet := tlpSetup(t, cfg, 15)
	const rtt = 2000 // every sample of the hand-wired exchange
	want := quiet + int64(cfg.TLPFactor*rtt)
	dl, ok := a.q.Deadline()
	if !ok || dl != want {
		t.Fatalf("deadline %d %v, want the tail-loss probe at %d (RTO at %d)", dl, ok, want, a.q.rto)
	}
	if dl >= a.q.rto {
		t.Fatalf("probe at %d is not before the RTO %d", dl, a.q.rto)
	}
	if tx, ok := a.q.Send(dl-1, 0xf, a.buf); ok {
		t.Fatalf("sent %+v before the probe time", tx)
	}
	a.q.Tick(dl - 1)
	if n := len(a.drain(dl-1, 0xf)); n != 0 {
		t.Fatalf("%d packets before the probe time", n)
	}
	a.q.Tick(dl)
	rt := a.drain(dl, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != pa[15].bth(t).PSN || !rt[0].bth(t).Rtx {
		t.Fatalf("probe: %d packets, want PSN %d again", len(rt), pa[15].bth(t).PSN)
	}
	if s := a.q.MRCStats(); s.TailLossProbes != 1 {
		t.Fatalf("TailLossProbes %d", s.TailLossProbes)
	}
	b.recv(dl+1000, rt...)
	a.recv(dl+2000, b.drain(dl+1000, 0xf)...)
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Bytes: 16 * pmtu})
	sameBytes(t, a, b, 0, 16*pmtu)
	if st := a.q.Stats(); st.Timeouts != 0 {
		t.Fatalf("%d timeouts", st.Timeouts)
	}
	if _, ok := a.q.Deadline(); ok {
		t.Fatal("a deadline with nothing outstanding")
	}
}

// Two holes near the end, too close to the end for the fast-loss rule:
// the probe resends the last unacknowledged packet (PSN +15); its
// acknowledgement shows the other hole (+12), sent before the probe and
// still missing after 2 RTTs, is lost too: both are repaired without a
// timeout.
func TestTailLossProbeTwoHoles(t *testing.T) {
	cfg := smallCfg()
	a, b, pa, _ := tlpSetup(t, cfg, 12, 15)
	dl, _ := a.q.Deadline()
	a.q.Tick(dl)
	rt := a.drain(dl, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != pa[15].bth(t).PSN {
		t.Fatalf("probe: %d packets", len(rt))
	}
	b.recv(dl+1000, rt...)
	a.recv(dl+2000, b.drain(dl+1000, 0xf)...)
	rt = a.drain(dl+2000, 0xf)
	if len(rt) != 1 || rt[0].bth(t).PSN != pa[12].bth(t).PSN || !rt[0].bth(t).Rtx {
		t.Fatalf("after the probe's ACK: %d packets, want PSN %d again", len(rt), pa[12].bth(t).PSN)
	}
	b.recv(dl+3000, rt...)
	a.recv(dl+4000, b.drain(dl+3000, 0xf)...)
	wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Bytes: 16 * pmtu})
	sameBytes(t, a, b, 0, 16*pmtu)
	if st := a.q.Stats(); st.Timeouts != 0 {
		t.Fatalf("%d timeouts", st.Timeouts)
	}
}

// At most one probe per silence period: when the probe is lost as well,
// the next recovery is the RTO, not a stream of probes.
func TestTailLossProbeOncePerSilence(t *testing.T) {
	cfg := smallCfg()
	a, _, _, _ := tlpSetup(t, cfg, 15)
	dl, _ := a.q.Deadline()
	a.q.Tick(dl)
	if n := len(a.drain(dl, 0xf)); n != 1 {
		t.Fatalf("probe: %d packets", n)
	}
	next, _ := a.q.Deadline()
	if next != dl+a.q.rto {
		t.Fatalf("next deadline %d, want the probe's RTO at %d", next, dl+a.q.rto)
	}
	a.q.Tick(next)
	if st := a.q.Stats(); st.Timeouts != 1 || a.q.MRCStats().TailLossProbes != 1 {
		t.Fatalf("timeouts %d, probes %d", st.Timeouts, a.q.MRCStats().TailLossProbes)
	}
}

// TLPFactor 0 turns the probe off: the tail loss waits for the RTO.
func TestTailLossProbeOff(t *testing.T) {
	cfg := smallCfg()
	cfg.TLPFactor = 0
	a, _, _, _ := tlpSetup(t, cfg, 15)
	if dl, _ := a.q.Deadline(); dl != a.q.rto {
		t.Fatalf("deadline %d, want the RTO %d", dl, a.q.rto)
	}
}

func TestTLPFactorValidate(t *testing.T) {
	for _, f := range []float64{0, 0.5, 2, 64} {
		c := DefaultConfig()
		c.TLPFactor = f
		if err := c.Validate(); err != nil {
			t.Errorf("TLPFactor %g: %v", f, err)
		}
	}
	for _, f := range []float64{-1, 65, math.NaN(), math.Inf(1)} {
		c := DefaultConfig()
		c.TLPFactor = f
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Config.TLPFactor") {
			t.Errorf("TLPFactor %g: %v, want it rejected by name", f, err)
		}
	}
	// NaN passes a range check written as x < lo || x > hi: every float
	// field is checked so that it does not.
	for name, mod := range map[string]func(*Config){
		"SleekFactor":     func(c *Config) { c.SleekFactor = math.NaN() },
		"NSCC gains":      func(c *Config) { c.NSCC.Eta = math.NaN() },
		"NSCC.Gamma":      func(c *Config) { c.NSCC.Gamma = math.NaN() },
		"NSCC.MaxMDJump":  func(c *Config) { c.NSCC.MaxMDJump = math.NaN() },
		"NSCC.DelayAlpha": func(c *Config) { c.NSCC.DelayAlpha = math.NaN() },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s NaN: %v", name, err)
		}
	}
}
