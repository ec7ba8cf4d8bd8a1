package experiments

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/collectives"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
)

func init() { Register(allreduceLoss{}) }

// allreduceLoss is TARGETS T2/T3 scaled down: ring all-reduce over one MRC
// QP (uSID, spraying over every plane) against RoCE with 1 and 8 QPs
// (ECMP), with random loss on every link.
type allreduceLoss struct{}

func (allreduceLoss) Name() string { return "allreduce-loss" }
func (allreduceLoss) Title() string {
	return "ring all-reduce, MRC 1 QP vs RoCE 1 and 8 QPs, under random loss"
}

// SerialReason implements Partitionable: allreduceLoss runs collectives or transfers
// only, started between runs, so it can run partitioned.
func (allreduceLoss) SerialReason() string { return "" }

func (allreduceLoss) TargetRows() []string {
	return []string{"T2", "T3"}
}
func (allreduceLoss) ClusterSets() []string {
	return []string{"fabric.preset=C", "fabric.hosts=16"}
}
func (allreduceLoss) Params() []Param {
	return []Param{
		{Key: "size", Default: "32M", Quick: "64M", Full: "16M,64M,256M", Doc: "all-reduce sizes (nccl-tests bytes, comma-separated; the checks read the largest, busbw_vs_size plots need two or more); quick is larger than default but elides the payload, which is cheaper"},
		{Key: "losses", Default: "0,0.001,0.01", Doc: "Bernoulli loss rates on every link and direction"},
		{Key: "roceQPs", Default: "1,8", Full: "1,2,4,8,16", Doc: "RoCE QPs per pair of ranks, one variant each"},
		{Key: "payload", Default: "real", Quick: "elided", Full: "elided", Doc: "real (bytes carried and checked) or elided; quick and full elide it (full: 16 ranks × 256 MiB send/receive/scratch buffers per variant would need tens of GiB)"},
	}
}
func (allreduceLoss) Describe() string {
	return `Every host of the cluster is one rank of a ring all-reduce (nccl-tests
sizes and bus bandwidth: busbw = algbw × 2(n−1)/n). MRC: one QP per pair of
ranks, spraying over every plane on uSID paths (NSCC, trimming, selective
retransmission). RoCE: go-back-N with DCQCN on ECMP; each QP is one flow
hashed onto one plane, so one QP can use a quarter of a 4-plane NIC.
Loss is Bernoulli on every link and direction (seeded per link). "of NIC"
is busbw over the host's whole NIC (all planes); "of loss-free busbw" is
busbw over the same transport's busbw without loss. The published setup (T2/T3) is 64 NICs,
RoCE on one 400G plane with PFC; here RoCE runs on the same 4×100G planes
as MRC, which is what makes "1 QP = one plane" the limit.
exp.size may list several sizes (full: 16M,64M,256M): every transport ×
loss cell runs at each, the checks and busbw_vs_loss read the largest (the
published claims are for large messages), and busbw_vs_size plots busbw
against size, one plot per loss rate.`
}

type arVariant struct {
	name string
	qps  int
	mrc  bool
	sets []string
}

type arCell struct {
	v    arVariant
	size uint64
	loss float64
	res  collectives.Result
	frac float64
	err  error
}

// transportGrid reads the parameters the transport-comparison experiments
// share (size, losses, roceQPs, payload) and returns the variants: MRC with
// one QP on uSID paths, then RoCE on ECMP with each requested QP count.
// exp.size is a comma-separated list of sizes, returned ascending without
// repeats. Every bad parameter is reported, not only the first.
func transportGrid(env *Env) (sizes []uint64, losses []float64, payload string, vs []arVariant, err error) {
	r := newParamReader(env)
	sizes = r.sizes("size")
	losses = r.losses("losses")
	qps := r.integers("roceQPs", 1, maxParamQPs)
	payload = r.choice("payload", "real", "elided")
	if err := r.err(); err != nil {
		return nil, nil, "", nil, err
	}
	vs = []arVariant{{name: "MRC, 1 QP", qps: 1, mrc: true, sets: mrcSets(1)}}
	for _, q := range qps {
		vs = append(vs, arVariant{name: fmt.Sprintf("RoCE, %d QP%s", q, plural(q)), qps: q,
			sets: roceSets(q)})
	}
	return sizes, losses, payload, vs, nil
}

// CheckParams implements ParamChecker.
func (allreduceLoss) CheckParams(env *Env) error {
	_, _, _, _, err := transportGrid(env)
	return err
}

// PayloadBytesPerHost implements PayloadEstimator: the largest size's
// buffers, when the payload is real.
func (allreduceLoss) PayloadBytesPerHost(env *Env) uint64 {
	sizes, _, payload, _, err := transportGrid(env)
	if err != nil || payload != "real" {
		return 0
	}
	return collectiveBuffers(sizes[len(sizes)-1])
}

