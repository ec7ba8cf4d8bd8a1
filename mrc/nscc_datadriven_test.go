package mrc

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestNSCCTranscript runs testdata/nscc.txt: NSCC (nscc.go) fed the inputs
// the requester gives it, printing the window after each. Times are ns,
// sizes bytes. Commands:
//
//	init [rtt=ns (10 µs)] [link=bps (400e9)] [mtu=B (4096)] [no-trim]
//	     [maxcwnd=B] [target=ns] [no-qa] [disabled]
//	                            a fresh controller; prints its constants
//	set [cwnd=B] [avg-delay=ns] put the controller in a state (set-up only)
//	ack t=T bytes=B [delay=ns] [ecn] [inflight=B] [n=K] [step=ns]
//	                            K SACKs (1) at T, T+step, …, each newly
//	                            acknowledging B bytes; delay is the RTT
//	                            sample's queueing delay (none: avg_delay
//	                            stands in); prints each one's quadrant
//	rtt sample=ns               a raw RTT sample (base_rtt follows its minimum)
//	trim t=T bytes=B [inflight=B]  a NACK TRIMMED of B bytes
//	timeout bytes=B             an ACK timeout of a packet of B bytes
//	penalty pen=P               the SACK's rcv_cwnd_pen (0..127)
//	state                       prints the state
func TestNSCCTranscript(t *testing.T) {
	var c nscc
	datadriven.RunTest(t, "testdata/nscc.txt", func(t *testing.T, d *datadriven.TestData) string {
		return nsccCmd(t, d, &c)
	})
}

var quadrantNames = [numQuadrants]string{"none", "fair-increase", "proportional", "fast-increase",
	"multiplicative-decrease", "no-change", "quick-adapt", "ignored"}

func nsccCmd(t *testing.T, d *datadriven.TestData, c *nscc) string {
	num := func(key string, def float64) float64 {
		if !d.HasArg(key) {
			return def
		}
		var v string
		d.ScanArgs(t, key, &v)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		return f
	}
	var out strings.Builder
	switch d.Cmd {
	case "init":
		cfg := DefaultConfig()
		cfg.BaseRTT = int64(num("rtt", float64(cfg.BaseRTT)))
		cfg.LinkBps = int64(num("link", float64(cfg.LinkBps)))
		cfg.PMTU = int(num("mtu", float64(cfg.PMTU)))
		cfg.Trimming = !d.HasArg("no-trim")
		cfg.NSCC.MaxCwnd = int64(num("maxcwnd", 0))
		cfg.NSCC.TargetDelay = int64(num("target", 0))
		cfg.NSCC.DisableQA = d.HasArg("no-qa")
		p := ResolveNSCC(&cfg)
		c.init(p, d.HasArg("disabled"))
		fmt.Fprintf(&out, "mtu %.0f, bdp %.0f, maxwnd %.0f, base_rtt %.0f, target %.0f\n", p.MTU, p.BDP, p.MaxWnd, p.BaseRTT, p.Target)
		fmt.Fprintf(&out, "alpha %.4g, fi %.4g, eta %.4g, fi_scale %.4g, gamma %g, delay_alpha %g, max_md_jump %g\n",
			p.Alpha, p.Fi, p.Eta, p.FiScale, p.Gamma, p.DelayAlpha, p.MaxMDJump)
		fmt.Fprintf(&out, "quick adapt: gate maxwnd>>%d, threshold %.0f; fulfill after %.0f bytes or %.0f ns\n",
			p.QAGate, p.QAThreshold, p.AdjBytes, p.AdjPeriod)
	case "set":
		c.cwnd = num("cwnd", c.cwnd)
		c.avgDelay = num("avg-delay", c.avgDelay)
	case "ack":
		now, step := int64(num("t", 0)), int64(num("step", 0))
		var qs []string
		for k := 0; k < int(num("n", 1)); k++ {
			q := c.onAck(now+int64(k)*step, int64(num("bytes", 0)), int64(num("delay", 0)), d.HasArg("delay"),
				d.HasArg("ecn"), int64(num("inflight", 0)))
			if n := len(qs); n > 0 && strings.HasPrefix(qs[n-1], quadrantNames[q]) {
				// Runs of one quadrant print once, with their length.
				var m int
				if _, err := fmt.Sscanf(strings.TrimPrefix(qs[n-1], quadrantNames[q]), " ×%d", &m); err == nil {
					qs[n-1] = fmt.Sprintf("%s ×%d", quadrantNames[q], m+1)
				} else {
					qs[n-1] = quadrantNames[q] + " ×2"
				}
				continue
			}
			qs = append(qs, quadrantNames[q])
		}
		fmt.Fprintf(&out, "%s\n", strings.Join(qs, ", "))
	case "rtt":
		c.onRTT(int64(num("sample", 0)))
	case "trim":
		fired := c.onTrim(int64(num("t", 0)), int64(num("bytes", 0)), int64(num("inflight", 0)))
		fmt.Fprintf(&out, "quick adapt fired: %v\n", fired)
	case "timeout":
		c.onTimeout(int64(num("bytes", 0)))
	case "penalty":
		c.onPenalty(uint8(num("pen", 0)))
	case "state":
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	fmt.Fprintf(&out, "cwnd %.1f (window %d, maxwnd %.0f, base_rtt %.0f), pending increase %.4g, avg_delay %.1f\n",
		c.cwnd, c.window(), c.p.MaxWnd, c.p.BaseRTT, c.inc, c.avgDelay)
	fmt.Fprintf(&out, "received %.0f since fulfill (last adjust %d), fast increase %v (count %.0f), last decrease %d\n",
		c.received, c.lastAdj, c.fastInc, c.fiCount, c.lastDec)
	fmt.Fprintf(&out, "quick adapt: period ends %d, achieved %.0f, trigger %v, ignoring %.0f of %.0f",
		c.qaEnd, c.achieved, c.qaTrigger, c.bytesIgnored, c.bytesToIgnore)
	return out.String()
}
