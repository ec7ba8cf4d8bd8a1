package mrc

import (
	"strings"
	"testing"

	"github.com/vcluster/vcluster/verbs"
)

// Requester rules as the spec (PROTOCOLS.md §a) and htsim define them,
// each driven step by step.

// sack builds a SACK to A with the given SETH and CC_STATE.
func sack(t *testing.T, s SETH, c CCState) pkt {
	t.Helper()
	buf := make([]byte, SACKLen)
	if _, err := EncodeSACK(buf, BTH{DestQP: qpnA, PSN: s.CackPSN}, &s, &c); err != nil {
		t.Fatal(err)
	}
	return pkt{tx: verbs.Tx{EV: s.EV, WireLen: SACKLen}, data: buf}
}

func psns(t *testing.T, ps []pkt) []uint32 {
	var out []uint32
	for _, p := range ps {
		if IsDataOpcode(p.op()) {
			out = append(out, p.bth(t).PSN)
		}
	}
	return out
}

// Retry counter scope: four packets time out in one round. The spec counts
// retries per connection, so with a limit of 3 the QP fails; counted per
// packet (the option, vcluster's earlier rule) each packet has had one
// timeout and the QP stays READY.
func TestSpecRetryScopeOneRound(t *testing.T) {
	for _, sc := range []RetryScope{RetryConnection, RetryPacket} {
		t.Run(string(sc), func(t *testing.T) {
			cfg := smallCfg()
			cfg.RetryScope = sc
			cfg.RetryLinear, cfg.RetryExp = 3, 0
			cfg.TLPFactor, cfg.ProbeInterval = 0, 1<<40
			a, b := newPair(t, cfg, 1<<20)
			a.write(b, 1, verbs.OpWrite, 0, 4*pmtu, 0)
			if n := len(a.drain(0, 0xf)); n != 4 {
				t.Fatalf("sent %d packets", n)
			}
			a.q.Tick(a.q.rto)
			if n := a.q.Stats().Timeouts; n != 4 {
				t.Fatalf("%d timeouts, want 4", n)
			}
			want := verbs.QPError
			if sc == RetryPacket {
				want = verbs.QPReady
			}
			if a.q.State() != want {
				t.Fatalf("QP %v after 4 timeouts with limit 3, want %v", a.q.State(), want)
			}
			if want == verbs.QPError {
				wantComps(t, a.comps(), verbs.Completion{WRID: 1, QPN: qpnA, Op: verbs.OpWrite, Status: verbs.StatusRetryExceeded})
			}
		})
	}
}

// Per connection, a packet's backoff still follows its own attempts (a
// retransmission's timer starts from the base RTO), and a newly
// acknowledged PSN — here a selective ack — resets the counter.
func TestSpecRetryConnectionBackoffAndReset(t *testing.T) {
	cfg := smallCfg()
	cfg.RetryLinear, cfg.RetryExp = 1, 5 // limit 6
	cfg.TLPFactor, cfg.ProbeInterval = 0, 1<<40
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 4*pmtu, 0)
	a.drain(0, 0xf)
	rto := a.q.rto
	a.q.Tick(rto) // 4 timeouts: the connection's counter is 4
	rt := a.drain(rto, 0xf)
	if len(rt) != 4 || a.q.retries != 4 {
		t.Fatalf("%d retransmissions, counter %d", len(rt), a.q.retries)
	}
	// Each packet has one attempt: its timer is the base RTO (RetryLinear
	// 1), not the backoff of the connection's 4.
	if dl, _ := a.q.Deadline(); dl != 2*rto {
		t.Fatalf("deadline %d, want %d (base RTO after the packet's first timeout)", dl, 2*rto)
	}
	// PSN 1001 is selectively acknowledged: forward progress.
	a.recv(rto+100, sack(t, SETH{EV: rt[1].tx.EV, CackPSN: 999, SackOffset: 2, Bitmap: 1, MPR: 1}, CCState{}))
	if a.q.retries != 0 {
		t.Fatalf("counter %d after a newly acknowledged PSN, want 0", a.q.retries)
	}
	a.q.Tick(2 * rto) // 3 more timeouts: 3 ≤ 6 (without the reset, 7 > 6)
	if a.q.State() != verbs.QPReady || a.q.retries != 3 {
		t.Fatalf("QP %v, counter %d", a.q.State(), a.q.retries)
	}
}