func (x allreduceLoss) Run(ctx context.Context, env *Env) (*Results, error) {
	sizes, losses, payload, vs, err := transportGrid(env)
	if err != nil {
		return nil, err
	}
	res := &Results{Columns: []string{"transport", "qps", "loss", "ranks", "size", "bytes", "time_ns", "algbw_GBps", "busbw_GBps", "fraction_of_nic", "vs_no_loss", "check", "error"}}
	cfgs := make([]config.Config, len(vs))
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
					label = collectives.FormatBytes(size) + ", " + label
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
				env.logf("allreduce-loss: %-12s loss %-6g size %-5s busbw %6.2f GB/s %v\n", v.name, loss, collectives.FormatBytes(size), cell.res.BusBW, errText(cell.err))
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
	fmt.Fprintf(tw, "transport\tsize\t%s\n", transportColumns(nic))
	plotp := Plot{Name: "busbw_vs_loss", Title: fmt.Sprintf("ring all-reduce %s over %d ranks: busbw vs loss", collectives.FormatBytes(largest), ranks),
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
				p.XLabels = append(p.XLabels, collectives.FormatBytes(z))
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
			res.Failed = append(res.Failed, fmt.Sprintf("%s, %s, loss %s (%v)", c.v.name, collectives.FormatBytes(c.size), pct(c.loss), c.err))
		} else if c.res.Check == collectives.CheckSkipped {
			result = "payload elided"
		} else if c.res.Check == collectives.CheckOK {
			result = "bytes verified"
		}
		keep := keepOf(c)
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.v.name, collectives.FormatBytes(c.size), transportCells(c.loss, int64(c.res.TimeNs), busbw(c), c.frac, keep, result))
		res.Rows = append(res.Rows, []string{c.v.name, strconv.Itoa(c.v.qps), strconv.FormatFloat(c.loss, 'g', -1, 64), strconv.Itoa(ranks), collectives.FormatBytes(c.size),
			strconv.FormatUint(c.res.Bytes, 10), strconv.FormatInt(int64(c.res.TimeNs), 10), f4(c.res.AlgBW), f4(busbw(c)), f4(c.frac), f4(keep), c.res.Check, errText(c.err)})
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
	// The checks are the published claims, which are for large messages:
	// they read the largest size only.
	var at []*arCell
	atBase := map[string]float64{}
	for _, c := range cells {
		if c.size == largest {
			at = append(at, c)
			atBase[c.v.name] = base[key{c.size, c.v.name}]
		}
	}
	res.Checks = x.checks(at, atBase, nic)
	for i := range res.Checks {
		res.Checks[i].Measured = "at " + collectives.FormatBytes(largest) + ": " + res.Checks[i].Measured
	}
	return res, nil
}

func busbw(c *arCell) float64 {
	if c.err != nil {
		return 0
	}
	return c.res.BusBW
}

