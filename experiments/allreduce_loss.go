package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/units"
)

// allreduceLoss is TARGETS T2/T3: ring all-reduce over one MRC QP (uSID,
// spraying over every plane) against RoCE with 1, 8 and 16 QPs (ECMP, by
// default on one 400G plane with PFC as published), with random loss on
// every link.
func init() {
	Register(&Experiment{
		Name:    "allreduce-loss",
		Title:   "ring all-reduce, MRC 1 QP vs RoCE 1–16 QPs, under random loss",
		Targets: []string{"T2", "T3"},
		Cluster: paperCluster("fabric.preset=C", "fabric.hosts=16"),
		Params: []Param{
			{Key: "size", Default: "32M", Quick: "64M", Full: "16M,64M,256M", Doc: "all-reduce sizes (nccl-tests bytes, comma-separated; every check runs at every size, busbw_vs_size plots need two or more); quick is larger than default but elides the payload, which is cheaper"},
			{Key: "losses", Default: "0,0.001,0.01", Doc: "Bernoulli loss rates on every link and direction"},
			{Key: "roceQPs", Default: "1,8,16", Full: "1,2,4,8,16", Doc: "RoCE QPs per pair of ranks, one variant each (the T2 checks need 1, 8 and 16)"},
			{Key: "payload", Default: "real", Quick: "elided", Full: "elided", Doc: "real (bytes carried and checked) or elided; quick and full elide it (full: 64 ranks × 256 MiB send/receive/scratch buffers per variant would need tens of GiB)"},
			roceFabricParam,
			hostsParam,
		},
		Setup: allreduceLossSetup,
		Args:  Typed[grid]{Read: transportGrid, Run: runAr, Payload: payloadAr},
	})
}

const allreduceLossSetup = `Every host of the cluster is one rank of a ring all-reduce (nccl-tests
sizes and bus bandwidth: busbw = algbw × 2(n−1)/n). MRC: one QP per pair of
ranks, spraying over every plane on uSID paths (NSCC, trimming, selective
retransmission, PFC off). RoCE: go-back-N with DCQCN on ECMP, 1, 8 and 16
QPs per pair of ranks (full: 1, 2, 4, 8, 16). With exp.roceFabric=paper (the
default, the published setup of T2/T3) RoCE runs on ONE plane that carries
the whole NIC (1 × 400G here, against MRC's 4 × 100G), same hosts and T0/T1
shape, PFC on, ECN preset auto (dcqcn-sigcomm15 for RoCE); the "fabric"
column says which fabric each row ran on. exp.roceFabric=same-planes runs
RoCE on MRC's four 100G planes instead, where one QP is one flow on one
plane. The published setup has 64 NICs: full runs 64 (exp.hosts), quick
and default 16.
Loss is Bernoulli on every link and direction (seeded per link). "of NIC"
is busbw over the host's whole NIC; "of loss-free busbw" (kept) is busbw
over the same transport's busbw without loss at the same size. Every check
runs at every size of exp.size (quick: 64M with the payload elided;
default: 32M with real bytes; full: 16M, 64M, 256M elided) and names it;
busbw_vs_loss plots the largest, busbw_vs_size plots busbw against size.
"Possible" in "RoCE 1 QP reaches about half of possible" is the busbw one
MRC QP reaches at the same size (what this fabric delivers to one rank).`

type arCell struct {
	v    arVariant
	size uint64
	loss float64
	res  collectives.Result
	frac float64
	err  error
}

// payloadAr is Typed.Payload: the largest size's buffers, when the
// payload is real.
func payloadAr(g grid) uint64 {
	if g.payload != "real" {
		return 0
	}
	return collectiveBuffers(g.sizes[len(g.sizes)-1])
}

