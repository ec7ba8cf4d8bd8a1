package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vcluster/vcluster/fabric"
)

// The --metrics endpoint. The simulation is single-threaded and its
// structures are not safe to read from another goroutine, so the HTTP side
// never touches them: the observer builds an immutable snapshot on the
// simulation goroutine (at points, cluster switches and at most every
// publishEvery inside the loop) and publishes it under a mutex; a scrape
// turns the latest snapshot into metrics.

// snapshot is one reading of a run, owned by nobody once published.
type snapshot struct {
	exp           string
	point, points int
	virtual       float64 // seconds, cluster being simulated
	events        uint64
	rate          float64
	clusters      int
	// counters are per point, in the order the points came; nothing
	// writes them after publishing.
	counters []*pointCounters
}

type metricsServer struct {
	addr   string // the bound address, host:port
	mu     sync.Mutex
	snap   *snapshot
	srv    *http.Server
	served chan struct{}
}

// metricsAddr fills in the host of a --metrics address: ":9464" serves on
// the loopback interface only; give a host (0.0.0.0:9464) to serve wider.
func metricsAddr(a string) (string, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", fmt.Errorf("--metrics: want [host]:port, e.g. :9464 or 127.0.0.1:0: %v", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--metrics: bad port %q", port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// startMetrics serves /metrics on addr until Close.
func startMetrics(addr string) (*metricsServer, error) {
	a, err := metricsAddr(addr)
	if err != nil {
		return nil, usageError(err)
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	m := &metricsServer{addr: ln.Addr().String(), served: make(chan struct{})}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&runCollector{m: m})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.served)
		// An error here ends the endpoint; the run goes on without it.
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

func (m *metricsServer) publish(s *snapshot) {
	m.mu.Lock()
	m.snap = s
	m.mu.Unlock()
}

func (m *metricsServer) latest() *snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap
}

