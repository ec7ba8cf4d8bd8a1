package mrc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/vcluster/vcluster/verbs"
)

// TestEVTranscript runs testdata/ev.txt: the EV state machine (ev.go) and
// spraying (spray.go) of one QP, driven by the inputs the requester feeds
// them. EVs are named by their index in the pool (evN); each plane owns a
// contiguous range of them. Commands:
//
//	new [planes=P (2)] [evs=N (128)] [active=A (4)] [min-active=M (1)] [skip-duration=ns]
//	    [reshuffle=ns (1 s)] [probe-interval=ns] [loss-threshold=K] [paths=C]
//	                               a connected QP; prints its pool
//	pick t=T [n=K] [free=MASK] [exclude=I] [avoid=PLANE]
//	                               the EVs of K data packets sent at T
//	ecn ev=I t=T                   SACK with M = SKIP_ONCE (ECN echo)
//	always-skip ev=I t=T           SACK with M = ALWAYS_SKIP
//	trim ev=I t=T                  NACK TRIMMED on it
//	timeout ev=I t=T               ACK timeout of a packet sent on it
//	silent-loss ev=I t=T           the fast-loss rule found a loss on it
//	delivered ev=I                 a first transmission on it was acknowledged
//	probe t=T                      the QP's probe timer at T: lists probes queued
//	probe-reply ev=I t=T [skip]    a probe answered (with M = SKIP_ONCE: skip)
//	deny ev=I / allow ev=I         controller commands (at the QP's latest input time)
//	plane p=P up|down              this side's port of plane P
//	pool                           prints the pool
//	changes                        prints and forgets the changes a controller sees
//
// Commands that change state print the pool afterwards.
func TestEVTranscript(t *testing.T) {
	datadriven.RunTest(t, "testdata/ev.txt", func(t *testing.T, d *datadriven.TestData) string {
		return evCmd(t, d)
	})
}

var evQP *QP // the QP of the current transcript (commands run in file order)

