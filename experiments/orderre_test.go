package experiments

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/mprdma"
)

// orderreSmall is a very small orderre: 1 MiB flows, one T13 loss, two
// bitmap sizes, one T12 loss.
var orderreSmall = []string{"bytes=1M", "losses=0.01", "bitmaps=2,1.25", "t12Losses=0.05", "deadline=20ms"}

// Bad parameters are refused before anything runs, each naming its key.
func TestOrderREParams(t *testing.T) {
	e, err := Lookup("orderre")
	if err != nil {
		t.Fatal(err)
	}
	err = CheckParams(e, quickEnv(t, e, "bitmaps=2,0.1,x", "skew=-1", "losses=0,0.01", "sample=0", "bytes=0"))
	if err == nil {
		t.Fatal("bad parameters accepted")
	}
	for _, want := range []string{`exp.bitmaps: "0.1"`, `exp.bitmaps: "x"`, "exp.skew: ", "exp.losses: 0 is not a loss rate here", "exp.sample: ", "exp.bytes: "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
	env := quickEnv(t, e)
	env.Config.Fabric.T1PerPlane = 1
	if err := CheckParams(e, env); err == nil || !strings.Contains(err.Error(), "t1PerPlane 1") {
		t.Errorf("one spine: %v, want refused naming t1PerPlane", err)
	}
}

// The spines' delays are spread as the setup says: spine s's two hops
// add s/3 × skew × RTT one way, spine 0 none.
func TestOrderRESkew(t *testing.T) {
	e, _ := Lookup("orderre")
	env := quickEnv(t, e)
	_, rtt, err := orBDP(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c, err := env.NewCluster(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := map[string]time.Duration{}
	for _, l := range c.Topo.Links {
		base[l.Name] = l.Delay
	}
	extra := orSkew(c, 0.35, rtt)
	if len(extra) != 4 || extra[0] != 0 {
		t.Fatalf("extra delays %v, want 4 starting at 0", extra)
	}
	for j := 1; j < 4; j++ {
		want := time.Duration(float64(j) / 3 * 0.35 * float64(rtt))
		if extra[j] != want || extra[j] <= extra[j-1] {
			t.Errorf("spine %d: extra %v, want %v (rising)", j, extra[j], want)
		}
		ls := orSpineLinks(c, j)
		if len(ls) != 4 { // two leaves, both directions
			t.Fatalf("spine %d: %d links, want 4", j, len(ls))
		}
		for _, l := range ls {
			if got := l.Delay - base[l.Name]; got != extra[j]/2 {
				t.Errorf("%s: delay +%v, want +%v", l.Name, got, extra[j]/2)
			}
		}
	}
	if l := c.Topo.HostPorts[0][0].Tx; l.Delay != base[l.Name] {
		t.Errorf("host link %s changed: %v", l.Name, l.Delay)
	}
	for _, l := range orSpineLinks(c, 0) {
		if l.Delay != base[l.Name] {
			t.Errorf("spine 0 link %s changed: %v", l.Name, l.Delay)
		}
	}
}

// A small run: every transfer arrives byte for byte; the loss lands where
// the setup puts it (T12's RoCE flow retransmits, so its spine is the
// lossy one); and, where the mprdma kinds run, OrderRE sent FReTx that the
// ToR copied, Random's retransmissions are single-PSN, and the bitmap
// occupancy never exceeds the bitmap.
func TestOrderRERun(t *testing.T) {
	e, _ := Lookup("orderre")
	env := quickEnv(t, e, orderreSmall...)
	p, err := readOrderRE(env)
	if err != nil {
		t.Fatal(err)
	}
	g, err := runOrGrid(context.Background(), env, p)
	if err != nil {
		t.Fatal(err)
	}
	mpRan := len(g.missing) == 0
	want := 2 + 2 // IRN, MRC at one loss; RoCE and MP-RDMA at one T12 loss
	if mpRan {
		want += 3 * 2
	} else {
		want-- // MP-RDMA's T12 cell
	}
	if len(g.cells) != want {
		t.Fatalf("%d cells ran, want %d (mprdma kinds missing: %v)", len(g.cells), want, g.missing)
	}
	var freTx, copies, fretxTor uint64
	for _, c := range g.cells {
		if c.scheme != orRoCE && (!c.done || !c.verified) {
			t.Errorf("%s: %s", c.label(), orResult(c))
		}
		if c.part == "T12" && c.lossySpine != g.lossySpine {
			t.Errorf("%s: lossy spine %d, want the probe's %d", c.label(), c.lossySpine, g.lossySpine)
		}
		switch c.scheme {
		case orRoCE, orIRN:
			if c.qp.Retransmissions == 0 {
				t.Errorf("%s: no retransmission: the loss missed its path", c.label())
			}
		case orOrderRE:
			freTx += c.req.FReTxSent
			copies += c.tor.Copies
			fretxTor += c.tor.FReTx
		case orRandom:
			if c.req.GoBackNs == 0 && c.qp.Retransmissions != c.req.SelectiveRetx {
				t.Errorf("%s: %d retransmissions, %d selective, no go-back-N: Random retransmitted more than single PSNs", c.label(), c.qp.Retransmissions, c.req.SelectiveRetx)
			}
			if c.req.SelectiveRetx == 0 {
				t.Errorf("%s: no selective retransmission at 1%% loss", c.label())
			}
		}
		if c.mp != (c.scheme == orMPRDMA || c.scheme == orRandom || c.scheme == orOrderRE) {
			t.Errorf("%s: mp = %v", c.label(), c.mp)
		}
		for _, o := range c.occ {
			if c.bitmap > 0 && o > float64(c.bitmap) {
				t.Errorf("%s: occupancy %v above the bitmap's %d entries", c.label(), o, c.bitmap)
				break
			}
		}
		if c.mp && len(c.occ) == 0 {
			t.Errorf("%s: no occupancy samples", c.label())
		}
	}
	if mpRan {
		if freTx == 0 || fretxTor == 0 || copies <= fretxTor {
			t.Errorf("OrderRE: %d FReTx sent, the ToRs saw %d and made %d copies: want FReTx replicated", freTx, fretxTor, copies)
		}
	}
	for _, c := range orChecks(p, g.cells, g.missing) {
		if !mpRan && c.Testable() {
			t.Errorf("%s %q testable without the mprdma kinds", c.Target, c.Claim)
		}
	}
}

// The report has the setup, a row per cell, every plot with its CSV and
// the checks of both rows; the same seed gives the same results.csv.
func TestOrderREReport(t *testing.T) {
	e, _ := Lookup("orderre")
	var ref []byte
	for i := range 2 {
		dir := t.TempDir()
		r, err := Execute(context.Background(), e, quickEnv(t, e, orderreSmall...), dir, "test", nil, Manifest{Tool: "vcluster"})
		if err != nil {
			t.Fatal(err)
		}
		md, err := os.ReadFile(filepath.Join(dir, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"4-path leaf-spine", "O_MAX", "T12", "T13", "goodput_vs_bitmap_loss1", "repair_time_cdf", "bitmap_occupancy", "t12_goodput_vs_loss"} {
			if !bytes.Contains(md, []byte(want)) {
				t.Errorf("report.md lacks %q", want)
			}
		}
		for _, pl := range r.Plots {
			for _, ext := range []string{".csv", ".png", ".svg"} {
				if _, err := os.Stat(filepath.Join(dir, pl.Name+ext)); err != nil {
					t.Error(err)
				}
			}
		}
		targets := map[string]int{}
		for _, c := range r.Checks {
			targets[c.Target]++
		}
		if targets["T13"] != 3 || targets["T12"] != 1 {
			t.Errorf("checks per row %v, want T13: 3, T12: 1", targets)
		}
		got, err := os.ReadFile(filepath.Join(dir, "results.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ref = got
			if n := bytes.Count(got, []byte("\n")); n != r.Points+1 {
				t.Errorf("results.csv has %d lines, want a header and %d rows", n, r.Points)
			}
		} else if !bytes.Equal(got, ref) {
			t.Errorf("results.csv differs between two runs of one seed")
		}
	}
}

// orderreKnownDiffers are orderre's quick-size findings (docs/experiments.md,
// "orderre"), keyed by the start of the claim. They join knownDiffers only
// when this build registers the mprdma kinds: without them every check
// is not testable, and a listed one would fail TestQuickRunsPass.
var orderreKnownDiffers = map[string]string{
	"1% loss: > 90% fewer retransmission":       "T13, too few retransmission failures of Random at quick size to resolve 90%",
	"1% loss: ~2× Random's goodput":             "T13, OrderRE ~1.4× Random at the smallest sustaining bitmap: Random's single retransmissions rarely fail on one flow",
	"0.5% loss on one spine: MP-RDMA's goodput": "T12, ~1.8×: single-path RoCE loses little at 0.5% on a 5 µs RTT",
	"2% loss on one spine: MP-RDMA's goodput":   "T12, ~5.5×: go-back-N collapses faster than published",
	"5% loss on one spine: MP-RDMA's goodput":   "T12, ~20×: RoCE GBN waits for timeouts",
	"10% loss on one spine: MP-RDMA's goodput":  "T12, ~85×: RoCE GBN barely moves",
}

func init() {
	if _, ok := cluster.LookupTransport(mprdma.KindOrderRE); !ok {
		return
	}
	e, err := Lookup("orderre")
	if err != nil {
		return
	}
	p := map[string]string{}
	for _, q := range e.Params {
		p[q.Key] = q.Value(Quick)
	}
	pr, err := readOrderRE(&Env{Config: quickConfig(e), Params: p})
	if err != nil {
		return
	}
	for _, c := range orChecks(pr, nil, nil) {
		for prefix, why := range orderreKnownDiffers {
			if strings.HasPrefix(c.Claim, prefix) {
				knownDiffers["orderre: "+c.Claim] = why
			}
		}
	}
}

// quickConfig is e's cluster config (as quickEnv loads it, without a test).
func quickConfig(e *Experiment) config.Config {
	cfg, _ := config.Load("", e.Cluster)
	return cfg
}

// The bitmap sizes are multiples of the BDP the cluster gives the mprdma
// QPs (their derived defaults use the same one).
func TestOrderREBDP(t *testing.T) {
	e, _ := Lookup("orderre")
	env := quickEnv(t, e)
	bdp, _, err := orBDP(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := override(env.Config, []string{"transport.kind=" + mprdma.KindOrderRE})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.NewForWorkers(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m, err := c.MPRDMAConfig()
	if err != nil {
		t.Fatal(err)
	}
	if m.BDPPackets != bdp || m.Paths != 4 {
		t.Errorf("cluster BDP %d packets, %d paths; the experiment's BDP %d, want equal and 4 paths", m.BDPPackets, m.Paths, bdp)
	}
}