// Dynamic MPR: the requester follows the MPR of the latest SACK. Before,
// SETH.MPR was never read: after a SACK with cack 1009 and MPR 1 the
// requester sent up to PSN 1521 (cack + the negotiated 4 units) instead of
// 1137.
func TestSpecDynamicMPR(t *testing.T) {
	cfg := smallCfg()
	cfg.MPR = 4
	cfg.DisableCC = true
	cfg.NSCC.MaxCwnd = 1 << 30
	a, b := newPair(t, cfg, 16<<20)
	a.write(b, 1, verbs.OpWrite, 0, 2000*pmtu, 0)
	if got := psns(t, a.drain(0, 0xf)); len(got) != 512 || got[511] != 1511 {
		t.Fatalf("first window: %d packets", len(got))
	}
	ev := a.q.evs.evs[0].ev
	a.recv(10, sack(t, SETH{EV: ev, CackPSN: 1009, SackOffset: 1, MPR: 1}, CCState{}))
	if got := psns(t, a.drain(10, 0xf)); len(got) != 0 {
		t.Fatalf("after a SACK with cack 1009 and MPR 1, sent PSNs %d..%d, want none (limit 1137, already passed)", got[0], got[len(got)-1])
	}
	a.recv(20, sack(t, SETH{EV: ev, CackPSN: 1450, SackOffset: 1, MPR: 1}, CCState{}))
	if got := psns(t, a.drain(20, 0xf)); len(got) == 0 || got[0] != 1512 || got[len(got)-1] != 1450+128 {
		t.Fatalf("after cack 1450 with MPR 1: %v, want 1512..%d", got, 1450+128)
	}
	// A larger MPR than negotiated does not widen the window beyond it.
	a.recv(30, sack(t, SETH{EV: ev, CackPSN: 1460, SackOffset: 1, MPR: 8}, CCState{}))
	if got := psns(t, a.drain(30, 0xf)); len(got) == 0 || got[len(got)-1] != 1460+512 {
		t.Fatalf("after MPR 8 (negotiated 4): last PSN %v, want %d", got, 1460+512)
	}
}

// The spec's fast-loss rule reads the responder's out-of-order count
// (CC_STATE): at the threshold (here SleekMinPackets 5) it enters loss
// recovery and retransmits the unacknowledged PSNs from cack up to one
// cwnd, each once; recovery ends when cack reaches the highest PSN sent
// at its start. The per-hole option decides from the bitmap instead.
// Before, the out-of-order count was never read.
func TestSpecSleekOOO(t *testing.T) {
	for _, ld := range []LossDetection{LossOOO, LossPerHole} {
		t.Run(string(ld), func(t *testing.T) {
			cfg := smallCfg()
			cfg.LossDetection = ld
			cfg.SleekFactor = 0.01 // threshold = SleekMinPackets (5)
			cfg.TLPFactor = 0
			cfg.DisableCC = true
			cfg.NSCC.MaxCwnd = 16 * pmtu // cwnd 16 packets
			a, b := newPair(t, cfg, 1<<20)
			a.write(b, 1, verbs.OpWrite, 0, 40*pmtu, 0)
			pa := a.drain(0, 0xf)
			if len(pa) != 16 {
				t.Fatalf("sent %d, cwnd 16", len(pa))
			}
			ev := pa[1].tx.EV
			// 1001..1003 arrived (3 packets: below the per-hole threshold
			// of 5 later ones); the responder counts 5 out of order.
			a.recv(100, sack(t, SETH{EV: ev, CackPSN: 999, SackOffset: 2, Bitmap: 0b111, MPR: 1}, CCState{OOOCount: 5}))
			got := psns(t, a.drain(100, 0xf))
			if ld == LossPerHole {
				// Three new packets (the window opened by three acks), no
				// retransmission.
				if len(got) != 3 || got[0] != 1016 || a.q.MRCStats().FastRetransmits != 0 {
					t.Fatalf("per-hole: sent %v", got)
				}
				return
			}
			// Recovery: 1000 and 1004..1015 (unacknowledged, in [cack+1,
			// cack+1+16)) go again; recovery ends once cack reaches 1015.
			want := []uint32{1000}
			for p := uint32(1004); p < 1016; p++ {
				want = append(want, p)
			}
			// Then new data: the retransmissions left room in cwnd.
			want = append(want, 1016, 1017, 1018)
			if len(got) != len(want) {
				t.Fatalf("recovery sent %v, want %v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("recovery sent %v, want %v", got, want)
				}
			}
			if n := a.q.MRCStats().FastRetransmits; n != 13 {
				t.Fatalf("%d fast retransmissions, want 13", n)
			}
			if !a.q.recovery || a.q.recEnd != 1016 || a.q.MRCStats().LossRecoveries != 1 {
				t.Fatalf("recovery %v end %d", a.q.recovery, a.q.recEnd)
			}
			// A second SACK in recovery retransmits nothing twice.
			a.recv(200, sack(t, SETH{EV: ev, CackPSN: 999, SackOffset: 2, Bitmap: 0b111, MPR: 1}, CCState{OOOCount: 5}))
			if got := psns(t, a.drain(200, 0xf)); len(got) != 0 {
				t.Fatalf("second SACK in recovery sent %v", got)
			}
			// cack reaches 1015: recovery ends.
			a.recv(300, sack(t, SETH{EV: ev, CackPSN: 1015, SackOffset: 1, MPR: 1}, CCState{}))
			if a.q.recovery {
				t.Fatal("still in recovery with cack at the recovery end")
			}
		})
	}
}

