package mprdma

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vcluster/vcluster/ib/orderre"
)

// TestResponderTranscripts runs testdata/responder_*.txt: the responder (its bitmap,
// loss detection and repair clocks) step by step. PSNs are relative to
// the initial PSN 0. Commands:
//
//	new [scheme=orderre|mprdma|random] [L=64] [bdp=16] [lfast=N] [delta=N]
//	    [omax=N] [window=N] [threshold=N] [rto=ns] [repair-timeout=ns]
//	    [base-rtt=ns] [initial-psn=N]
//	                             a connected responder (0: derived); prints
//	                             the derived thresholds
//	recv t=T psn=(A,B,C..D,…) [retx] [ce] [path=P]
//	                             data packets arriving at T in that order
//	                             (C..D: C up to D); retx flags them FReTx
//	tick t=T                     the QP's timer at T
//	repairs                      prints and forgets the Repair records
//
// recv and tick print the control packets the responder queued (ACKs
// only as a count unless verbose is given), then its state:
//
//	ePSN, rcv_oo_h, occupancy, ob_max, L_max (the loss threshold in use)
//	holes: each missing PSN in [ePSN, rcv_oo_h]; "lost@T" once judged
//	       lost at T, "armed" while its repair clock runs
//	the counters that moved from zero
func TestResponderTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/responder_*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, path := range files {
		var h *respHarness
		var now int64
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			intArg := func(key string, def int64) int64 {
				if !d.HasArg(key) {
					return def
				}
				var v int64
				d.ScanArgs(t, key, &v)
				return v
			}
			if d.Cmd == "new" {
				cfg := respConfig(SchemeOrderRE)
				if d.HasArg("scheme") {
					var s string
					d.ScanArgs(t, "scheme", &s)
					switch s {
					case KindMPRDMA:
						cfg.Scheme = SchemeMPRDMA
					case KindRandom:
						cfg.Scheme = SchemeRandom
					case KindOrderRE:
					default:
						d.Fatalf(t, "unknown scheme %q", s)
					}
				}
				cfg.BitmapEntries = int(intArg("L", int64(cfg.BitmapEntries)))
				cfg.BDPPackets = int(intArg("bdp", int64(cfg.BDPPackets)))
				cfg.LFast = int(intArg("lfast", 0))
				cfg.Delta = int(intArg("delta", 0))
				cfg.OMax = int(intArg("omax", 0))
				cfg.DegreeWindow = int(intArg("window", 0))
				cfg.LossThreshold = int(intArg("threshold", 0))
				cfg.RTO = intArg("rto", cfg.RTO)
				cfg.RepairTimeout = intArg("repair-timeout", 0)
				cfg.BaseRTT = intArg("base-rtt", 0)
				h = newRespHarness(t, cfg, uint32(intArg("initial-psn", 0)))
				now = 0
				c := h.cfg
				return fmt.Sprintf("%s L=%d lfast=%d delta=%d omax=%d window=%d threshold=%d rto=%d repair-timeout=%d base-rtt=%d\n%s",
					c.Scheme, c.BitmapEntries, c.LFast, c.Delta, c.OMax, c.DegreeWindow, c.LossThreshold, c.RTO, c.RepairTimeout, c.BaseRTT, respState(h))
			}
			if h == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			now = intArg("t", now)
			var out strings.Builder
			switch d.Cmd {
			case "recv":
				psns := psnList(t, d)
				var flags uint8
				if d.HasArg("retx") {
					flags = orderre.FlagFReTx
				}
				for _, psn := range psns {
					h.recv(now, respData{psn: psn, flags: flags, ce: d.HasArg("ce"), path: uint16(intArg("path", 0))})
				}
			case "tick":
				h.tick(now)
			case "repairs":
				for _, r := range h.r.pollRepairs(nil) {
					fmt.Fprintf(&out, "psn %d: lost@%d repaired@%d (%d ns) requests %d", r.PSN, r.DetectedAt, r.RepairedAt, r.RepairedAt-r.DetectedAt, r.Requests)
					if r.Spurious {
						out.WriteString(" spurious")
					}
					out.WriteByte('\n')
				}
				if out.Len() == 0 {
					return "none"
				}
				return out.String()
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			out.WriteString(respControl(h, now, d.HasArg("verbose")))
			out.WriteString(respState(h))
			return out.String()
		})
	}
}

