package roce

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// The transcripts in testdata/dcqcn.txt and testdata/timely.txt drive one
// reaction point by hand and print its state after each input; rewrite
// them with go test ./roce -run Transcript -rewrite.
//
// Commands (times take ns, us or ms; rates b/s or a G/M suffix):
//
//	new preset=NAME [line=RATE] [bytecounter=BYTES] [f=N] [clamp=BOOL]
//	cnp at=TIME                        DCQCN: a CNP arrives
//	sent bytes=N                       DCQCN: a data packet was sent (byte counter)
//	rate at=TIME                       run the timers due by TIME, print the rate
//	tick from=TIME to=TIME every=TIME  rate at each step, one line per change
//	rtt rtt=TIME ack=SEQ max=SEQ       TIMELY: an RTT sample from an ACK
func TestDCQCNTranscript(t *testing.T)  { runCCTranscript(t, "testdata/dcqcn.txt") }
func TestTimelyTranscript(t *testing.T) { runCCTranscript(t, "testdata/timely.txt") }

func runCCTranscript(t *testing.T, path string) {
	var cfg *Config
	var cc congestion
	datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
		arg := func(key string) string {
			for _, a := range td.CmdArgs {
				if a.Key == key && len(a.Vals) > 0 {
					return a.Vals[0]
				}
			}
			return ""
		}
		must := func(key string) string {
			v := arg(key)
			if v == "" {
				t.Fatalf("%s: %s= missing", td.Pos, key)
			}
			return v
		}
		if td.Cmd != "new" && cc == nil {
			t.Fatalf("%s: %s before new", td.Pos, td.Cmd)
		}
		switch td.Cmd {
		case "new":
			c := DefaultConfig()
			if v := arg("line"); v != "" {
				c.LineRateBps = parseRate(t, v)
			}
			if err := c.SetPreset(must("preset")); err != nil {
				t.Fatal(err)
			}
			if v := arg("bytecounter"); v != "" {
				c.DCQCN.ByteCounter = int64(parseRate(t, v))
			}
			if v := arg("f"); v != "" {
				c.DCQCN.F, _ = strconv.Atoi(v)
			}
			if v := arg("clamp"); v != "" {
				c.DCQCN.ClampTargetRate = v == "true"
			}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg = &c
			cc = newCongestion(cfg)
			return ccState(cc)
		case "cnp":
			cc.onCNP(parseTime(t, must("at")))
			return ccState(cc)
		case "sent":
			n, err := strconv.Atoi(must("bytes"))
			if err != nil {
				t.Fatal(err)
			}
			cc.onSent(n)
			return ccState(cc)
		case "rate":
			cc.rate(parseTime(t, must("at")))
			return ccState(cc)
		case "tick":
			from, to, every := parseTime(t, must("from")), parseTime(t, must("to")), parseTime(t, must("every"))
			var b strings.Builder
			last := ""
			for at := from; at <= to; at += every {
				cc.rate(at)
				if s := ccState(cc); s != last {
					fmt.Fprintf(&b, "%s: %s", fmtTime(at), s)
					last = s
				}
			}
			return b.String()
		case "rtt":
			ack, _ := strconv.ParseUint(must("ack"), 10, 64)
			mx, _ := strconv.ParseUint(must("max"), 10, 64)
			cc.onRTT(parseTime(t, must("rtt")), ack, mx)
			return ccState(cc)
		}
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
		return ""
	})
}

// ccState prints what a reaction point's rules act on.
func ccState(cc congestion) string {
	switch c := cc.(type) {
	case *dcqcn:
		s := fmt.Sprintf("rc=%s rt=%s alpha=%.6f stage=T%d/BC%d", fmtRate(c.rc), fmtRate(c.rt), c.alpha, c.tStage, c.bStage)
		if c.incArmed {
			s += " increase@" + fmtTime(c.incNext)
		}
		return s + "\n"
	case *timely:
		return fmt.Sprintf("rate=%s rtt_diff=%.1fns stage=%d next_update_seq=%d\n", fmtRate(c.cur), c.rttDiff, c.negCount, c.nextSeq)
	}
	return fmt.Sprintf("rate=%s\n", fmtRate(float64(cc.rateBps())))
}

func fmtRate(r float64) string { return strconv.FormatFloat(r/1e9, 'f', 6, 64) + "G" }

func fmtTime(ns int64) string {
	if ns%1000 == 0 {
		return strconv.FormatInt(ns/1000, 10) + "us"
	}
	return strconv.FormatInt(ns, 10) + "ns"
}

func parseTime(t *testing.T, s string) int64 {
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "ns"):
		s = s[:len(s)-2]
	case strings.HasSuffix(s, "us"):
		s, mul = s[:len(s)-2], 1000
	case strings.HasSuffix(s, "ms"):
		s, mul = s[:len(s)-2], 1_000_000
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v * mul
}

func parseRate(t *testing.T, s string) int64 {
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		s, mul = s[:len(s)-1], 1_000_000_000
	case strings.HasSuffix(s, "M"):
		s, mul = s[:len(s)-1], 1_000_000
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("rate %q: %v", s, err)
	}
	return v * mul
}