// The fast-loss rule reads a SACK's out-of-order count against that SACK's
// own cumulative ack, as htsim's runSleek(ooo, cum_ack) does. SACKs are
// sprayed and can arrive out of order: here a SACK that left the responder
// before 1000..1015 were all received (cack 999, 1001..1007 seen, count 7)
// arrives after the one that acknowledged them all (cack 1015), when
// 1016..1031 have just been sent. Its count is about [1000, 1016), all
// acknowledged by now, so nothing is resent. Before, its range started at
// the QP's newer cack and the 16 packets just sent went again.
func TestSpecSleekStaleSACK(t *testing.T) {
	cfg := smallCfg()
	cfg.LossDetection = LossOOO
	cfg.SleekFactor = 0.01 // threshold = SleekMinPackets (5)
	cfg.TLPFactor = 0
	cfg.DisableCC = true
	cfg.NSCC.MaxCwnd = 16 * pmtu // cwnd 16 packets
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 64*pmtu, 0)
	pa := a.drain(0, 0xf)
	if len(pa) != 16 {
		t.Fatalf("sent %d, cwnd 16", len(pa))
	}
	ev := pa[1].tx.EV
	a.recv(100, sack(t, SETH{EV: ev, CackPSN: 1015, SackOffset: 1, MPR: 1}, CCState{}))
	if got := psns(t, a.drain(100, 0xf)); len(got) != 16 || got[0] != 1016 || got[15] != 1031 {
		t.Fatalf("after cack 1015: sent %v, want 1016..1031", got)
	}
	a.recv(101, sack(t, SETH{EV: ev, CackPSN: 999, SackOffset: 2, Bitmap: 0b1111111, MPR: 1}, CCState{OOOCount: 7}))
	if got := psns(t, a.drain(101, 0xf)); len(got) != 0 {
		t.Fatalf("the overtaken SACK resent %v, sent after it left the responder", got)
	}
	if n := a.q.MRCStats().FastRetransmits; n != 0 {
		t.Fatalf("%d fast retransmissions, want 0", n)
	}
}

// With SkipDuration > 0 only GOOD EVs carry data: an EV put in SKIP is
// replaced in the active set by a GOOD backup of the same plane. Before,
// it stayed in the active set (and with every active EV in SKIP the plane
// sprayed SKIP EVs while GOOD backups sat idle).
func TestSpecSkipReplacedByGoodBackup(t *testing.T) {
	cfg := smallCfg()
	cfg.SkipDuration = 1_000_000
	a, _ := newPair(t, cfg, 1<<20)
	const plane = 1
	act := activeOf(a.q, plane)
	ev := act[0]
	a.recv(10, sackWithM(t, ev, PathSkipOnce, false, 999))
	if st, _ := a.q.EVState(ev); st != EVSkip {
		t.Fatalf("EV %v after SKIP_ONCE", st)
	}
	now := activeOf(a.q, plane)
	if len(now) != len(act) {
		t.Fatalf("active set %d, was %d", len(now), len(act))
	}
	for _, e := range now {
		if e == ev {
			t.Fatal("the SKIP EV is still in the active set with GOOD backups available")
		}
		if st, _ := a.q.EVState(e); st != EVGood || evPlane(e) != plane {
			t.Fatalf("active EV %#x is %v on plane %d", e, st, evPlane(e))
		}
	}
}

// RTT samples come from first transmissions without an rtx echo and from
// single retransmissions with one (htsim's validateSendTs). Before, a
// retransmission never gave a sample.
func TestSpecRTTFromSingleRetransmission(t *testing.T) {
	a, b := newPair(t, smallCfg(), 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 2*pmtu, 0)
	pa := a.drain(0, 0xf)
	b.q.Receive(10, trim(pa[0], false))
	a.recv(20, b.drain(10, 0xf)...) // NACK TRIMMED: retransmit
	rt := a.drain(100, 0xf)
	if len(rt) != 1 || !rt[0].bth(t).Rtx {
		t.Fatalf("%d retransmissions", len(rt))
	}
	b.recv(1100, rt...)
	before := a.q.Stats().RTTSamples
	a.recv(2100, b.drain(1100, 0xf)...) // SACK with rtx echo
	st := a.q.Stats()
	if st.RTTSamples != before+1 || st.LastRTT != 2000 {
		t.Fatalf("samples %d → %d, last RTT %d: want one sample of 2000 ns from the retransmission", before, st.RTTSamples, st.LastRTT)
	}
}