func evCmd(t *testing.T, d *datadriven.TestData) string {
	intArg := func(key string, def int64) int64 {
		if !d.HasArg(key) {
			return def
		}
		var v int64
		d.ScanArgs(t, key, &v)
		return v
	}
	if d.Cmd == "new" {
		cfg := DefaultConfig()
		cfg.Planes = int(intArg("planes", 2))
		cfg.EVsPerQP = int(intArg("evs", 128))
		cfg.ActiveSetSize = int(intArg("active", 4))
		cfg.EVMinActive = int(intArg("min-active", 1))
		cfg.SkipDuration = intArg("skip-duration", cfg.SkipDuration)
		cfg.ReshuffleInterval = intArg("reshuffle", 1_000_000_000) // no reshuffle: a fixed scan order
		cfg.ProbeInterval = intArg("probe-interval", cfg.ProbeInterval)
		cfg.EVLossThreshold = int(intArg("loss-threshold", int64(cfg.EVLossThreshold)))
		cfg.PathsPerPlane = int(intArg("paths", int64(cfg.PathsPerPlane)))
		if err := cfg.Validate(); err != nil {
			d.Fatalf(t, "%v", err)
		}
		var mem verbs.Memory
		evQP = New(cfg, &mem, 1, 1)
		if err := evQP.Connect(verbs.QPAttrs{QPN: 1}, verbs.QPAttrs{Host: 1, QPN: 2}); err != nil {
			t.Fatal(err)
		}
		return evPoolString(evQP)
	}
	q := evQP
	if q == nil {
		d.Fatalf(t, "%s before new", d.Cmd)
	}
	p := &q.evs
	now := intArg("t", p.clock)
	p.clock = now
	ev := int32(intArg("ev", -1))
	if d.HasArg("ev") && (ev < 0 || int(ev) >= len(p.evs)) {
		d.Fatalf(t, "no EV %d", ev)
	}
	var out strings.Builder
	switch d.Cmd {
	case "pick":
		free := uint32(intArg("free", 0xffff))
		for k := int64(0); k < intArg("n", 1); k++ {
			i := p.pick(now, free, int32(intArg("exclude", -1)), int(intArg("avoid", -1)))
			if i < 0 {
				out.WriteString("none ")
				continue
			}
			fmt.Fprintf(&out, "ev%d ", i)
		}
		out.WriteString("\n")
	case "ecn":
		p.feedback(ev, PathSkipOnce, now)
	case "always-skip":
		p.feedback(ev, PathAlwaysSkip, now)
	case "trim":
		p.skip(ev, now, CauseTrim)
	case "timeout":
		p.markBad(ev, now, CauseTimeout)
	case "silent-loss":
		p.silentLoss(ev, now)
		fmt.Fprintf(&out, "losses in a row: %d\n", p.evs[ev].losses)
	case "delivered":
		p.delivered(ev)
		return fmt.Sprintf("losses in a row: %d", p.evs[ev].losses)
	case "probe":
		// Tick runs probe so while the requester has work.
		if p.nBad > 0 && now >= p.nextProbeAt {
			q.probe(now)
		}
		for q.ctrl.Len() > 0 {
			e := q.ctrl.Pop()
			fmt.Fprintf(&out, "probe on ev%d seq %d\n", p.lookup(e.ev), e.seq)
		}
		if p.nBad > 0 {
			fmt.Fprintf(&out, "next probe at %d\n", p.nextProbeAt)
		}
		return strings.TrimSpace(out.String())
	case "probe-reply":
		p.probeAnswered(ev, d.HasArg("skip"), now)
	case "deny":
		if err := q.DenyEV(p.evs[ev].ev); err != nil {
			return err.Error()
		}
	case "allow":
		if err := q.AllowEV(p.evs[ev].ev); err != nil {
			return err.Error()
		}
	case "plane":
		q.SetPlaneStatus(int(intArg("p", 0)), !d.HasArg("down"))
	case "pool":
	case "changes":
		for _, c := range q.PollEVChanges(nil) {
			fmt.Fprintf(&out, "t=%d ev%d plane %d %v → %v (%v)\n", c.At, p.lookup(c.EV), c.Plane, c.From, c.To, c.Cause)
		}
		if out.Len() == 0 {
			return "none"
		}
		return strings.TrimSpace(out.String())
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	if err := q.checkInvariants(); err != nil {
		t.Error(err)
	}
	out.WriteString(evPoolString(q))
	return out.String()
}

// evPoolString prints each plane's active set in scan order (the cursor
// marked ^ before the next EV to scan) with states (SKIP* is a SKIP EV the
// scan has passed over: GOOD at the next rotation), and its backups: their
// number and those that are not GOOD.
func evPoolString(q *QP) string {
	p := &q.evs
	var b strings.Builder
	st := func(i int32) string {
		e := &p.evs[i]
		s := e.state.String()
		if e.state == EVSkip && e.passed {
			s += "*"
		}
		if p.structured {
			return fmt.Sprintf("ev%d/c%d:%s", i, evChoice(e.ev), s)
		}
		return fmt.Sprintf("ev%d:%s", i, s)
	}
	for pl := range p.planes {
		ps := &p.planes[pl]
		updown := "up"
		if !ps.up {
			updown = "down"
		}
		fmt.Fprintf(&b, "plane %d %s: active", pl, updown)
		for k, i := range ps.active {
			if k == ps.cursor {
				b.WriteString(" ^")
			} else {
				b.WriteString(" ")
			}
			b.WriteString(st(i))
		}
		if ps.cursor >= len(ps.active) {
			b.WriteString(" ^")
		}
		// Backups: how many, and those not GOOD by name.
		n, other := 0, ""
		for k := ps.first; k < ps.first+ps.n; k++ {
			if !p.evs[k].active {
				n++
				if p.evs[k].state != EVGood {
					other += " " + st(int32(k))
				}
			}
		}
		fmt.Fprintf(&b, " | %d backups%s\n", n, other)
	}
	fmt.Fprintf(&b, "usable %d, assumed bad %d", p.usable, p.nBad)
	return b.String()
}