// Close keeps serving the final snapshot for linger (so a scraper with a
// long interval still sees the end of a short run), then stops.
func (m *metricsServer) Close(linger time.Duration) {
	if m == nil {
		return
	}
	if linger > 0 {
		time.Sleep(linger)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.served
}

const ns = "vcluster"

var (
	dRun      = prometheus.NewDesc(ns+"_run_info", "What is running: the experiment (or preflight).", []string{"experiment"}, nil)
	dPoint    = prometheus.NewDesc(ns+"_point", "Current point of the experiment, counting from 1 (0 before the first).", nil, nil)
	dPoints   = prometheus.NewDesc(ns+"_points", "Points of the experiment (0: not known).", nil, nil)
	dVirtual  = prometheus.NewDesc(ns+"_virtual_time_seconds", "Virtual time reached by the cluster being simulated.", nil, nil)
	dEvents   = prometheus.NewDesc(ns+"_events_total", "Simulation events executed (every watched cluster of the run).", nil, nil)
	dRate     = prometheus.NewDesc(ns+"_events_per_second", "Events executed per wall-clock second, recently.", nil, nil)
	dClusters = prometheus.NewDesc(ns+"_clusters_total", "Clusters built and simulated so far.", nil, nil)
	// Fabric and transport counters are per point: experiment is the
	// phase (an experiment's name, "preflight"), point the label the
	// experiment gave the point ("MRC, loss 1%"; "" for a phase without
	// points); a point's clusters add up. A finished point keeps its final
	// values.
	portLabels = []string{"experiment", "point", "tier", "plane"}
	dPorts     = prometheus.NewDesc(ns+"_ports", "Ports in the group (tier nic/t0/t1/t2, plane), summed over the point's clusters.", portLabels, nil)
	dTxPkts    = prometheus.NewDesc(ns+"_port_tx_packets_total", "Frames transmitted by ports.", portLabels, nil)
	dTxBytes   = prometheus.NewDesc(ns+"_port_tx_bytes_total", "Bytes transmitted by ports.", portLabels, nil)
	dRxPkts    = prometheus.NewDesc(ns+"_port_rx_packets_total", "Frames received by ports.", portLabels, nil)
	dRxBytes   = prometheus.NewDesc(ns+"_port_rx_bytes_total", "Bytes received by ports.", portLabels, nil)
	dDrops     = prometheus.NewDesc(ns+"_port_drops_total", "Frames dropped by ports, by reason.", append(portLabels[:4:4], "reason"), nil)
	dECN       = prometheus.NewDesc(ns+"_port_ecn_marks_total", "Frames ECN-marked (CE) by egress queues.", portLabels, nil)
	dTrims     = prometheus.NewDesc(ns+"_port_trims_total", "Frames trimmed to their headers.", portLabels, nil)
	dPauseTx   = prometheus.NewDesc(ns+"_port_pfc_pause_tx_total", "PFC PAUSE frames sent.", portLabels, nil)
	dPauseRx   = prometheus.NewDesc(ns+"_port_pfc_pause_rx_total", "PFC PAUSE frames received.", portLabels, nil)
	dLost      = prometheus.NewDesc(ns+"_link_lost_total", "Frames lost on the link leaving the port (loss model).", portLabels, nil)
	dMaxQ      = prometheus.NewDesc(ns+"_port_max_queue_bytes", "Largest egress queue seen on any port of the group.", portLabels, nil)
	qpLabels   = []string{"experiment", "point", "transport"}
	dQPs       = prometheus.NewDesc(ns+"_transport_queue_pairs", "Queue pairs created (both ends), summed over the point's clusters.", qpLabels, nil)
	dData      = prometheus.NewDesc(ns+"_transport_data_packets_total", "Data packets sent for the first time.", qpLabels, nil)
	dRetx      = prometheus.NewDesc(ns+"_transport_retransmissions_total", "Data packets retransmitted.", qpLabels, nil)
	dTimeouts  = prometheus.NewDesc(ns+"_transport_timeouts_total", "Retransmission timeouts.", qpLabels, nil)
	dNacks     = prometheus.NewDesc(ns+"_transport_nacks_received_total", "NACKs received.", qpLabels, nil)
	dCNPs      = prometheus.NewDesc(ns+"_transport_cnps_sent_total", "Congestion notification packets sent.", qpLabels, nil)
	dTrimRx    = prometheus.NewDesc(ns+"_transport_trimmed_received_total", "Trimmed packets received.", qpLabels, nil)
	dECNRx     = prometheus.NewDesc(ns+"_transport_ecn_marked_received_total", "CE-marked data packets received.", qpLabels, nil)
	dBytesDone = prometheus.NewDesc(ns+"_transport_bytes_completed_total", "Bytes acknowledged and completed at requesters.", qpLabels, nil)
)

// Packet conservation, fabric-wide, per point: sent = delivered + Σ
// dropped + lost + Σ in_flight, exactly, in every scrape
// (fabric.Conservation).
var (
	fabLabels    = []string{"experiment", "point"}
	dFabSent     = prometheus.NewDesc(ns+"_fabric_frames_sent_total", "Frames put into the fabric: handed to ports by NICs (and probes), and PFC frames the ports generated.", fabLabels, nil)
	dFabDeliv    = prometheus.NewDesc(ns+"_fabric_frames_delivered_total", "Frames the fabric handed to NICs, and PFC frames taken by the port they reached.", fabLabels, nil)
	dFabDropped  = prometheus.NewDesc(ns+"_fabric_frames_dropped_total", "Frames dropped in the fabric, by reason: the port drop reasons, black_hole (switch), fcs (bit errors on a link) and link_down.", append(fabLabels[:2:2], "reason"), nil)
	dFabLost     = prometheus.NewDesc(ns+"_fabric_frames_lost_total", "Frames lost on links (loss model); the sum of vcluster_link_lost_total.", fabLabels, nil)
	dFabInFlight = prometheus.NewDesc(ns+"_fabric_frames_in_flight", "Frames in the fabric at the reading (a finished point: at its end): on links (where=link) and in egress queues (where=queue).", append(fabLabels[:2:2], "where"), nil)

	// The programmable ToRs (fabric.torMulticast), summed over the fabric.
	dTorGroups      = prometheus.NewDesc(ns+"_tor_groups", "Multicast forwarding table entries in the programmable ToRs (OrderRE) at the reading.", fabLabels, nil)
	dTorGroupEvents = prometheus.NewDesc(ns+"_tor_group_events_total", "Programmable-ToR table events: groups created, deleted, aged out, refused (table_full); fast paths registered, unregistered.", append(fabLabels[:2:2], "event"), nil)
	dTorFReTx       = prometheus.NewDesc(ns+"_tor_fretx_total", "FReTx packets the sender ToRs took from their hosts.", fabLabels, nil)
	dTorCopies      = prometheus.NewDesc(ns+"_tor_copies_total", "FReTx copies the sender ToRs sent onto fast paths (each FReTx itself is one).", fabLabels, nil)
	dTorDuplicates  = prometheus.NewDesc(ns+"_tor_duplicates_dropped_total", "FReTx copies the receiver ToRs dropped as duplicates (also in vcluster_fabric_frames_dropped_total reason duplicate).", fabLabels, nil)

	// The path-quality control plane (fabric.pathQuality): every switch
	// port's latest sample period, every (switch, subnet) advertisement,
	// the control plane's totals and each switch's HDC captures. The
	// links and routes are the point's latest cluster's.
	pqLinkLabels    = []string{"experiment", "point", "switch", "port"}
	pqRouteLabels   = []string{"experiment", "point", "switch", "subnet"}
	dPQUtilization  = prometheus.NewDesc(ns+"_pathquality_link_utilization", "Share of the link's capacity the port sent over the last sample period (0..1).", pqLinkLabels, nil)
	dPQScore        = prometheus.NewDesc(ns+"_pathquality_link_score", "The link's quality score over the last sample period (0..1: bandwidth, queue and delay factors, weighted).", pqLinkLabels, nil)
	dPQQuality      = prometheus.NewDesc(ns+"_pathquality_link_quality_gbps", "The link's capacity times its score, Gb/s.", pqLinkLabels, nil)
	dPQAdvertised   = prometheus.NewDesc(ns+"_pathquality_advertised_gbps", "The path bandwidth the switch last advertised toward the subnet, Gb/s.", pqRouteLabels, nil)
	dPQUpdates      = prometheus.NewDesc(ns+"_pathquality_updates_total", "Path-bandwidth UPDATE messages sent (one per neighbour and change).", fabLabels, nil)
	dPQSuppressed   = prometheus.NewDesc(ns+"_pathquality_updates_suppressed_total", "Path-bandwidth changes damping held back.", fabLabels, nil)
	dPQUpdateBytes  = prometheus.NewDesc(ns+"_pathquality_update_bytes_total", "Encoded bytes of the UPDATE messages sent.", fabLabels, nil)
	dPQWeightChange = prometheus.NewDesc(ns+"_pathquality_weight_changes_total", "Next-hop weight changes that moved buckets.", fabLabels, nil)
	dHDCRecords     = prometheus.NewDesc(ns+"_hdc_records_total", "High-delay captures at the switch (frames queued beyond their class's threshold).", []string{"experiment", "point", "switch"}, nil)
)

// runCollector turns the latest snapshot into metrics; it never reads the
// simulation.
type runCollector struct{ m *metricsServer }

func (c *runCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dRun, dPoint, dPoints, dVirtual, dEvents, dRate, dClusters, dPorts, dTxPkts, dTxBytes, dRxPkts, dRxBytes,
		dDrops, dECN, dTrims, dPauseTx, dPauseRx, dLost, dMaxQ, dFabSent, dFabDeliv, dFabDropped, dFabLost, dFabInFlight, dTorGroups, dTorGroupEvents, dTorFReTx, dTorCopies, dTorDuplicates,
		dPQUtilization, dPQScore, dPQQuality, dPQAdvertised, dPQUpdates, dPQSuppressed, dPQUpdateBytes, dPQWeightChange, dHDCRecords, dQPs, dData, dRetx, dTimeouts, dNacks, dCNPs, dTrimRx, dECNRx, dBytesDone} {
		ch <- d
	}
}