// psnList reads psn=(A,B,C..D).
func psnList(t *testing.T, d *datadriven.TestData) []uint32 {
	for _, a := range d.CmdArgs {
		if a.Key != "psn" {
			continue
		}
		var out []uint32
		for _, v := range a.Vals {
			lo, hi, isRange := strings.Cut(v, "..")
			a, err := strconv.ParseUint(lo, 10, 32)
			b := a
			if err == nil && isRange {
				b, err = strconv.ParseUint(hi, 10, 32)
			}
			if err != nil || b < a {
				d.Fatalf(t, "bad psn %q", v)
			}
			for p := a; p <= b; p++ {
				out = append(out, uint32(p))
			}
		}
		return out
	}
	d.Fatalf(t, "recv needs psn=")
	return nil
}

// respControl prints the control packets queued since the last command:
// NAKs and FNACKs one a line, ACKs as a count with the fast/slow signals
// they carry (each ACK when verbose).
func respControl(h *respHarness, now int64, verbose bool) string {
	var b strings.Builder
	acks, reg, unreg := 0, 0, 0
	for _, c := range h.drain(now) {
		if c.kind() == "ACK" && !verbose {
			acks++
			switch {
			case c.flags&orderre.FlagRegister != 0:
				reg++
			case c.flags&orderre.FlagUnregister != 0:
				unreg++
			}
			continue
		}
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	if acks > 0 {
		fmt.Fprintf(&b, "%d ACKs", acks)
		if reg+unreg > 0 {
			fmt.Fprintf(&b, " (%d register, %d unregister)", reg, unreg)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// respState prints the responder's state.
func respState(h *respHarness) string {
	r := &h.r
	var b strings.Builder
	ooh := "-"
	if r.hi > 0 {
		ooh = strconv.FormatUint(r.hi-1, 10)
	}
	fmt.Fprintf(&b, "ePSN=%d rcv_oo_h=%s occupancy=%d ob_max=%d L_max=%d", r.ePSN, ooh, h.stats.BitmapOccupancy, r.deg.obMax(), r.threshold())
	if dl, ok := r.deadline(); ok {
		fmt.Fprintf(&b, " deadline=%d", dl)
	}
	b.WriteString("\nholes:")
	n := 0
	for seq := r.ePSN; seq < r.hi; seq++ {
		s := r.slot(seq)
		if s.flags&slotGot != 0 {
			continue
		}
		n++
		fmt.Fprintf(&b, " %d", seq)
		if s.flags&slotLost != 0 {
			fmt.Fprintf(&b, "(lost@%d", s.detectedAt)
			if s.flags&slotArmed != 0 {
				b.WriteString(",armed")
			}
			b.WriteString(")")
		}
	}
	if n == 0 {
		b.WriteString(" none")
	}
	st := h.stats
	var cs []string
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"losses", st.LossesDetected}, {"fnacks", st.FNACKsSent}, {"naks", st.NAKsSent}, {"repaired", st.Repaired},
		{"failures", st.RetxFailures}, {"spurious", st.SpuriousLosses}, {"overflows", st.BitmapOverflows}, {"dups", h.r.dups},
		{"fast", st.FastArrivals}, {"slow", st.SlowArrivals},
	} {
		if c.v != 0 {
			cs = append(cs, fmt.Sprintf("%s=%d", c.name, c.v))
		}
	}
	if len(cs) > 0 {
		b.WriteString("\n" + strings.Join(cs, " "))
	}
	return b.String() + "\n"
}
