package fabric

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/fabric/pcap"
	"github.com/vcluster/vcluster/sim"
)

// hdcFrame is one frame of the HDC scenario: who sends it and how.
type hdcFrame struct {
	host   int
	dscp   uint8
	nested bool // IPv6-in-IPv6
	rdma   bool // UDP destination port 4791 (else 9000)
	stored int  // payload bytes stored (-1: all)
}

// hdcTruth is what the test itself saw of one frame at the egress port.
type hdcTruth struct {
	f       hdcFrame
	in      int32
	enq     sim.Time
	deq     sim.Time
	depth   int
	excerpt []byte
	origLen int
}

// egressTap records, per frame sequence number, the dequeue time, the
// class queue's bytes just after, and the frame's bytes.
type egressTap struct {
	pt    *Port
	truth map[uint32]*hdcTruth
}

func (e *egressTap) TapFrame(ts int64, dir pcap.Direction, frame []byte, origLen int) {
	if dir != pcap.DirOutbound {
		return
	}
	tr := e.truth[seqOf(frame)]
	tr.deq = sim.Time(ts)
	tr.depth = e.pt.ClassBytes(int(e.pt.cfg.Classes[(frame[offIPv6]<<4|frame[offIPv6+1]>>4)>>2]))
	tr.excerpt = append([]byte(nil), frame[:min(len(frame), HDCSnapLen)]...)
	tr.origLen = origLen
}

// seqOf reads the sequence number BuildFrame puts after the innermost UDP header.
func seqOf(frame []byte) uint32 {
	off := offIPv6
	for frame[off+6] == ProtoIPv6 {
		off += IPv6HeaderLen
	}
	return binary.BigEndian.Uint32(frame[off+IPv6HeaderLen+UDPHeaderLen:])
}

// hdcRun sends an incast from hosts 0 and 1 to host 2 below one T0 (the
// T0's port to host 2 queues at twice its rate) with HDC configured by
// cfg, and returns the collector, the test's own view of every frame at
// that port, the port, and the switch's index.
func hdcRun(t *testing.T, cfg HDCConfig, window func(*HDCCollector)) (*HDCCollector, map[uint32]*hdcTruth, *Port, int) {
	t.Helper()
	loop := sim.NewLoop(sim.Options{Seed: 5})
	topo := smallClos(t, loop, 1, 3, 2, 1, DefaultOptions(ForwardECMP))
	hs := attach(topo)
	for _, h := range hs {
		h.onRecv = func(p *Packet, _ *Port) bool { p.Release(); return true }
	}
	out := topo.HostPorts[2][0].Peer
	sw := out.Owner.(*Switch)
	swIndex := -1
	for i, s := range topo.Switches {
		if s == sw {
			swIndex = i
		}
	}
	col, err := sw.EnableHDC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[uint32]*hdcTruth{}
	out.Tap(&egressTap{pt: out, truth: truth})
	sw.Trace = func(_ *Switch, p *Packet, op *Port) {
		if op == out {
			truth[seqOf(p.Data)].enq = loop.Now()
		}
	}
	dst := topo.HostAddr(2, 0)
	var seq uint32
	for i := 0; i < 24; i++ {
		for _, f := range []hdcFrame{
			{host: 0, dscp: DSCPRoCE, rdma: true, stored: -1},
			{host: 1, dscp: []uint8{DSCPTrimmable, DSCPRoCE, DSCPControl, DSCPTrimmable}[i%4], nested: i%3 == 1, rdma: i%2 == 0, stored: []int{-1, 0, 100}[i%3]},
		} {
			seq++
			src := topo.HostAddr(f.host, 0)
			spec := FrameSpec{Src: src, Dst: dst, Sport: uint16(100 + f.host), DSCP: f.dscp, Payload: 1000, Stored: f.stored, Seq: seq}
			if f.dscp == DSCPControl {
				spec.Payload = 60
			}
			if f.nested {
				spec.Outer = &dst
			}
			p := BuildFrame(topo.Pool, spec)
			if !f.rdma {
				binary.BigEndian.PutUint16(p.Data[innerL4(p)+2:], 9000)
			}
			truth[seq] = &hdcTruth{f: f, in: topo.HostPorts[f.host][0].Peer.Index}
			topo.HostPorts[f.host][0].Enqueue(p)
		}
	}
	if window != nil {
		loop.At(800, func() { window(col) })
	}
	loop.Run()
	for s, tr := range truth {
		if tr.excerpt == nil {
			t.Fatalf("frame %d never left the port", s)
		}
	}
	return col, truth, out, swIndex
}

