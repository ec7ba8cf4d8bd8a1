package experiments

// Cells the experiments share: flows started on a cluster, fabric
// totals, the faults event log, and the transport grid of the
// transport comparisons (allreduce-loss, alltoall).

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/units"
)

// startFlow writes bytes from host src to host dst, split evenly over the
// connection's transport.qpsPerConnection QPs, in work requests of 1 MiB
// or, for long flows, of 1/1024 of a QP's share (fewer to post).
func startFlow(c *cluster.Cluster, src, dst int, bytes uint64) ([]*cluster.Transfer, error) {
	ps, err := c.Connect(src, dst)
	if err != nil {
		return nil, err
	}
	return startOn(c, ps, src, dst, bytes)
}

// startOn is startFlow on the connection's pairs ps.
func startOn(c *cluster.Cluster, ps []cluster.Pair, src, dst int, bytes uint64) ([]*cluster.Transfer, error) {
	var trs []*cluster.Transfer
	per := bytes / uint64(len(ps))
	for i, p := range ps {
		b := per
		if i == len(ps)-1 {
			b = bytes - per*uint64(len(ps)-1)
		}
		if b == 0 {
			continue
		}
		chunk := max(min(b, 1<<20), (b/1024)&^(1<<20-1))
		tr, err := c.StartTransfer(p, c.Region(src, b, nil), c.Region(dst, b, nil), b, chunk)
		if err != nil {
			return nil, err
		}
		trs = append(trs, tr)
	}
	return trs, nil
}

// fabricTotals sums PAUSE frames sent by switches, drops (switch ports and
// links) and trims over the whole fabric.
func fabricTotals(c *cluster.Cluster) (pauses, drops, trims uint64) {
	for _, s := range c.Topo.Switches {
		for _, p := range s.Ports {
			pauses += p.Counters.PauseTx
			trims += p.Counters.Trims
			for _, d := range p.Counters.Drops {
				drops += d
			}
		}
	}
	for _, l := range c.Topo.Links {
		drops += l.Counters.Lost + l.Counters.DroppedDown
	}
	return pauses, drops, trims
}

// faultLogEntry is one line of an experiment's events.jsonl: a faults
// recorder entry tagged with the fabric and the run it came from.
type faultLogEntry struct {
	Topology string `json:"topology"`
	Run      string `json:"run"`
	faults.Entry
}

// encodeFaultLog appends s's recorder entries to w as JSON lines tagged
// with topology and run.
func encodeFaultLog(w *bytes.Buffer, topology, run string, s *faults.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range s.Entries {
		if err := enc.Encode(faultLogEntry{topology, run, e}); err != nil {
			return err
		}
	}
	return nil
}

type arVariant struct {
	name   string
	qps    int
	mrc    bool
	fabric string // the fabric it runs on, as a cell: "4×100G", "1×400G+PFC"
	sets   []string
}

// grid is what the transport-comparison experiments (allreduce-loss,
// alltoall) share: sizes (ascending, no repeats), loss rates, payload,
// the RoCE fabric (exp.roceFabric), the host count (exp.hosts) and the
// variants: MRC with one QP on uSID paths, then RoCE on ECMP with each
// requested QP count, each with its config overrides.
type grid struct {
	sizes      []uint64
	losses     []float64
	payload    string
	roceFabric string
	hosts      int
	roceQPs    []int
	vs         []arVariant
}

// fabricCell names the fabric of cfg as a table cell: planes × link
// speed, "+PFC" where PFC is on.
func fabricCell(planes int, speed string, pfc bool) string {
	s := fmt.Sprintf("%d×%s", planes, speed)
	if pfc {
		s += "+PFC"
	}
	return s
}

// transportGrid reads the parameters the transport-comparison experiments
// share (size, losses, roceQPs, payload, roceFabric, hosts). Every bad
// parameter is reported, not only the first.
func transportGrid(env *Env) (grid, error) {
	r := newParamReader(env)
	var g grid
	g.sizes = r.sizes("size")
	g.losses = r.losses("losses")
	g.roceQPs = r.integers("roceQPs", 1, maxParamQPs)
	g.payload = r.choice("payload", "real", "elided")
	g.roceFabric = r.choice("roceFabric", roceFabricPaper, roceFabricSamePlanes)
	hostSets, hosts := r.hosts("hosts", env.Config)
	if err := r.err(); err != nil {
		return grid{}, err
	}
	g.hosts = hosts
	f := env.Config.Fabric
	g.vs = []arVariant{{name: "MRC, 1 QP", qps: 1, mrc: true, fabric: fabricCell(f.Planes, f.HostLinkSpeed, f.Queue.PFC.Enabled),
		sets: mrcSets(1, hostSets...)}}
	rf := fabricCell(f.Planes, f.HostLinkSpeed, f.Queue.PFC.Enabled)
	if g.roceFabric == roceFabricPaper {
		rf = fabricCell(1, units.FormatSpeed(uint64(max(f.Planes, 1))*f.HostLinkBps()), true)
	}
	for _, q := range g.roceQPs {
		g.vs = append(g.vs, arVariant{name: fmt.Sprintf("RoCE, %d QP%s", q, plural(q)), qps: q, fabric: rf,
			sets: roceSets(q, append(paperRoCESets(env.Config, g.roceFabric), hostSets...)...)})
	}
	return g, nil
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

func hostRateOf(cfg config.Config) uint64 { return uint64(cfg.Fabric.HostLinkBps()) }
