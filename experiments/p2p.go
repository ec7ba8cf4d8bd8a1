package experiments

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/units"
)

// p2p is TARGETS T1: one-way latency of a 2-byte write within one T0 and
// across T1, and the goodput of a stream of w-byte writes.
func init() {
	Register(&Experiment{
		Name:    "p2p",
		Title:   "point-to-point latency (2 B) and write bandwidth, within one T0 and across T1",
		Targets: []string{"T1"},
		Cluster: paperCluster("fabric.preset=C", "fabric.hosts=16", "fabric.planes=8"),
		Params: []Param{
			{Key: "writes", Default: "4K,16K,32K,64K,256K,1M", Quick: "4K,32K,1M", Doc: "write sizes for the bandwidth rows"},
			{Key: "stream", Default: "64M", Quick: "32M", Doc: "bytes per bandwidth measurement (a stream of writes of one size, one QP; long enough that the first RTT of ramp-up does not dominate)"},
		},
		Setup: p2pSetup,
		Args:  Typed[p2pParams]{Read: readP2P, Run: runP2P},
	})
}

const p2pSetup = `Host 0 writes to host 1 (same T0: host–T0–host) and to the last host
(across T1: host–T0–T1–T0–host) over one QP. Latency: a single 2-byte
RDMA WriteImm, from the post to the moment the responder's application sees
its completion (one way, virtual time): serialization and propagation, the
switch latency of every switch crossed and the NIC's transmit and receive
latency, with the paper's timing (config.PaperTimingSets, fitted to this
experiment's two latencies: the latency checks test the fit and the model's
hop accounting, not an independent prediction). Bandwidth: a stream of
writes of one size, all posted at once, goodput over the QP's line rate (MRC:
the whole NIC, every plane; RoCE 1 QP: one plane). The published setup
(T1) is 8×100G planes; so is this cluster. The stream is long (exp.stream)
so the first RTT of ramp-up does not dominate: with 4 MiB streams MRC
measured 87% within T0 and 80% across T1 (the longer RTT costs more), with
32 MiB 95% and 94%; the goodput's time runs from the post to the last
completion, so it also pays the NIC latency once. Neither transport models a
per-work-request cost, so goodput barely depends on the write size.`

// latencyBytes is the size of the latency probe: one WriteImm of 2 bytes.
const latencyBytes = 2

type p2pVariant struct {
	name string
	sets []string
}

var p2pVariants = []p2pVariant{
	{"MRC, 1 QP", mrcSets(1)},
	{"RoCE, 1 QP", roceSets(1)},
}

