package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/experiments"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/sim"
	"github.com/vcluster/vcluster/wallclock"
)

type pingRow struct {
	plane, from, to int
	where           string
	frame           int
	rtt, ideal      time.Duration
	ok              bool
}

type smokeOut struct {
	head      string
	preflight experiments.Section
}

// smokeRun builds the configured cluster, pings across it and writes the
// report directory. Everything it writes is a function of the config and
// seed, so two runs give identical files (manifest.json aside).
func smokeRun(w io.Writer, obs *observer, cfg config.Config) (*smokeOut, error) {
	wall := wallclock.New()
	// The preflight pings an idle fabric until its loop runs dry: the
	// path-quality control plane's periodic sampling would never let it,
	// and has no load to weigh here (unweighted, forwarding pathquality
	// is ECMP).
	cfg.Fabric.PathQuality.Mode = config.PathQualityOff
	c, err := cluster.New(cfg, wall)
	if err != nil {
		return nil, usageError(err)
	}
	defer c.Close()
	dir := cfg.Output.Dir
	topo := c.Topo
	// Pairs: host 0 to a neighbour on its T0 (if any) and to the last host.
	last := len(c.Hosts) - 1
	var pairs [][2]int
	if sub, _ := topo.HostSubnet(1); last >= 1 && sub == 0 {
		pairs = append(pairs, [2]int{0, 1})
	}
	if s, _ := topo.HostSubnet(last); s != 0 {
		pairs = append(pairs, [2]int{0, last})
	}
	const payload = 56
	frame := fabric.EthHeaderLen + fabric.IPv6HeaderLen + 8 + payload
	if topo.Mode == fabric.ForwardUSID {
		frame += fabric.IPv6HeaderLen
	}
	var rows []*pingRow
	at := sim.Time(0)
	for plane := 0; plane < topo.Planes; plane++ {
		for _, pr := range pairs {
			r := &pingRow{plane: plane, from: pr[0], to: pr[1], frame: frame}
			hl, fl := topo.Hops(pr[0], pr[1])
			r.where = fmt.Sprintf("%d hops", hl+fl)
			r.ideal = 2 * topo.ZeroLoadLatency(pr[0], pr[1], frame, cfg.Fabric.IFGBytes)
			rows = append(rows, r)
			src, dst := c.Hosts[pr[0]], topo.HostAddr(pr[1], plane)
			c.Loop.At(at, func() {
				if err := src.Ping(dst, 1, uint16(len(rows)), payload, 0, func(rtt time.Duration, ok bool) { r.rtt, r.ok = rtt, ok }); err != nil {
					fmt.Fprintf(w, "ping h%d→h%d plane %d: %v\n", r.from, r.to, plane, err)
				}
			})
			at += 100 * sim.Microsecond
		}
	}
	obs.Watch(c)
	c.Loop.Run()

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "plane\tfrom\tto\tpath\tframe B\tRTT µs\tzero-load µs\tresult")
	failed := 0
	for _, r := range rows {
		res := "ok"
		switch {
		case !r.ok:
			res, failed = "TIMEOUT", failed+1
		case r.rtt != r.ideal:
			res = fmt.Sprintf("differs by %v", r.rtt-r.ideal)
		}
		fmt.Fprintf(tw, "%d\th%d\th%d\t%s\t%d\t%.3f\t%.3f\t%s\n", r.plane, r.from, r.to, r.where, r.frame, float64(r.rtt)/1e3, float64(r.ideal)/1e3, res)
	}
	tw.Flush()
	head := fmt.Sprintf("%s fabric, %d plane(s), %d hosts, %s forwarding, seed %d; %s", topo.Kind, topo.Planes, topo.Hosts, topo.Mode, cfg.Seed, transportRules(cfg))
	fmt.Fprintf(w, "vcluster run: %s\n\n%s\n", head, table.String())

	var csv bytes.Buffer
	fmt.Fprintln(&csv, "plane,from,to,hops,frame_bytes,rtt_ns,zero_load_rtt_ns,ok")
	for _, r := range rows {
		fmt.Fprintf(&csv, "%d,%d,%d,%s,%d,%d,%d,%v\n", r.plane, r.from, r.to, r.where[:1], r.frame, r.rtt.Nanoseconds(), r.ideal.Nanoseconds(), r.ok)
	}
	// counters.csv: the observer writes this cluster's block (point
	// "preflight") when it folds it, at the phase's end.
	var dot bytes.Buffer
	if err := topo.WriteDOT(&dot); err != nil {
		return nil, err
	}
	preflight := experiments.Section{Title: "Fabric check (preflight)", Body: fmt.Sprintf(`The cluster (%s) was built (switches, links, one gVisor netstack per
host) and host 0 pinged a host on its own T0 and the last host, in every
plane, through the netstacks. RTTs are virtual time; the zero-load column is
computed from the topology (serialization + propagation per hop). Files:
pings.csv, counters.csv (per-port counters: this check's fabric as point
"preflight", then every point of the experiment), topology.dot, config.yaml.

`+"```\n%s```", head, table.String())}
	for name, b := range map[string][]byte{"topology.dot": dot.Bytes(), "pings.csv": csv.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, err
		}
	}
	if failed > 0 {
		return nil, fmt.Errorf("%d pings timed out", failed)
	}
	return &smokeOut{head: head, preflight: preflight}, nil
}

func hostRate(t *fabric.Topology) uint64 {
	if t.Kind == fabric.KindClos {
		return t.Clos.HostRate
	}
	return t.FatTree.Rate
}