func (c *runCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.latest()
	if s == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge(dRun, 1, s.exp)
	point := 0
	if s.points > 0 {
		point = s.point + 1
	}
	gauge(dPoint, float64(point))
	gauge(dPoints, float64(s.points))
	gauge(dVirtual, s.virtual)
	counter(dEvents, s.events)
	gauge(dRate, s.rate)
	counter(dClusters, uint64(s.clusters))
	for _, p := range s.counters {
		collectPoint(p, gauge, counter)
	}
}

// collectPoint sends one point's fabric and transport counters.
func collectPoint(p *pointCounters, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	exp, point, cs := p.id.exp, p.id.point, &p.c
	keys := make([]portKey, 0, len(cs.ports))
	for k := range cs.ports {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].tier != keys[j].tier {
			return keys[i].tier < keys[j].tier
		}
		return keys[i].plane < keys[j].plane
	})
	for _, k := range keys {
		a := cs.ports[k]
		l := []string{exp, point, k.tier, strconv.Itoa(k.plane)}
		gauge(dPorts, float64(a.ports), l...)
		counter(dTxPkts, a.txPackets, l...)
		counter(dTxBytes, a.txBytes, l...)
		counter(dRxPkts, a.rxPackets, l...)
		counter(dRxBytes, a.rxBytes, l...)
		for i, r := range fabric.DropReasonNames {
			counter(dDrops, a.drops[i], append(l[:4:4], r)...)
		}
		counter(dECN, a.ecnMarks, l...)
		counter(dTrims, a.trims, l...)
		counter(dPauseTx, a.pauseTx, l...)
		counter(dPauseRx, a.pauseRx, l...)
		counter(dLost, a.linkLost, l...)
		gauge(dMaxQ, float64(a.maxQueue), l...)
	}
	if f := &cs.fabric; len(cs.ports) > 0 { // a cluster was read
		counter(dFabSent, f.Sent, exp, point)
		counter(dFabDeliv, f.Delivered, exp, point)
		for i, r := range fabric.DropReasonNames {
			counter(dFabDropped, f.Dropped[i], exp, point, r)
		}
		counter(dFabDropped, f.BlackHoled, exp, point, "black_hole")
		counter(dFabDropped, f.Corrupted, exp, point, "fcs")
		counter(dFabDropped, f.LinkDown, exp, point, "link_down")
		counter(dFabLost, f.Lost, exp, point)
		gauge(dFabInFlight, float64(f.OnLinks), exp, point, "link")
		gauge(dFabInFlight, float64(f.InQueues), exp, point, "queue")
	}
	if tc := &cs.tor; cs.torOn {
		gauge(dTorGroups, float64(tc.Groups), exp, point)
		for _, e := range []struct {
			event string
			v     uint64
		}{
			{"created", tc.Created}, {"deleted", tc.Deleted}, {"aged", tc.Aged}, {"table_full", tc.TableFull},
			{"registered", tc.Registers}, {"unregistered", tc.Unregisters},
		} {
			counter(dTorGroupEvents, e.v, exp, point, e.event)
		}
		counter(dTorFReTx, tc.FReTx, exp, point)
		counter(dTorCopies, tc.Copies, exp, point)
		counter(dTorDuplicates, tc.Duplicates, exp, point)
	}
	if pq := cs.pq; pq != nil {
		collectPathQuality(exp, point, pq, gauge, counter)
	}
	kinds := make([]string, 0, len(cs.qps))
	for k := range cs.qps {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		a := cs.qps[k]
		l := []string{exp, point, k}
		gauge(dQPs, float64(a.qps), l...)
		counter(dData, a.dataPackets, l...)
		counter(dRetx, a.retransmissions, l...)
		counter(dTimeouts, a.timeouts, l...)
		counter(dNacks, a.nacksRx, l...)
		counter(dCNPs, a.cnpsSent, l...)
		counter(dTrimRx, a.trimmedRx, l...)
		counter(dECNRx, a.ecnMarksRx, l...)
		counter(dBytesDone, a.bytesCompleted, l...)
	}
}