// p2pOnce moves length bytes from a to b in writes of w bytes over one QP
// and returns (one-way time to the WriteImm, goodput bps, line rate bps).
func p2pOnce(env *Env, cfg config.Config, a, b int, length, w uint64, events *uint64) (sim.Time, float64, float64, error) {
	c, err := env.NewCluster(cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	env.Watch(c)
	defer c.Close()
	ps, err := c.Connect(a, b)
	if err != nil {
		return 0, 0, 0, err
	}
	src := c.Region(a, length, func(p []byte) {
		for i := range p {
			p[i] = byte(i*7 + 1)
		}
	})
	dst := c.Region(b, length, nil)
	tr, err := c.StartTransfer(ps[0], src, dst, length, w)
	if err != nil {
		return 0, 0, 0, err
	}
	c.RunWhile(func() bool { return !tr.Done() })
	*events += c.Executed()
	if !tr.Done() || len(tr.Errors) > 0 {
		return 0, 0, 0, fmt.Errorf("transfer %d B in %d B writes h%d→h%d did not complete (%d errors)", length, w, a, b, len(tr.Errors))
	}
	if cfg.Transport.Payload == config.PayloadReal && !bytes.Equal(src.Buf[:length], dst.Buf[:length]) {
		return 0, 0, 0, fmt.Errorf("h%d→h%d: bytes differ", a, b)
	}
	line := float64(cfg.Fabric.HostLinkBps()) * float64(cfg.Fabric.Planes)
	if k, _ := cluster.LookupTransport(cfg.Transport.Kind); k.SinglePlane { // one plane per QP
		line = float64(cfg.Fabric.HostLinkBps()) * float64(min(len(ps), cfg.Fabric.Planes))
	}
	return tr.RecvImmAt - tr.Start, tr.GoodputBps(), line, nil
}

// p2pParams are p2p's parameters: the write sizes of the bandwidth rows
// and the stream length.
type p2pParams struct {
	writes []uint64
	stream uint64
}

func readP2P(env *Env) (p2pParams, error) {
	r := newParamReader(env)
	var p p2pParams
	for _, s := range r.list("writes") {
		w, ok := parseParamBytes(s)
		if !ok {
			r.bad("writes", "%q is not a size; must be a comma-separated list of %ss", s, bytesRange)
			break
		}
		p.writes = append(p.writes, w)
	}
	p.stream = r.size("stream")
	return p, r.err()
}

func runP2P(ctx context.Context, env *Env, p p2pParams) (*Results, error) {
	writes, stream := p.writes, p.stream
	res := &Results{}
	// row is one measurement: the cells naming it, then what it measured.
	row := func(v p2pVariant, path string, to int, measure string, w uint64, measured ...Cell) {
		res.Row(append([]Cell{C("transport", v.name).Show("transport", v.name), C("path", path).Show("path", path),
			C("from", "0"), C("to", strconv.Itoa(to)), C("measure", measure).Show("measure", measure),
			C("write_bytes", strconv.FormatUint(w, 10)).Show("write (bytes)", units.FormatBytes(w))}, measured...)...)
	}
	type key struct{ v, path string }
	lat := map[key]sim.Time{}
	frac := map[key]map[uint64]float64{}
	var plots []Plot
	bw := Plot{Name: "bandwidth_vs_write", Title: "one QP: goodput vs write size", XLabel: "write size (bytes)", YLabel: "goodput (% of the QP's line rate)", LogX: true}
	point, points := 0, len(p2pVariants)*2*(1+len(writes))
	for _, v := range p2pVariants {
		cfg, err := override(env.Config, v.sets)
		if err != nil {
			return nil, err
		}
		last := cfg.Fabric.Hosts - 1
		for _, pth := range []struct {
			name string
			to   int
		}{{"within T0", 1}, {"across T1", last}} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			k := key{v.name, pth.name}
			env.Point(point, points, fmt.Sprintf("%s %s, 2 B latency", v.name, pth.name))
			point++
			l, _, _, err := p2pOnce(env, cfg, 0, pth.to, latencyBytes, latencyBytes, &res.Events)
			if err != nil {
				return nil, fmt.Errorf("%s %s latency: %w", v.name, pth.name, err)
			}
			lat[k] = l
			row(v, pth.name, pth.to, "latency", latencyBytes,
				C("latency_ns", strconv.FormatInt(int64(l), 10)).Show("one-way latency (µs)", fmt.Sprintf("%.3f", float64(l)/1e3)),
				C("goodput_bps", "").Show("goodput (Gb/s)", ""), C("fraction_of_line_rate", "").Show("of line rate (%)", ""))
			frac[k] = map[uint64]float64{}
			s := Series{Name: v.name + ", " + pth.name}
			for _, w := range writes {
				env.Point(point, points, fmt.Sprintf("%s %s, %s writes", v.name, pth.name, units.FormatBytes(w)))
				point++
				_, g, line, err := p2pOnce(env, cfg, 0, pth.to, max(stream, w), w, &res.Events)
				if err != nil {
					return nil, fmt.Errorf("%s %s %d B writes: %w", v.name, pth.name, w, err)
				}
				frac[k][w] = g / line
				row(v, pth.name, pth.to, "bandwidth", w, C("latency_ns", "").Show("one-way latency (µs)", ""),
					C("goodput_bps", strconv.FormatFloat(g, 'f', 0, 64)).Show("goodput (Gb/s)", fmt.Sprintf("%.1f", g/1e9)),
					C("fraction_of_line_rate", f4(g/line)).Show("of line rate (%)", pctCell(g/line)))
				s.X = append(s.X, float64(w))
				s.Y = append(s.Y, 100*g/line)
			}
			bw.Series = append(bw.Series, s)
			env.logf("p2p: %s %s done\n", v.name, pth.name)
		}
	}
	plots = append(plots, bw)
	res.Table, res.Plots = res.table.Text(), plots
	// Checks: the MRC rows (the published T1 numbers are MRC's).
	res.Checks = append(res.Checks, p2pChecks(lat[key{p2pVariants[0].name, "within T0"}], lat[key{p2pVariants[0].name, "across T1"}],
		lat[key{p2pVariants[1].name, "within T0"}], lat[key{p2pVariants[1].name, "across T1"}],
		frac[key{p2pVariants[0].name, "within T0"}], frac[key{p2pVariants[0].name, "across T1"}])...)
	return res, nil
}