func runAr(ctx context.Context, env *Env, g grid) (*Results, error) {
	sizes, losses, payload, vs := g.sizes, g.losses, g.payload, g.vs
	res := &Results{}
	cfgs := make([]config.Config, len(vs))
	var err error
	for i, v := range vs {
		if cfgs[i], err = override(env.Config, append(append([]string{}, v.sets...), "transport.payload="+payload)); err != nil {
			return nil, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	var cells []*arCell
	var ranks int
	var nic float64
	n := len(sizes) * len(vs) * len(losses)
	// An interrupt (sim.Interrupt, ctx) ends the grid: the points that
	// completed are the (partial) results, the one running is dropped.
grid:
	for _, size := range sizes {
		for i, v := range vs {
			cfg := cfgs[i]
			nic = float64(cfg.Fabric.Planes) * float64(hostRateOf(cfg)) / 8 / 1e9 // GB/s
			for _, loss := range losses {
				if interrupted(ctx) {
					break grid
				}
				cell := &arCell{v: v, size: size, loss: loss}
				label := fmt.Sprintf("%s, loss %s", v.name, pct(loss))
				if len(sizes) > 1 {
					label = units.FormatBytes(size) + ", " + label
				}
				env.Point(len(cells), n, label)
				c, err := env.NewCluster(cfg)
				if err != nil {
					return nil, err
				}
				env.Watch(c)
				if loss > 0 {
					for _, l := range c.Topo.Links {
						l.Loss = fabric.NewBernoulli(loss, cfg.Seed, l.Name)
					}
				}
				m, err := collectives.New(c, collectives.Options{})
				if err != nil {
					c.Close()
					return nil, err
				}
				ranks = m.Size()
				ring, err := collectives.Lookup(collectives.AllReduce, "ring")
				if err != nil {
					c.Close()
					return nil, err
				}
				cell.res, cell.err = m.Run(ring, size, collectives.RunOptions{})
				if cell.err == nil && cell.res.Check == collectives.CheckFailed {
					cell.err = fmt.Errorf("%d wrong elements", cell.res.Wrong)
				}
				cell.frac = cell.res.BusBW / nic
				res.Events += c.Executed()
				c.Close()
				if interrupted(ctx) {
					break grid
				}
				env.logf("allreduce-loss: %-12s loss %-6g size %-5s busbw %6.2f GB/s %v\n", v.name, loss, units.FormatBytes(size), cell.res.BusBW, errText(cell.err))
				cells = append(cells, cell)
			}
		}
	}
	// table, rows, plots
	type key struct {
		size uint64
		name string
	}
	base := map[key]float64{}
	for _, c := range cells {
		if c.loss == 0 {
			base[key{c.size, c.v.name}] = busbw(c)
		}
	}
	keepOf := func(c *arCell) float64 {
		if b := base[key{c.size, c.v.name}]; b > 0 {
			return busbw(c) / b
		}
		return math.NaN()
	}
	largest := sizes[len(sizes)-1]
	var tb bytes.Buffer
	tw := tabwriter.NewWriter(&tb, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "transport\tfabric\tsize\t%s\n", transportColumns(nic))
	plotp := Plot{Name: "busbw_vs_loss", Title: fmt.Sprintf("ring all-reduce %s over %d ranks: busbw vs loss", units.FormatBytes(largest), ranks),
		XLabel: lossAxis, YLabel: "busbw (GB/s)", XLabels: lossTicks(losses)}
	var sizePlots []Plot // one per loss, when more than one size ran
	if len(sizes) > 1 {
		for _, l := range losses {
			name := "busbw_vs_size"
			if l != 0 {
				name += "_loss" + strconv.FormatFloat(l, 'g', -1, 64)
			}
			// Sizes as labels (one tick each, 16M rather than 1.6e+07):
			// evenly spaced, which is a log axis for the usual ×2/×4 steps.
			p := Plot{Name: name, Title: fmt.Sprintf("ring all-reduce over %d ranks, loss %s: busbw vs size", ranks, pct(l)),
				XLabel: "all-reduce size (bytes)", YLabel: "busbw (GB/s)"}
			for _, z := range sizes {
				p.XLabels = append(p.XLabels, units.FormatBytes(z))
			}
			sizePlots = append(sizePlots, p)
		}
	}
	var order []string
	res.Points = len(cells)
	for _, c := range cells {
		result := c.res.Check
		if c.err != nil {
			result = "FAILED: " + c.err.Error()
			res.Failed = append(res.Failed, fmt.Sprintf("%s, %s, loss %s (%v)", c.v.name, units.FormatBytes(c.size), pct(c.loss), c.err))
		} else if c.res.Check == collectives.CheckSkipped {
			result = "payload elided"
		} else if c.res.Check == collectives.CheckOK {
			result = "bytes verified"
		}
		keep := keepOf(c)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.v.name, c.v.fabric, units.FormatBytes(c.size), transportCells(c.loss, int64(c.res.TimeNs), busbw(c), c.frac, keep, result))
		res.Row(C("transport", c.v.name), C("qps", strconv.Itoa(c.v.qps)), C("loss", strconv.FormatFloat(c.loss, 'g', -1, 64)), C("ranks", strconv.Itoa(ranks)), C("size", units.FormatBytes(c.size)), C("bytes", strconv.FormatUint(c.res.Bytes, 10)), C("time_ns", strconv.FormatInt(int64(c.res.TimeNs), 10)), C("algbw_GBps", f4(c.res.AlgBW)), C("busbw_GBps", f4(busbw(c))), C("fraction_of_nic", f4(c.frac)), C("vs_no_loss", f4(keep)), C("check", c.res.Check), C("error", errText(c.err)), C("fabric", c.v.fabric))
		if !slices.Contains(order, c.v.name) {
			order = append(order, c.v.name)
		}
	}
	tw.Flush()
	// Series in variant order; cells are size-major, so each series' points
	// come out in ascending size and loss order.
	for _, name := range order {
		s := Series{Name: name}
		for _, c := range cells {
			if c.v.name == name && c.size == largest {
				s.X = append(s.X, float64(slices.Index(losses, c.loss)))
				s.Y = append(s.Y, busbw(c))
			}
		}
		plotp.Series = append(plotp.Series, s)
		for i, l := range losses {
			if i >= len(sizePlots) {
				break
			}
			s := Series{Name: name}
			for _, c := range cells {
				if c.v.name == name && c.loss == l {
					s.X = append(s.X, float64(slices.Index(sizes, c.size)))
					s.Y = append(s.Y, busbw(c))
				}
			}
			sizePlots[i].Series = append(sizePlots[i].Series, s)
		}
	}
	res.Table = tb.String()
	res.Plots = append([]Plot{plotp}, sizePlots...)
	// The checks are the published claims, tested at every size that ran
	// (the claim names the size; its detail says what was measured).
	for _, z := range sizes {
		var at []*arCell
		atBase := map[string]float64{}
		for _, c := range cells {
			if c.size == z {
				at = append(at, c)
				atBase[c.v.name] = base[key{c.size, c.v.name}]
			}
		}
		res.Checks = append(res.Checks, arChecks(units.FormatBytes(z), at, atBase, g.roceQPs)...)
	}
	return res, nil
}

func busbw(c *arCell) float64 {
	if c.err != nil {
		return 0
	}
	return c.res.BusBW
}

// The bands of the T2/T3 claims, from the published wording (the paper
// gives no decimals for any of them).
var (
	bandBeats    = Above(1, "×", "'beats' is a strict ordering with no margin published: any ratio above 1, a tie does not beat")
	bandNoBetter = AtMost(1.02, "×",
		"'16 no better than 8': at most 2% above 8 QPs, the resolution at which two bars of a published chart read as equal")
	bandHalf     = Between(35, 65, "%", "'about half' read as 1/2 ± 0.15 (the paper gives no decimals)")
	bandThird    = Between(20, 50, "%", "'≈ 1/3' read as a third within a factor ~1.5 either way (no decimals published)")
	bandUnusable = AtMost(10, "%", "'unusable' read as keeping at most a tenth of the loss-free busbw")
	bandNearly   = AtLeast(80, "%", "'nearly unaffected' read as losing at most a fifth (no number published)")
	bandCollapse = AtMost(50, "%", "'collapses' read as losing at least half of the loss-free busbw")
)

// checks states the T2/T3 claims at one size (sz, e.g. "64M"): cells are
// that size's, base each variant's loss-free busbw, qps the RoCE QP counts
// that ran.
func arChecks(sz string, cells []*arCell, base map[string]float64, qps []int) []Check {
	get := func(mrc bool, q int, loss float64) *arCell {
		for _, c := range cells {
			if c.v.mrc == mrc && (mrc || c.v.qps == q) && c.loss == loss {
				return c
			}
		}
		return nil
	}
	p := sz + ", "
	var cs []Check
	m0 := get(true, 1, 0)
	r1, r8, r16 := get(false, 1, 0), get(false, 8, 0), get(false, 16, 0)
	claim := p + "no loss: one MRC QP beats RoCE 16 QPs (busbw MRC / RoCE 16)"
	switch {
	case m0 == nil:
		cs = append(cs, notTestable("T2", claim, "one MRC QP beats 16 RoCE QPs", "exp.losses has no 0 (no loss-free cell)"))
	case r16 == nil:
		cs = append(cs, notTestable("T2", claim, "one MRC QP beats 16 RoCE QPs", "exp.roceQPs does not list 16"))
	default:
		cs = append(cs, bandCheck("T2", claim, "one MRC QP beats 16 RoCE QPs", bandBeats, ratio(busbw(m0), busbw(r16)),
			fmt.Sprintf("MRC %.2f GB/s (%.0f%% of NIC) vs RoCE 16 QPs %.2f GB/s (%.0f%%): ×%.3f", busbw(m0), 100*m0.frac, busbw(r16), 100*r16.frac, ratio(busbw(m0), busbw(r16)))))
	}
	claim = p + "no loss: little gain past 8 RoCE QPs, 16 no better than 8 (busbw RoCE 16 / RoCE 8)"
	switch {
	case r8 == nil || r16 == nil:
		cs = append(cs, notTestable("T2", claim, "little gain past 8 QPs, 16 no better than 8", "exp.roceQPs does not list both 8 and 16, or exp.losses has no 0"))
	default:
		d := fmt.Sprintf("RoCE 16 QPs %.2f GB/s vs 8 QPs %.2f GB/s: ×%.3f", busbw(r16), busbw(r8), ratio(busbw(r16), busbw(r8)))
		if r4 := get(false, 4, 0); r4 != nil {
			d += fmt.Sprintf("; 4 QPs %.2f GB/s (8 / 4: ×%.3f)", busbw(r4), ratio(busbw(r8), busbw(r4)))
		}
		cs = append(cs, bandCheck("T2", claim, "little gain past 8 QPs, 16 no better than 8", bandNoBetter, ratio(busbw(r16), busbw(r8)), d))
	}
	claim = p + "no loss: RoCE 1 QP reaches about half of possible (busbw RoCE 1 / MRC 1, %)"
	switch {
	case m0 == nil || r1 == nil:
		cs = append(cs, notTestable("T2", claim, "RoCE 1 QP reaches about half of possible", "exp.roceQPs does not list 1, or exp.losses has no 0"))
	default:
		cs = append(cs, bandCheck("T2", claim, "RoCE 1 QP reaches about half of possible", bandHalf, 100*ratio(busbw(r1), busbw(m0)),
			fmt.Sprintf("RoCE 1 QP %.2f GB/s = %.0f%% of MRC's %.2f GB/s (possible: the busbw one MRC QP reaches at this size); %.0f%% of the NIC's line rate",
				busbw(r1), 100*ratio(busbw(r1), busbw(m0)), busbw(m0), 100*r1.frac)))
	}
	keep := func(c *arCell) float64 {
		if c == nil || c.err != nil || base[c.v.name] == 0 { // a failed cell measured nothing
			return math.NaN()
		}
		return busbw(c) / base[c.v.name]
	}
	// roceMax is the most any RoCE setup keeps at loss, with the detail.
	roceMax := func(loss float64) (float64, string) {
		m, d, unmeasured := math.Inf(-1), "", false
		for _, q := range qps {
			rc := get(false, q, loss)
			if rc == nil {
				continue
			}
			k := keep(rc)
			unmeasured = unmeasured || math.IsNaN(k)
			m = max(m, k)
			if d != "" {
				d += "; "
			}
			d += fmt.Sprintf("RoCE %d QP%s keeps %s (%.1f%% of NIC)", q, plural(q), pctOrNA(k), 100*rc.frac)
		}
		if unmeasured { // a RoCE setup without a loss-free busbw
			m = math.NaN()
		}
		return 100 * m, d
	}
	for _, l := range []struct {
		loss                       float64
		name                       string
		mClaim, mExp, rClaim, rExp string
		mBand, rBand               *Band
	}{
		{0.001, "0.1%", "MRC nearly unaffected (busbw kept of its loss-free busbw)", "0.1%: MRC nearly unaffected at large messages",
			"RoCE collapses at every QP count (the most any RoCE setup keeps)", "0.1%: RoCE collapses", bandNearly, bandCollapse},
		{0.01, "1%", "MRC keeps ≈ 1/3 of its loss-free busbw", "1%: MRC ≈ 1/3 of intended throughput",
			"RoCE unusable at every QP count (the most any RoCE setup keeps)", "1%: RoCE unusable", bandThird, bandUnusable},
	} {
		mClaim, rClaim := p+l.name+" loss: "+l.mClaim, p+l.name+" loss: "+l.rClaim
		mc := get(true, 1, l.loss)
		if mc == nil || m0 == nil {
			cs = append(cs, notTestable("T3", mClaim, l.mExp, "exp.losses does not list both 0 and "+pctNum(l.loss)))
		} else {
			cs = append(cs, bandCheck("T3", mClaim, l.mExp, l.mBand, 100*keep(mc),
				fmt.Sprintf("MRC keeps %s (%.2f of %.2f GB/s, %.1f%% of NIC)", pctOrNA(keep(mc)), busbw(mc), base[mc.v.name], 100*mc.frac)))
		}
		if v, d := roceMax(l.loss); d == "" {
			cs = append(cs, notTestable("T3", rClaim, l.rExp, "no RoCE cell at "+pctNum(l.loss)+"% loss"))
		} else {
			cs = append(cs, bandCheck("T3", rClaim, l.rExp, l.rBand, v, d))
		}
	}
	return cs
}