// runFlags are the observation flags of the commands that run simulations.
type runFlags struct {
	metrics  string
	linger   time.Duration
	progress string
}

// addRunFlags adds --metrics, --metrics-linger and --progress to cmd.
func addRunFlags(cmd *cobra.Command) *runFlags {
	f := &runFlags{}
	f.register(cmd.Flags())
	return f
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics (fabric and transport counters, events, virtual time) on `[host]:port` while the run goes, e.g. :9464 (loopback unless a host is given)")
	fs.DurationVar(&f.linger, "metrics-linger", 0, "with --metrics: keep serving the final values this long after the run (wall `duration`)")
	fs.StringVar(&f.progress, "progress", "auto", "progress display on stderr: auto (a bar on a terminal, log lines otherwise), bar, log or none")
}

// Benchmarks: `vcluster bench` has --metrics, --metrics-linger and
// --progress as persistent flags. A benchmark that builds clusters marks
// itself with markObserved(cmd) and, in RunE:
//
//	obs, stop, err := benchObserver(cmd)
//	if err != nil {
//		return err
//	}
//	defer stop()
//	obs.Begin("fattree-perm")
//	obs.Watch(c) // after cluster.New; obs.Point(i, n, label) per point
//	...
//	obs.End()
//
// --metrics on a benchmark that is not marked is a usage error.
const observedAnnotation = "vcluster/observed"