// NSCC's acknowledged bytes are the responder's newly received bytes
// (CC_STATE, 256-B units modulo 2^24), as htsim's recvd_bytes: a SACK
// older than the last adds nothing, and the counter wraps. Before, the
// received bytes were never read (NSCC got the bytes the bitmap newly
// acknowledged).
func TestSpecRcvdBytesFeedNSCC(t *testing.T) {
	cfg := smallCfg()
	cfg.NSCC.DisableQA = true
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, 8*pmtu, 0)
	pa := a.drain(0, 0xf)
	ev := pa[0].tx.EV
	step := func(now int64, units uint32, want float64) {
		t.Helper()
		before := a.q.cc.achieved
		a.recv(now, sack(t, SETH{EV: ev, CackPSN: 999, SackOffset: 1, MPR: 1, AckOffset: -1}, CCState{RcvdBytes: units}))
		if got := a.q.cc.achieved - before; got != want {
			t.Fatalf("received-bytes %#x: NSCC got %g bytes, want %g", units, got, want)
		}
	}
	step(10, 16, 16*256) // 4 KiB received, nothing acknowledged by the bitmap
	step(20, 8, 0)       // reordered: older than the last
	step(30, 0x700000, (0x700000-16)*256)
	step(40, 0xe00000, 0x700000*256)
	step(50, 0x10, (0x1000000-0xe00000+0x10)*256) // wrapped
}

// EV state changes are visible to the controller (PollEVChanges), with
// their cause — the ones it can see: into or out of ASSUMED_BAD or DENIED
// (GOOD ⇄ SKIP stays inside the NIC); the buffer is bounded and, once
// drained, records without allocating.
func TestSpecEVChanges(t *testing.T) {
	cfg := smallCfg()
	cfg.TLPFactor = 0
	a, b := newPair(t, cfg, 1<<20)
	a.write(b, 1, verbs.OpWrite, 0, pmtu, 0)
	p := a.drain(0, 0xf)[0]
	a.recv(50, sackWithM(t, p.tx.EV, PathSkipOnce, false, 999))
	dl, _ := a.q.Deadline()
	a.q.Tick(dl) // the packet times out: its EV was SKIP, so SKIP → ASSUMED_BAD
	other := activeOf(a.q, 0)[0]
	if err := a.q.DenyEV(other); err != nil {
		t.Fatal(err)
	}
	got := a.q.PollEVChanges(nil)
	pl := evPlane(p.tx.EV)
	want := []EVChange{ // not the GOOD → SKIP at 50
		{At: dl, EV: p.tx.EV, Plane: pl, From: EVSkip, To: EVAssumedBad, Cause: CauseTimeout},
		{At: dl, EV: other, Plane: 0, From: EVGood, To: EVDenied, Cause: CauseDeny},
	}
	if len(got) != len(want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s := CauseTimeout.String(); s != "timeout" {
		t.Fatalf("CauseTimeout.String() = %q", s)
	}
	if n := len(a.q.PollEVChanges(nil)); n != 0 {
		t.Fatalf("%d changes after draining", n)
	}
	// A storm nobody drains: bounded, the rest counted.
	for i := 0; i < MaxEVChanges; i++ {
		a.q.AllowEV(other)
		a.q.DenyEV(other)
	}
	if n, d := len(a.q.evs.changes), a.q.MRCStats().EVChangesDropped; n != MaxEVChanges || d != MaxEVChanges {
		t.Fatalf("kept %d (max %d), dropped %d", n, MaxEVChanges, d)
	}
	dst := a.q.PollEVChanges(nil)
	if allocs := testing.AllocsPerRun(100, func() {
		a.q.AllowEV(other)
		a.q.DenyEV(other)
		dst = a.q.PollEVChanges(dst[:0])
	}); allocs != 0 {
		t.Fatalf("%v allocations per change once drained", allocs)
	}
}

func TestSpecConfigValidate(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"RetryScope":    func(c *Config) { c.RetryScope = "qp" },
		"LossDetection": func(c *Config) { c.LossDetection = "" },
	} {
		c := DefaultConfig()
		mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "Config."+name) || !strings.Contains(err.Error(), "must be") {
			t.Errorf("%s: %v, want it rejected by name with the allowed values", name, err)
		}
	}
	c := DefaultConfig()
	if c.MPR != 1 || c.RetryScope != RetryConnection || c.LossDetection != LossOOO || c.rto() != 32768 {
		t.Fatalf("defaults: MPR %d, %s, %s, RTO %d", c.MPR, c.RetryScope, c.LossDetection, c.rto())
	}
}
