package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/roce"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/verbs"
)

// timingRun moves n bytes in writes of w from host 0 to host dst over one
// QP and returns the one-way time to the WriteImm, the goodput and the
// requester's minimum RTT sample.
func timingRun(t *testing.T, sets []string, dst int, n, w uint64) (oneWay sim.Time, goodput float64, minRTT int64) {
	t.Helper()
	c, err := New(load(t, sets...), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Connect(0, dst)
	if err != nil {
		t.Fatal(err)
	}
	src, dr := c.Region(0, n, randomFill(3)), c.Region(dst, n, nil)
	tr, err := c.StartTransfer(ps[0], src, dr, n, w)
	if err != nil {
		t.Fatal(err)
	}
	c.Loop.RunWhile(func() bool { return !tr.Done() })
	if !tr.Done() || len(tr.Errors) > 0 {
		t.Fatalf("%v: transfer of %d B did not complete (%d errors)", sets, n, len(tr.Errors))
	}
	return tr.RecvImmAt - tr.Start, tr.GoodputBps(), ps[0].A.T.Stats().MinRTT
}

var timingTransports = map[string][]string{
	"mrc":  {"fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc"},
	"roce": {"fabric.preset=C", "fabric.hosts=16", "fabric.forwarding=ecmp", "transport.kind=roce"},
}

// The NIC's latencies add exactly tx + rx to a 2-byte WriteImm's one-way
// latency, and the switch latency once per switch (one within a T0,
// three across T1), for both transports; they leave the transport's RTT
// (ACKs are generated and taken without the NIC latency) and the goodput
// of a long stream unchanged (within 1%: the stream only pays tx + rx
// once, at its start and end).
func TestNICAndSwitchLatency(t *testing.T) {
	const tx, rx, sw = 1300 * time.Nanosecond, 900 * time.Nanosecond, 400 * time.Nanosecond
	lat := []string{"host.nicTxLatency=" + tx.String(), "host.nicRxLatency=" + rx.String()}
	for name, base := range timingTransports {
		for _, p := range []struct {
			dst      int
			switches int
		}{{1, 1}, {15, 3}} {
			l0, _, rtt0 := timingRun(t, base, p.dst, 2, 2)
			l1, _, rtt1 := timingRun(t, append(append([]string{}, base...), lat...), p.dst, 2, 2)
			l2, _, rtt2 := timingRun(t, append(append([]string{}, base...), append(lat, "fabric.switchLatency="+sw.String())...), p.dst, 2, 2)
			if d := time.Duration(l1 - l0); d != tx+rx {
				t.Errorf("%s h0→h%d: NIC latency adds %v to %v, want tx+rx = %v", name, p.dst, d, time.Duration(l0), tx+rx)
			}
			if d := time.Duration(l2 - l1); d != time.Duration(p.switches)*sw {
				t.Errorf("%s h0→h%d: switch latency adds %v, want %d × %v", name, p.dst, d, p.switches, sw)
			}
			if rtt1 != rtt0 {
				t.Errorf("%s h0→h%d: min RTT %d ns with NIC latency, %d without: the NIC latency reached the ACK path", name, p.dst, rtt1, rtt0)
			}
			if want := rtt0 + int64(2*p.switches)*int64(sw); rtt0 > 0 && rtt2 != want {
				t.Errorf("%s h0→h%d: min RTT %d ns with switch latency, want %d", name, p.dst, rtt2, want)
			}
			t.Logf("%s h0→h%d: 2 B one-way %v → %v (NIC) → %v (+switch); min RTT %d / %d / %d ns", name, p.dst,
				time.Duration(l0), time.Duration(l1), time.Duration(l2), rtt0, rtt1, rtt2)
		}
		_, g0, _ := timingRun(t, base, 15, 32<<20, 64<<10)
		_, g1, _ := timingRun(t, append(append([]string{}, base...), lat...), 15, 32<<20, 64<<10)
		if r := g1 / g0; r < 0.99 || r > 1.01 {
			t.Errorf("%s: 32 MiB stream %s with NIC latency vs %s without (ratio %.4f), want within 1%%", name, gbps(g1), gbps(g0), r)
		}
		t.Logf("%s: 32 MiB stream %s without, %s with NIC latency", name, gbps(g0), gbps(g1))
	}
}

// With a transmit latency Post still refuses a bad work request at once,
// with the transport's own error, and queues nothing.
func TestNICTxLatencyPostErrors(t *testing.T) {
	for name, base := range timingTransports {
		c, err := New(load(t, append(append([]string{}, base...), "host.nicTxLatency=1us")...), nil)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := c.Connect(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		src := c.Region(0, 4096, nil)
		e, qpn := ps[0].A.Engine, ps[0].A.T.QPN()
		for _, tc := range []struct {
			wr   verbs.WorkRequest
			want error
		}{
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: 99, Length: 8}, verbs.ErrBadKey},
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 8192}, verbs.ErrOutOfBounds},
			{verbs.WorkRequest{Op: verbs.OpRecvImm, LocalKey: src.Key, LocalVA: src.VA, Length: 8}, verbs.ErrBadOpcode},
			{verbs.WorkRequest{Op: verbs.OpWrite, LocalKey: src.Key, LocalVA: src.VA, Length: 1<<31 + 1}, verbs.ErrTooLong},
		} {
			if err := e.Post(qpn, tc.wr); !errors.Is(err, tc.want) {
				t.Errorf("%s: Post(%+v) = %v, want %v", name, tc.wr, err, tc.want)
			}
		}
		c.Loop.Run()
		switch q := ps[0].A.T.(type) {
		case *mrc.QP:
			if q.Stats().BytesPosted != 0 {
				t.Errorf("%s: %d bytes posted", name, q.Stats().BytesPosted)
			}
		case *roce.QP:
			if q.Stats().BytesPosted != 0 {
				t.Errorf("%s: %d bytes posted", name, q.Stats().BytesPosted)
			}
		}
		c.Close()
	}
}