// TestHDCCapturesExactlyAboveThreshold: with the thresholds set to the
// queueing delay of one RDMA and one other frame, the collector holds a
// record for exactly the frames strictly above their class's threshold
// (those two not), each with the fields the test saw itself at the port.
func TestHDCCapturesExactlyAboveThreshold(t *testing.T) {
	// A first run with 1 ns thresholds shows the delays.
	_, truth, _, _ := hdcRun(t, HDCConfig{RDMAThreshold: 1, OtherThreshold: 1}, nil)
	var rdmaD, otherD []time.Duration
	for _, tr := range truth {
		d := time.Duration(tr.deq - tr.enq)
		if tr.f.rdma {
			rdmaD = append(rdmaD, d)
		} else {
			otherD = append(otherD, d)
		}
	}
	// The lowest delay that 3 frames exceed and 3 frames are below: most
	// frames are captured, and the choice does not depend on map order.
	pick := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		for _, d := range ds {
			above, below := 0, 0
			for _, e := range ds {
				if e > d {
					above++
				} else if e < d {
					below++
				}
			}
			if above >= 3 && below >= 3 {
				return d
			}
		}
		t.Fatalf("no threshold splits the delays %v", ds)
		return 0
	}
	cfg := HDCConfig{RDMAThreshold: pick(rdmaD), OtherThreshold: pick(otherD)}
	col, truth, out, swIndex := hdcRun(t, cfg, nil)
	if col.Config.SnapLen != HDCSnapLen || col.Config.MaxRecords != DefaultHDCMaxRecords {
		t.Fatalf("defaults not applied: %+v", col.Config)
	}
	want := map[uint32]bool{}
	atThreshold := 0
	for s, tr := range truth {
		d, th := time.Duration(tr.deq-tr.enq), cfg.OtherThreshold
		if tr.f.rdma {
			th = cfg.RDMAThreshold
		}
		if d > th {
			want[s] = true
		}
		if d == th {
			atThreshold++
		}
	}
	if atThreshold < 2 {
		t.Fatalf("%d frames exactly at a threshold, want both picks", atThreshold)
	}
	got := map[uint32]bool{}
	var classes [NumClasses]int
	for _, r := range col.Records {
		s := seqOf(r.Excerpt[:r.SnapLen])
		tr := truth[s]
		if tr == nil || got[s] {
			t.Fatalf("record of unknown or repeated frame %d", s)
		}
		got[s] = true
		classes[r.QueueID]++
		if !want[s] {
			t.Errorf("frame %d captured with latency %v (thresholds %v/%v, rdma %v)", s, r.Latency, cfg.RDMAThreshold, cfg.OtherThreshold, tr.f.rdma)
		}
		if r.Switch != int32(swIndex) || r.IngressPort != tr.in || r.EgressPort != out.Index {
			t.Errorf("frame %d: switch %d ports %d→%d, want %d %d→%d", s, r.Switch, r.IngressPort, r.EgressPort, swIndex, tr.in, out.Index)
		}
		if r.Timestamp != tr.deq || r.Latency != time.Duration(tr.deq-tr.enq) || r.QueueDepth != tr.depth {
			t.Errorf("frame %d: at %v latency %v depth %d, want %v %v %d", s, r.Timestamp, r.Latency, r.QueueDepth, tr.deq, time.Duration(tr.deq-tr.enq), tr.depth)
		}
		if wantQ := DefaultClassMap()[tr.f.dscp]; r.QueueID != wantQ {
			t.Errorf("frame %d: queue %d, want %d", s, r.QueueID, wantQ)
		}
		if r.RDMA != tr.f.rdma {
			t.Errorf("frame %d (nested %v): RDMA %v, want %v", s, tr.f.nested, r.RDMA, tr.f.rdma)
		}
		if r.OrigLen != tr.origLen || !bytes.Equal(r.Excerpt[:r.SnapLen], tr.excerpt) {
			t.Errorf("frame %d: orig len %d excerpt of %d bytes, want %d and the frame's first %d", s, r.OrigLen, r.SnapLen, tr.origLen, len(tr.excerpt))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d records, want %d", len(got), len(want))
	}
	// The scenario must exercise what it claims: long and short excerpts,
	// nested RDMA and other frames, and two queues (the control class,
	// strict priority, waits too little here: TestHDCOverflowAndWindow).
	var full, short, nestedRDMA, nestedOther int
	for s := range got {
		tr := truth[s]
		if len(tr.excerpt) == HDCSnapLen {
			full++
		} else {
			short++
		}
		if tr.f.nested && tr.f.rdma {
			nestedRDMA++
		} else if tr.f.nested {
			nestedOther++
		}
	}
	if full == 0 || short == 0 || nestedRDMA == 0 || nestedOther == 0 || classes[ClassRoCE] == 0 || classes[ClassData] == 0 {
		t.Errorf("scenario too narrow: %d full and %d short excerpts, nested %d RDMA %d other, classes %v", full, short, nestedRDMA, nestedOther, classes)
	}
	tot := col.Total[out.Index]
	if tot.Records != uint64(len(want)) || col.Overflow != 0 {
		t.Errorf("total %d records overflow %d, want %d and 0", tot.Records, col.Overflow, len(want))
	}
	var sum, max time.Duration
	for _, r := range col.Records {
		sum += r.Latency
		max = maxDur(max, r.Latency)
	}
	if tot.SumLatency != sum || tot.MaxLatency != max {
		t.Errorf("total latency %v max %v, want %v %v", tot.SumLatency, tot.MaxLatency, sum, max)
	}
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// TestHDCOverflowAndWindow: beyond MaxRecords captures are counted, not
// kept; the windows TakeWindow returns add up to the totals.
func TestHDCOverflowAndWindow(t *testing.T) {
	all, _, _, _ := hdcRun(t, HDCConfig{RDMAThreshold: 1, OtherThreshold: 1}, nil)
	n := len(all.Records)
	if n < 10 {
		t.Fatalf("only %d captures", n)
	}
	control := 0
	for _, r := range all.Records {
		if r.QueueID == ClassControl {
			control++
		}
	}
	if control == 0 {
		t.Fatal("no control-class frame captured at a 1 ns threshold")
	}
	var first []HDCPortDelay
	col, _, out, _ := hdcRun(t, HDCConfig{RDMAThreshold: 1, OtherThreshold: 1, MaxRecords: 7}, func(c *HDCCollector) {
		first = append(first, c.TakeWindow()...)
	})
	if len(col.Records) != 7 || col.Overflow != uint64(n-7) {
		t.Fatalf("kept %d overflow %d, want 7 and %d", len(col.Records), col.Overflow, n-7)
	}
	for i := range col.Records {
		if col.Records[i] != all.Records[i] {
			t.Fatalf("record %d differs from the unbounded run's", i)
		}
	}
	second := col.TakeWindow()
	e := out.Index
	if first[e].Records == 0 || second[e].Records == 0 {
		t.Fatalf("windows %d and %d records: the split at 800 ns should leave some in each", first[e].Records, second[e].Records)
	}
	tot := col.Total[e]
	if first[e].Records+second[e].Records != tot.Records || first[e].SumLatency+second[e].SumLatency != tot.SumLatency ||
		maxDur(first[e].MaxLatency, second[e].MaxLatency) != tot.MaxLatency || tot.Records != uint64(n) {
		t.Fatalf("windows %+v + %+v, total %+v (%d captures)", first[e], second[e], tot, n)
	}
	if w := col.TakeWindow(); w[e] != (HDCPortDelay{}) {
		t.Fatalf("a window with no captures: %+v", w[e])
	}
}

// TestEnableHDCValidation: each invalid field is rejected by name; zero
// fields take the seed's defaults; a second call keeps the collector.
func TestEnableHDCValidation(t *testing.T) {
	topo := smallClos(t, sim.NewLoop(sim.Options{Seed: 1}), 1, 1, 1, 1, DefaultOptions(ForwardECMP))
	sw := topo.Switches[0]
	for _, c := range []struct {
		cfg   HDCConfig
		field string
	}{
		{HDCConfig{RDMAThreshold: -1}, "hdc.rdmaThreshold"},
		{HDCConfig{OtherThreshold: -time.Microsecond}, "hdc.otherThreshold"},
		{HDCConfig{SnapLen: HDCSnapLen + 1}, "hdc.snapLen"},
		{HDCConfig{SnapLen: -1}, "hdc.snapLen"},
		{HDCConfig{MaxRecords: -1}, "hdc.maxRecords"},
	} {
		col, err := sw.EnableHDC(c.cfg)
		if err == nil || !strings.HasPrefix(err.Error(), c.field+": must be") || col != nil {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
		if sw.HDC() != nil {
			t.Fatalf("a rejected config enabled HDC")
		}
	}
	col, err := sw.EnableHDC(HDCConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (HDCConfig{RDMAThreshold: 5 * time.Microsecond, OtherThreshold: 50 * time.Microsecond, SnapLen: 150, MaxRecords: 100000}); col.Config != want {
		t.Fatalf("defaults %+v, want %+v", col.Config, want)
	}
	again, err := sw.EnableHDC(HDCConfig{SnapLen: 64})
	if err != nil || again != col || col.Config.SnapLen != 64 || sw.HDC() != col {
		t.Fatalf("second EnableHDC: %v, same collector %v, snap %d", err, again == col, col.Config.SnapLen)
	}
}

// TestIsRoCEv2: the classification at any IPv6-in-IPv6 depth, and frames
// too short to tell.
func TestIsRoCEv2(t *testing.T) {
	pool := NewPool(9216)
	var a [16]byte
	p := BuildFrame(pool, FrameSpec{Payload: 100, Outer: &a})
	if !IsRoCEv2(p.Data) {
		t.Fatal("IPv6-in-IPv6 to 4791 not RoCEv2")
	}
	// Three levels: wrap once more by hand.
	f := make([]byte, len(p.Data)+IPv6HeaderLen)
	copy(f, p.Data[:offIPv6])
	PutIPv6(f[offIPv6:], 0, 0, len(p.Data)-offIPv6, ProtoIPv6, a, a)
	copy(f[offL4:], p.Data[offIPv6:])
	if !IsRoCEv2(f) {
		t.Fatal("two inner IPv6 headers to 4791 not RoCEv2")
	}
	binary.BigEndian.PutUint16(f[offL4+2*IPv6HeaderLen+2:], 4792)
	if IsRoCEv2(f) {
		t.Fatal("port 4792 classified RoCEv2")
	}
	// Cut short: RoCEv2 exactly when the inner UDP header is still whole.
	for n := 0; n < len(p.Data); n++ {
		if got, want := IsRoCEv2(p.Data[:n]), n >= offL4+IPv6HeaderLen+UDPHeaderLen; got != want {
			t.Fatalf("a frame cut to %d bytes: RoCEv2 %v, want %v", n, got, want)
		}
	}
}

// FuzzIsRoCEv2: any bytes are classified without panicking.
func FuzzIsRoCEv2(f *testing.F) {
	pool := NewPool(9216)
	var a [16]byte
	f.Add(BuildFrame(pool, FrameSpec{Payload: 10, Outer: &a}).Data)
	f.Add(BuildFrame(pool, FrameSpec{Payload: 10}).Data)
	f.Fuzz(func(t *testing.T, b []byte) { IsRoCEv2(b) })
}

// TestHDCTrimmedAndDeviceFrames: frames a device puts straight on a
// switch port have IngressPort -1 (the switch did not forward them), and
// trimmed headers are captured in their own class with their trimmed
// length.
func TestHDCTrimmedAndDeviceFrames(t *testing.T) {
	loop := sim.NewLoop(sim.Options{Seed: 1})
	topo := smallClos(t, loop, 1, 2, 2, 1, DefaultOptions(ForwardECMP))
	attach(topo)
	out := topo.HostPorts[1][0].Peer
	cfg := *out.Config()
	cfg.BufferBytes = 3000
	out.SetConfig(&cfg)
	col, err := out.Owner.(*Switch).EnableHDC(HDCConfig{RDMAThreshold: 1, OtherThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A frame the switch forwarded earlier leaves a stale stamp behind
	// unless the port clears it: give the frames one.
	for i := 0; i < 10; i++ {
		p := BuildFrame(topo.Pool, FrameSpec{Src: topo.HostAddr(0, 0), Dst: topo.HostAddr(1, 0), DSCP: DSCPTrimmable, Payload: 1000, Stored: -1, Seq: uint32(i)})
		p.hopIn = 3
		out.Enqueue(p)
	}
	loop.Run()
	var data, trimmed int
	for _, r := range col.Records {
		if r.IngressPort != -1 {
			t.Errorf("a device's frame recorded from ingress port %d", r.IngressPort)
		}
		switch r.QueueID {
		case ClassData:
			data++
		case ClassTrimmed:
			trimmed++
			if r.OrigLen != cfg.Trim.Size || r.SnapLen != cfg.Trim.Size {
				t.Errorf("trimmed record: orig len %d snap %d, want %d", r.OrigLen, r.SnapLen, cfg.Trim.Size)
			}
		}
	}
	// The first frame leaves at once (no delay); two fit the buffer
	// behind it, the other seven are trimmed.
	if data != 2 || trimmed != 7 || out.Counters.Trims != 7 {
		t.Errorf("captured %d data and %d trimmed frames (port trimmed %d), want 2 and 7", data, trimmed, out.Counters.Trims)
	}
}
