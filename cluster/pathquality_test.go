package cluster

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
)

// pathQualityCfg is a k=4 fat-tree under forwarding pathquality with RoCE
// (one QP per flow) and microsecond-scaled control-plane periods, so a
// short permutation sees many samples and advertisements.
func pathQualityCfg(t testing.TB, extra ...string) config.Config {
	t.Helper()
	cfg, err := config.Load("", append([]string{"fabric.topology=fattree", "fabric.k=4", "fabric.forwarding=pathquality",
		"fabric.pathQuality.samplePeriod=5us", "fabric.pathQuality.advertisePeriod=10us", "fabric.pathQuality.controlDelay=2us",
		"fabric.pathQuality.hdc.rdmaThreshold=1us",
		"transport.kind=roce", "transport.payload=elided", "transport.qpsPerConnection=1", "host.netstack=false", "seed=9"}, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// pqResult is everything the control plane and the fabric report after a
// run, as bytes.
type pqResult struct {
	flows, stats                string
	samples, adverts, hdc, pcap []byte
	counters                    []byte
	now                         sim.Time
}

// runPathQuality runs a permutation of size bytes per flow on c until
// every flow is done, then on to a fixed later time (the control plane's
// events never let the cluster go idle).
func runPathQuality(t testing.TB, c *Cluster, size uint64) pqResult {
	t.Helper()
	defer c.Close()
	if c.PathQuality == nil {
		t.Fatal("fabric.pathQuality on, but no control plane")
	}
	trs := startPerm(t, c, size)
	c.RunWhile(func() bool { return !AllDone(trs) })
	c.RunUntil(c.Now() + sim.Time(50_000)) // the window boundary RunWhile stopped at is the same for every partitioning
	var r pqResult
	var b bytes.Buffer
	for i, tr := range trs {
		if !tr.Done() || len(tr.Errors) > 0 || tr.Completed != size {
			t.Fatalf("flow %d: done %v, %d errors, %d of %d bytes", i, tr.Done(), len(tr.Errors), tr.Completed, size)
		}
		fmt.Fprintf(&b, "%d→%d %d %d %d\n", tr.Pair.A.Host, tr.Pair.B.Host, tr.Start, tr.End, tr.Completed)
	}
	r.flows = b.String()
	r.stats = fmt.Sprintf("%+v", c.PathQuality.Stats())
	for _, w := range []struct {
		dst   *[]byte
		write func(*bytes.Buffer) error
	}{
		{&r.samples, func(b *bytes.Buffer) error { return c.PathQuality.WriteSamplesCSV(b) }},
		{&r.adverts, func(b *bytes.Buffer) error { return c.PathQuality.WriteAdvertsCSV(b) }},
		{&r.hdc, func(b *bytes.Buffer) error { return c.PathQuality.WriteHDCJSONL(b) }},
		{&r.pcap, func(b *bytes.Buffer) error { return c.PathQuality.WriteHDCPcap(b) }},
		{&r.counters, func(b *bytes.Buffer) error { return c.Topo.WriteCountersCSV(b) }},
	} {
		var buf bytes.Buffer
		if err := w.write(&buf); err != nil {
			t.Fatal(err)
		}
		*w.dst = buf.Bytes()
	}
	r.now = c.Now()
	return r
}

// TestPartitionedPathQuality: the control plane's time series, adverts,
// HDC records and totals, and the fabric's counters, are byte-identical
// on the single loop (NewPartitioned(c, 1, 1), and the classic loop of
// NewForWorkers(c, 0)) and cut into 2 partitions on 2 workers.
func TestPartitionedPathQuality(t *testing.T) {
	cfg := pathQualityCfg(t)
	c, err := NewPartitioned(cfg, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := runPathQuality(t, c, 200_000)
	st := c.PathQuality.Stats()
	if st.Samples == 0 || st.UpdatesSent == 0 || st.HDCRecords == 0 {
		t.Fatalf("the run does not exercise the control plane: %+v", st)
	}
	t.Logf("single loop: %+v, %d bytes of samples, %d of adverts, %d of HDC records", st, len(ref.samples), len(ref.adverts), len(ref.hdc))
	builds := map[string]func() (*Cluster, error){
		"parts 2 workers 2": func() (*Cluster, error) { return NewPartitioned(cfg, 2, 2) },
		"classic loop":      func() (*Cluster, error) { return NewForWorkers(cfg, 0) },
	}
	for name, build := range builds {
		c, err := build()
		if err != nil {
			t.Fatal(err)
		}
		got := runPathQuality(t, c, 200_000)
		for _, f := range []struct {
			what      string
			got, want []byte
		}{
			{"flows", []byte(got.flows), []byte(ref.flows)}, {"stats", []byte(got.stats), []byte(ref.stats)},
			{"samples CSV", got.samples, ref.samples}, {"adverts CSV", got.adverts, ref.adverts},
			{"HDC JSONL", got.hdc, ref.hdc}, {"HDC pcap", got.pcap, ref.pcap}, {"counters CSV", got.counters, ref.counters},
		} {
			if !bytes.Equal(f.got, f.want) {
				t.Errorf("%s: %s differ from the single loop's (%d vs %d bytes)", name, f.what, len(f.got), len(f.want))
			}
		}
		if got.now != ref.now {
			t.Errorf("%s: ended at %d, the single loop at %d", name, got.now, ref.now)
		}
	}
}

// The control plane runs when the section is on, applies weights only
// under forwarding pathquality, and is absent when off.
func TestPathQualityWiring(t *testing.T) {
	for _, tc := range []struct {
		sets  []string
		on    bool
		apply bool
	}{
		{nil, true, true},
		{[]string{"fabric.forwarding=ecmp", "fabric.pathQuality.mode=on"}, true, false},
		{[]string{"fabric.forwarding=ecmp"}, false, false},
	} {
		c, err := New(pathQualityCfg(t, tc.sets...), nil)
		if err != nil {
			t.Fatal(err)
		}
		if (c.PathQuality != nil) != tc.on {
			t.Errorf("%v: control plane %v, want on %v", tc.sets, c.PathQuality != nil, tc.on)
		} else if tc.on && c.PathQuality.Config().Apply != tc.apply {
			t.Errorf("%v: Apply %v, want %v", tc.sets, c.PathQuality.Config().Apply, tc.apply)
		}
		c.Close()
	}
}

// Every transport kind that runs under ecmp runs under pathquality with
// the control plane setting weights mid-transfer: RoCE and MRC hash per
// flow onto the weighted buckets, the mprdma kinds' path addresses still
// pin their path (every spine carries data). The bytes arrive intact.
func TestPathQualityTransportKinds(t *testing.T) {
	for _, kind := range []string{config.TransportRoCE, config.TransportMRC, config.TransportMPRDMA, config.TransportRandom, config.TransportOrderRE} {
		t.Run(kind, func(t *testing.T) {
			c := mprdmaLeafSpine(t, kind, config.ForwardingPathQuality, "fabric.pathQuality.samplePeriod=5us",
				"fabric.pathQuality.advertisePeriod=10us", "fabric.pathQuality.controlDelay=1us")
			if c.PathQuality == nil {
				t.Fatal("no control plane under forwarding pathquality")
			}
			const n = 4 << 20
			ps, err := c.Connect(0, 15)
			if err != nil {
				t.Fatal(err)
			}
			src, dst := c.Region(0, n, randomFill(5)), c.Region(15, n, nil)
			tr, err := c.StartTransfer(ps[0], src, dst, n, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			c.Loop.RunWhile(func() bool { return !tr.Done() || tr.RecvImmAt == 0 })
			if len(tr.Errors) > 0 || tr.Completed != n || !bytes.Equal(src.Buf, dst.Buf) {
				t.Fatalf("%d errors, %d of %d bytes, intact %v", len(tr.Errors), tr.Completed, n, bytes.Equal(src.Buf, dst.Buf))
			}
			st := c.PathQuality.Stats()
			if st.WeightChanges == 0 {
				t.Errorf("no weights set during the transfer: %+v", st)
			}
			shares := spineShares(c)
			t.Logf("%s: %s, spines %v, control plane %+v", kind, gbps(tr.GoodputBps()), shares, st)
			if config.IsMPRDMAKind(kind) {
				for i, s := range shares {
					if s == 0 {
						t.Errorf("spine %d carried nothing: path addresses do not reach every path", i)
					}
				}
			}
		})
	}
}