// checks states the T2/T3 claims this setup can test.
func (allreduceLoss) checks(cells []*arCell, base map[string]float64, nic float64) []Check {
	get := func(mrc bool, qps int, loss float64) *arCell {
		for _, c := range cells {
			if c.v.mrc == mrc && (mrc || c.v.qps == qps) && c.loss == loss {
				return c
			}
		}
		return nil
	}
	var roceQPs []int
	for _, c := range cells {
		if !c.v.mrc && c.loss == 0 {
			roceQPs = append(roceQPs, c.v.qps)
		}
	}
	var cs []Check
	m0 := get(true, 1, 0)
	if m0 == nil {
		return nil
	}
	if r1 := get(false, 1, 0); r1 != nil {
		cs = append(cs, Check{Target: "T2", Claim: "no loss: one MRC QP beats RoCE 1 QP",
			Expected: "RoCE 1 QP ≈ half of possible, MRC 1 QP above it",
			Measured: fmt.Sprintf("MRC %.2f GB/s (%.0f%% of NIC) vs RoCE 1 QP %.2f GB/s (%.0f%%)", busbw(m0), 100*m0.frac, busbw(r1), 100*r1.frac),
			Pass:     busbw(m0) > busbw(r1)})
	}
	if len(roceQPs) > 1 {
		mx := roceQPs[len(roceQPs)-1]
		if rm := get(false, mx, 0); rm != nil {
			cs = append(cs, Check{Target: "T2", Claim: fmt.Sprintf("no loss: one MRC QP at least matches RoCE %d QPs", mx),
				Expected: "one MRC QP beats 16 RoCE QPs",
				Measured: fmt.Sprintf("MRC %.2f GB/s vs RoCE %d QPs %.2f GB/s (MRC/RoCE %.3f)", busbw(m0), mx, busbw(rm), busbw(m0)/busbw(rm)),
				// "beats" within 2%: both are near line rate here, so a
				// tie is the shape the published result predicts at this scale.
				Pass: busbw(m0) >= 0.98*busbw(rm)})
		}
	}
	keep := func(c *arCell) float64 {
		if c == nil || base[c.v.name] == 0 {
			return 0
		}
		return busbw(c) / base[c.v.name]
	}
	for _, l := range []struct {
		loss  float64
		claim string
		exp   string
		ok    func(m float64, roce []float64) bool
	}{
		{0.001, "0.1% loss: MRC nearly unaffected (keeps ≥ 80% of its no-loss busbw) and keeps more than every RoCE setup", "MRC nearly unaffected at large messages, RoCE collapses",
			func(m float64, roce []float64) bool { return m >= 0.8 && m > slicesMax(roce) }},
		{0.01, "1% loss: MRC keeps more of its no-loss busbw than every RoCE setup", "MRC ≈ 1/3 of intended throughput, RoCE unusable",
			func(m float64, roce []float64) bool { return m > slicesMax(roce) }},
	} {
		mc := get(true, 1, l.loss)
		if mc == nil {
			continue
		}
		var roce []float64
		meas := fmt.Sprintf("MRC keeps %.0f%% (%.1f%% of NIC)", 100*keep(mc), 100*mc.frac)
		for _, q := range roceQPs {
			rc := get(false, q, l.loss)
			roce = append(roce, keep(rc))
			meas += fmt.Sprintf("; RoCE %d QP%s keeps %.0f%% (%.1f%% of NIC)", q, plural(q), 100*keep(rc), 100*rc.frac)
		}
		cs = append(cs, Check{Target: "T3", Claim: l.claim, Expected: l.exp, Measured: meas, Pass: l.ok(keep(mc), roce)})
	}
	return cs
}

func slicesMax(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

func hostRateOf(cfg config.Config) uint64 { return uint64(cfg.Fabric.HostLinkBps()) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pct(f float64) string { return pctNum(f) + "%" }

// pctNum is f in percent, as short as it is exact (0.1 for 0.001): a
// tick or a cell under a "(%)" header.
func pctNum(f float64) string { return strconv.FormatFloat(100*f, 'g', -1, 64) }

func pctOrNA(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return pctCell(f) + "%"
}

// pctCell is fraction f as a table cell under a "(%)" header: percent
// with one decimal, "n/a" for NaN.
func pctCell(f float64) string {
	if math.IsNaN(f) {
		return "n/a"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64)
}

// lossAxis and lossTicks are the x axis of a plot against the loss rates
// of a grid: one category per rate, in percent.
const lossAxis = "Bernoulli loss rate on every link (%)"

func lossTicks(losses []float64) []string {
	var t []string
	for _, l := range losses {
		t = append(t, pctNum(l))
	}
	return t
}

// transportColumns and transportCells are the columns the transport grids
// (allreduce-loss, alltoall) share, after the ones naming the cell: loss
// rate, time, busbw, share of the NIC, share kept of the loss-free busbw,
// result; nic is the NIC's rate in GB/s.
func transportColumns(nic float64) string {
	return fmt.Sprintf("loss per link (%%)\ttime (µs)\tbusbw (GB/s)\tof %.0f GB/s NIC (%%)\tof loss-free busbw (%%)\tresult", nic)
}

func transportCells(loss float64, timeNs int64, busbw, ofNIC, kept float64, result string) string {
	return fmt.Sprintf("%s\t%.1f\t%.2f\t%s\t%s\t%s", pctNum(loss), float64(timeNs)/1e3, busbw, pctCell(ofNIC), pctCell(kept), result)
}

// durText is d for titles and prose: a number, a space, a unit (2 ms,
// 768.084 µs), not time.Duration's "768.084µs" beside "23.0 µs".
func durText(d time.Duration) string {
	units := []struct {
		name string
		d    time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"µs", time.Microsecond}}
	for _, u := range units {
		if d >= u.d || d <= -u.d {
			return strconv.FormatFloat(float64(d)/float64(u.d), 'f', -1, 64) + " " + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + " ns"
}

// usCell is a time in ns as a table cell under a "(µs)" header: one
// decimal, or "never" for a negative time (an event that did not happen).
func usCell(ns int64) string {
	if ns < 0 {
		return "never"
	}
	return strconv.FormatFloat(float64(ns)/1e3, 'f', 1, 64)
}

func f4(f float64) string {
	if math.IsNaN(f) {
		return ""
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