// p2p's published numbers (TARGETS T1).
const (
	p2pLatT0, p2pLatT1 = 5.09, 6.54 // µs, 2 B one way
	p2pLineShare       = 96.0       // % of line rate at 32 KB
)

// p2pWhyLatency is the reason of the latency bands.
const p2pWhyLatency = "±20%, the issue's band for the paper's two-digit latencies; " +
	"the switch and NIC latencies (config.PaperTimingSets) were fitted to 5.09 and 6.54 µs, so this tests the fit and the model's hop accounting, not an independent prediction"

// p2pChecks are T1's checks on the MRC rows (inT0, acrossT1: one-way 2 B
// latencies; fracIn, fracAcross: goodput over line rate by write size);
// the RoCE latencies go into the detail.
func p2pChecks(inT0, acrossT1, roceIn, roceAcross sim.Time, fracIn, fracAcross map[uint64]float64) []Check {
	us := func(t sim.Time) float64 { return float64(t) / 1e3 }
	gap := us(acrossT1) - us(inT0)
	detail := fmt.Sprintf("MRC %.3f µs within T0, %.3f µs across T1 (+%.3f µs); RoCE %.3f / %.3f µs", us(inT0), us(acrossT1), gap, us(roceIn), us(roceAcross))
	cs := []Check{
		bandCheck("T1", "2 B one-way latency within one T0 (MRC)", "5.09 µs",
			Around(p2pLatT0, 0.2, "µs", p2pWhyLatency), us(inT0), detail),
		bandCheck("T1", "2 B one-way latency across T1 (MRC)", "6.54 µs",
			Around(p2pLatT1, 0.2, "µs", p2pWhyLatency), us(acrossT1), detail),
		bandCheck("T1", "2 B latency: across T1 costs +1.45 µs more than within one T0 (two fabric links, two switches)", "+1.45 µs",
			Around(p2pLatT1-p2pLatT0, 0.2, "µs", "±20%, the issue's band; the switch latency was fitted to this gap, so what it still tests is the hop count "+
				"(two more links and two more switches across T1) and the frame's serialization"),
			gap, detail),
	}
	const w32 = 32 << 10
	a, okA := fracIn[w32]
	b, okB := fracAcross[w32]
	if !okA || !okB {
		why := "exp.writes has no 32K write size"
		return append(cs,
			notTestable("T1", "32 KiB writes reach ≈ 96% of line rate within one T0 and across T1 (MRC, the lower of the two)", "~96% of line rate at 32 KB", why),
			notTestable("T1", "32 KiB writes: the same goodput within one T0 and across T1 (MRC, difference in points)", "same within T0 and across T1", why))
	}
	bw := fmt.Sprintf("MRC %.1f%% within T0, %.1f%% across T1", 100*a, 100*b)
	return append(cs,
		bandCheck("T1", "32 KiB writes reach ≈ 96% of line rate within one T0 and across T1 (MRC, the lower of the two)", "~96% of line rate at 32 KB",
			Between(p2pLineShare-3, p2pLineShare+3, "%", "the paper's \"~96%\" is the header ceiling (4096 B of payload per 4262 B on the wire: 96.1%), i.e. line rate; "+
				"±3 points leave room for a finite stream's start-up (its first RTT, the NIC latency once) but not for a window-limited QP"),
			100*min(a, b), bw),
		bandCheck("T1", "32 KiB writes: the same goodput within one T0 and across T1 (MRC, difference in points)", "same within T0 and across T1",
			Between(-2, 2, "pt", "\"same\": the longer path adds 2.9 µs to the RTT (twice the gap), which costs a stream of ≥ 32 MiB (≥ 335 µs at 800G) under 1 point of start-up; "+
				"±2 points, so a path that is window-limited across T1 and not within T0 differs"),
			100*(a-b), bw))
}