func markObserved(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[observedAnnotation] = "yes"
	return cmd
}

// checkObserved rejects --metrics on a benchmark that publishes nothing.
func checkObserved(cmd *cobra.Command) error {
	if m, _ := cmd.Flags().GetString("metrics"); m != "" && cmd.Annotations[observedAnnotation] == "" {
		return usageError(fmt.Errorf("--metrics: %s does not simulate a cluster, so it has no counters to serve", cmd.CommandPath()))
	}
	return nil
}

// benchObserver is startObserver for a benchmark, from the bench command's
// persistent flags.
func benchObserver(cmd *cobra.Command) (*observer, func(), error) {
	var f runFlags
	fs := cmd.Flags()
	f.metrics, _ = fs.GetString("metrics")
	f.linger, _ = fs.GetDuration("metrics-linger")
	if p, err := fs.GetString("progress"); err == nil {
		f.progress = p
	} else {
		f.progress = "auto"
	}
	return f.startObserver(cmd.ErrOrStderr())
}

// startObserver makes the observer for a command's run: the progress
// display on stderr and, with --metrics, the endpoint (its address is
// printed on stderr). stop ends both; call it when the run ends.
func (f *runFlags) startObserver(stderr io.Writer) (o *observer, stop func(), err error) {
	ui, err := newProgressUI(f.progress, stderr)
	if err != nil {
		return nil, nil, usageError(err)
	}
	if f.linger > 0 && f.metrics == "" {
		return nil, nil, usageError(fmt.Errorf("--metrics-linger: serves the final metrics for a while, so it needs --metrics"))
	}
	var m *metricsServer
	if f.metrics != "" {
		if m, err = startMetrics(f.metrics); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(stderr, "metrics: http://%s/metrics\n", m.addr)
	}
	o = newObserver(ui, m)
	return o, func() { m.Close(f.linger) }, nil
}

// collectPathQuality sends one point's path-quality readings.
func collectPathQuality(exp, point string, pq *pqCounters, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string)) {
	for _, l := range pq.links {
		gauge(dPQUtilization, l.Utilization, exp, point, l.Switch, l.Port)
		gauge(dPQScore, l.Score, exp, point, l.Switch, l.Port)
		gauge(dPQQuality, l.QualityGbps, exp, point, l.Switch, l.Port)
	}
	for _, r := range pq.routes {
		gauge(dPQAdvertised, r.Advertised, exp, point, r.Switch, strconv.Itoa(r.Subnet))
	}
	counter(dPQUpdates, pq.stats.UpdatesSent, exp, point)
	counter(dPQSuppressed, pq.stats.UpdatesSuppressed, exp, point)
	counter(dPQUpdateBytes, pq.stats.UpdateBytes, exp, point)
	counter(dPQWeightChange, pq.stats.WeightChanges, exp, point)
	for _, h := range pq.hdc {
		counter(dHDCRecords, h.records, exp, point, h.name)
	}
}
