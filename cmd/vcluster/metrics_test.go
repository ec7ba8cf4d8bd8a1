package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
	"github.com/vcluster/vcluster/config"
	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/internal/clustertest"
	"github.com/vcluster/vcluster/sim"
)

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// quickExp is a small allreduce-loss grid (MRC and RoCE 1 QP, 0 and 1%
// loss, 4 MiB): about half a second.
var quickExp = []string{"experiment", "allreduce-loss", "--quick", "--set", "exp.size=4M", "--set", "exp.losses=0,0.01", "--set", "exp.roceQPs=1"}

// parseMetrics reads the Prometheus text format into name{labels} → value.
func parseMetrics(t *testing.T, body string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// sum adds every series of a metric whose labels contain all of want.
func sum(m map[string]float64, name string, want ...string) float64 {
	var s float64
	for k, v := range m {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(labels, w)
		}
		if ok {
			s += v
		}
	}
	return s
}

// seriesRe matches one label of a series key: name="value".
var seriesRe = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// seriesLabels splits a series key, name{labels}, into its name and labels.
func seriesLabels(t *testing.T, key string) (string, map[string]string) {
	t.Helper()
	name, rest, _ := strings.Cut(key, "{")
	l := map[string]string{}
	for _, m := range seriesRe.FindAllStringSubmatch(rest, -1) {
		v, err := strconv.Unquote(`"` + m[2] + `"`)
		if err != nil {
			t.Fatalf("series %q: label %s: %v", key, m[1], err)
		}
		l[m[1]] = v
	}
	return name, l
}

// pointKey is a point in the metrics: its experiment and point labels.
type pointKey struct{ exp, point string }

// perPoint sums the series of the metrics named, per point.
func perPoint(t *testing.T, m map[string]float64, names ...string) map[pointKey]float64 {
	t.Helper()
	out := map[pointKey]float64{}
	for k, v := range m {
		name, l := seriesLabels(t, k)
		if slices.Contains(names, name) {
			out[pointKey{l["experiment"], l["point"]}] += v
		}
	}
	return out
}

// conservedPerPoint checks that every point of a scrape conserves frames
// (sent = delivered + dropped + lost + in flight, and the fabric's loss
// is its ports' link loss) and returns the points with traffic.
func conservedPerPoint(t *testing.T, m map[string]float64, when string) []pointKey {
	t.Helper()
	sent := perPoint(t, m, "vcluster_fabric_frames_sent_total")
	placed := perPoint(t, m, "vcluster_fabric_frames_delivered_total", "vcluster_fabric_frames_dropped_total", "vcluster_fabric_frames_lost_total",
		"vcluster_fabric_frames_in_flight")
	lost, portLost := perPoint(t, m, "vcluster_fabric_frames_lost_total"), perPoint(t, m, "vcluster_link_lost_total")
	var busy []pointKey
	for p, s := range sent {
		if s != placed[p] {
			t.Errorf("%s: point %q: sent %g, delivered + dropped + lost + in flight = %g", when, p, s, placed[p])
		}
		if lost[p] != portLost[p] {
			t.Errorf("%s: point %q: vcluster_fabric_frames_lost_total %g, vcluster_link_lost_total sums to %g", when, p, lost[p], portLost[p])
		}
		if s > 0 {
			busy = append(busy, p)
		}
	}
	for p := range placed {
		if _, ok := sent[p]; !ok {
			t.Errorf("%s: point %q has frames placed and no frames sent", when, p)
		}
	}
	return busy
}

// scrapeRun runs the CLI with args plus --metrics on a free port and
// scrapes the endpoint every 20 ms until the command returns (give
// --metrics-linger so the last scrapes see the final values). It returns
// every successful scrape, in order, and the exit code.
func scrapeRun(t *testing.T, args ...string) (scrapes []map[string]float64, code int, stderr string) {
	t.Helper()
	var stdout, errb syncBuffer
	done := make(chan int)
	go func() {
		done <- execute(append(append([]string{}, args...), "--metrics", "127.0.0.1:0"), &stdout, &errb)
	}()
	addrRe := regexp.MustCompile(`metrics: (http://127\.0\.0\.1:\d+/metrics)`)
	var url string
	for url == "" {
		select {
		case code := <-done:
			t.Fatalf("run ended (%d) before serving metrics: %s", code, errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		if m := addrRe.FindStringSubmatch(errb.String()); m != nil {
			url = m[1]
		}
	}
	code = -1
	for code < 0 {
		select {
		case code = <-done:
			continue
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get(url)
		if err != nil {
			continue // shutting down
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
		}
		if m := parseMetrics(t, string(body)); len(m) > 0 { // empty: nothing published yet
			scrapes = append(scrapes, m)
		}
	}
	return scrapes, code, errb.String()
}

// The --metrics endpoint serves the run's counters while it goes and, with
// --metrics-linger, its final values after: scraped concurrently with the
// simulation (run this under -race), the counters only grow and end at
// what the run did — the events total equals the manifest's.
func TestMetricsEndpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	scrapes, code, stderr := scrapeRun(t, append(append([]string{}, quickExp...), "--out", dir, "--metrics-linger", "2s", "--seed", "3")...)
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	if len(scrapes) == 0 {
		t.Fatal("no successful scrape")
	}
	var prevEvents float64
	for _, m := range scrapes {
		if ev := m["vcluster_events_total"]; ev < prevEvents {
			t.Errorf("vcluster_events_total went down: %g after %g", ev, prevEvents)
		} else {
			prevEvents = ev
		}
	}
	last := scrapes[len(scrapes)-1]
	var man manifest
	b, _ := os.ReadFile(filepath.Join(dir, manifestFile))
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scrapes; final: events %g, nic tx %g packets, link lost %g, MRC retx %g, RoCE retx %g, RoCE timeouts %g",
		len(scrapes), last["vcluster_events_total"], sum(last, "vcluster_port_tx_packets_total", `tier="nic"`), sum(last, "vcluster_link_lost_total"),
		sum(last, "vcluster_transport_retransmissions_total", `transport="mrc"`), sum(last, "vcluster_transport_retransmissions_total", `transport="roce"`),
		sum(last, "vcluster_transport_timeouts_total", `transport="roce"`))
	if ev := last["vcluster_events_total"]; ev != float64(man.Events) || ev == 0 {
		t.Errorf("vcluster_events_total = %g, manifest events = %d", ev, man.Events)
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"vcluster_port_tx_packets_total", []string{`tier="nic"`}},
		{"vcluster_port_tx_packets_total", []string{`tier="t0"`}},
		{"vcluster_port_rx_bytes_total", []string{`tier="t1"`}},
		{"vcluster_link_lost_total", nil}, // 1% loss on every link
		{"vcluster_transport_data_packets_total", []string{`transport="mrc"`}},
		{"vcluster_transport_retransmissions_total", []string{`transport="mrc"`}},
		{"vcluster_transport_retransmissions_total", []string{`transport="roce"`}},
		{"vcluster_clusters_total", nil},
	} {
		if v := sum(last, c.name, c.labels...); v <= 0 {
			t.Errorf("%s%v = %g, want > 0", c.name, c.labels, v)
		}
	}
	if last[`vcluster_points`] != 4 || last[`vcluster_point`] != 4 || last[`vcluster_run_info{experiment="allreduce-loss"}`] != 1 {
		t.Errorf("point %g of %g, run_info %v", last["vcluster_point"], last["vcluster_points"], last[`vcluster_run_info{experiment="allreduce-loss"}`])
	}
	// Counters are per point, labelled with the experiment and the point's
	// label as the experiment reported it; a counter never goes down from
	// one scrape to the next, so finished points keep their values.
	var labels []string
	for _, m := range regexp.MustCompile(`\[allreduce-loss\] point \d/4 (.*) \(elapsed`).FindAllStringSubmatch(stderr, -1) {
		labels = append(labels, m[1])
	}
	if len(labels) != 4 {
		t.Fatalf("point labels %q in %s", labels, stderr)
	}
	sent, lost := perPoint(t, last, "vcluster_fabric_frames_sent_total"), perPoint(t, last, "vcluster_link_lost_total")
	qps, retx := perPoint(t, last, "vcluster_transport_queue_pairs"), perPoint(t, last, "vcluster_transport_retransmissions_total")
	if len(sent) != 4 {
		t.Errorf("points in the final scrape: %v", sent)
	}
	for _, l := range labels {
		p := pointKey{"allreduce-loss", l}
		t.Logf("point %q: sent %g, link lost %g, %g QPs, %g retransmissions", l, sent[p], lost[p], qps[p], retx[p])
		if sent[p] == 0 || qps[p] == 0 || (lost[p] > 0) != strings.HasSuffix(l, "loss 1%") {
			t.Errorf("point %q: sent %g, link lost %g, %g QPs", l, sent[p], lost[p], qps[p])
		}
	}
	for k := range last {
		if strings.HasPrefix(k, "vcluster_transport_qps") {
			t.Errorf("old name still served: %s", k)
		}
	}
	for i := 1; i < len(scrapes); i++ {
		for k, v := range scrapes[i-1] {
			if name, _ := seriesLabels(t, k); strings.HasSuffix(name, "_total") && scrapes[i][k] < v {
				t.Errorf("scrape %d: %s went from %g to %g", i, k, v, scrapes[i][k])
			}
		}
	}
	// counters.csv: a block per point, with the same labels, whose sums
	// are what the endpoint served for the point.
	blocks := readCountersCSV(t, filepath.Join(dir, countersFile))
	if len(blocks) != 4 || !slices.Contains(man.Files, countersFile) {
		t.Fatalf("%d blocks in counters.csv (manifest files %v)", len(blocks), man.Files)
	}
	for i, b := range blocks {
		c, p := b.conservation(), pointKey{"allreduce-loss", b.label}
		if b.point != strconv.Itoa(i+1) || b.label != labels[i] || b.cluster != "1" {
			t.Errorf("block %d: point %q label %q cluster %q; want %d %q 1", i, b.point, b.label, b.cluster, i+1, labels[i])
		}
		if c.Sent == 0 || c.Sent != c.Accounted() || float64(c.Sent) != sent[p] || float64(c.Lost) != lost[p] {
			t.Errorf("block %d (%s): %+v; the endpoint: sent %g, lost %g", i, b.label, c, sent[p], lost[p])
		}
	}
	// Watching changes nothing the simulation computes.
	plain := filepath.Join(t.TempDir(), "plain")
	if code, _, errOut := runCLI(t, append(append([]string{}, quickExp...), "--out", plain, "--seed", "3", "--progress", "none")...); code != 0 {
		t.Fatalf("plain run exited %d: %s", code, errOut)
	}
	x, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	y, _ := os.ReadFile(filepath.Join(plain, "results.csv"))
	if !bytes.Equal(x, y) || len(x) == 0 {
		t.Errorf("results.csv with --metrics differs from without:\n%s\n%s", x, y)
	}
}

// Every scrape of `run` (the preflight's netstack pings on the classic
// loop, then MRC and RoCE all-reduces under loss on partitioned clusters,
// read between windows) conserves frames exactly: what entered the fabric
// was delivered, dropped (by reason), lost, or is in flight on a link or
// in a queue — including frames still on the wire when a point's
// collective completed and its loop stopped, which no counter showed
// before (sent − received was 3 frames more than link-lost on
// `run --quick`).
func TestMetricsConservation(t *testing.T) {
	dir := t.TempDir()
	scrapes, code, stderr := scrapeRun(t, "run", "--quick", "--out", dir, "--metrics-linger", "300ms", "--progress", "none",
		"--set", "exp.size=4M", "--set", "exp.losses=0.001,0.01", "--set", "exp.roceQPs=1", "--parallel", "2")
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	checked, inFlight := 0, 0
	for i, m := range scrapes {
		if len(conservedPerPoint(t, m, fmt.Sprintf("scrape %d", i))) == 0 {
			continue // before the first cluster's traffic
		}
		checked++
		if sum(m, "vcluster_fabric_frames_in_flight") > 0 {
			inFlight++
		}
	}
	if checked == 0 {
		t.Fatalf("no scrape with traffic among %d", len(scrapes))
	}
	last := scrapes[len(scrapes)-1]
	if busy := conservedPerPoint(t, last, "final scrape"); len(busy) != 5 || !slices.Contains(busy, pointKey{"preflight", ""}) {
		t.Errorf("final scrape: points with traffic %q, want the preflight and 4 points", busy)
	}
	for _, k := range []string{`vcluster_fabric_frames_dropped_total{experiment="allreduce-loss",point="MRC, 1 QP, loss 1%",reason="fcs"}`,
		`vcluster_fabric_frames_dropped_total{experiment="allreduce-loss",point="MRC, 1 QP, loss 1%",reason="link_down"}`,
		`vcluster_fabric_frames_dropped_total{experiment="preflight",point="",reason="black_hole"}`,
		`vcluster_fabric_frames_in_flight{experiment="allreduce-loss",point="RoCE, 1 QP, loss 0.1%",where="link"}`,
		`vcluster_fabric_frames_in_flight{experiment="allreduce-loss",point="RoCE, 1 QP, loss 0.1%",where="queue"}`} {
		if _, ok := last[k]; !ok {
			t.Errorf("%s not exported", k)
		}
	}
	if sum(last, "vcluster_fabric_frames_lost_total") == 0 || sum(last, "vcluster_fabric_frames_delivered_total") == 0 {
		t.Errorf("final scrape: lost %g, delivered %g", sum(last, "vcluster_fabric_frames_lost_total"), sum(last, "vcluster_fabric_frames_delivered_total"))
	}
	t.Logf("%d scrapes, %d with traffic, %d with frames in flight; final: sent %g, delivered %g, dropped %g, lost %g, in flight %g on links and %g queued",
		len(scrapes), checked, inFlight, sum(last, "vcluster_fabric_frames_sent_total"), sum(last, "vcluster_fabric_frames_delivered_total"),
		sum(last, "vcluster_fabric_frames_dropped_total"), sum(last, "vcluster_fabric_frames_lost_total"),
		sum(last, "vcluster_fabric_frames_in_flight", `where="link"`), sum(last, "vcluster_fabric_frames_in_flight", `where="queue"`))
	// counters.csv: the preflight's block, then one per point, each
	// conserving frames.
	blocks := readCountersCSV(t, filepath.Join(dir, countersFile))
	var points []string
	for _, b := range blocks {
		points = append(points, b.point)
		if c := b.conservation(); c.Sent == 0 || c.Sent != c.Accounted() {
			t.Errorf("counters.csv point %s %q: %+v", b.point, b.label, c)
		}
	}
	if !slices.Equal(points, []string{"preflight", "1", "2", "3", "4"}) {
		t.Errorf("counters.csv points %q", points)
	}
}

// testEndpoint is a metrics endpoint on a free loopback port (closed when
// the test ends) and an observer publishing to it.
func testEndpoint(t *testing.T) (*metricsServer, *observer) {
	t.Helper()
	m, err := startMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(0) })
	return m, newObserverClock(noProgress{}, m, &stepWall{})
}

// scrapeText is one scrape of m.
func scrapeText(t *testing.T, m *metricsServer) string {
	t.Helper()
	resp, err := http.Get("http://" + m.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The endpoint's frame accounting, read with frames in flight: a faulted
// MRC run (1% loss and bit errors on every link, a T0–T1 cable down, a
// black hole) stopped mid-flight, then finished, then followed by a second
// cluster — each scrape conserves frames, and the in-flight gauges carry
// what is on links and in queues at the stop.
func TestMetricsConservationInFlight(t *testing.T) {
	m, o := testEndpoint(t)
	scrape := func(when string) map[string]float64 {
		t.Helper()
		v := parseMetrics(t, scrapeText(t, m))
		if busy := conservedPerPoint(t, v, when); len(busy) != 1 {
			t.Fatalf("%s: points with traffic %q", when, busy)
		}
		return v
	}
	o.Begin("conservation")
	var trs []*cluster.Transfer
	var c *cluster.Cluster
	for i := 0; i < 2; i++ {
		o.Point(i, 2, "faulted")
		// 4 MPR units: at the spec's one unit too little is in flight for
		// queues to hold frames when the run is stopped mid-flight.
		cfg, err := config.Load("", []string{"fabric.preset=C", "fabric.hosts=16", "transport.kind=mrc", "transport.payload=elided",
			"host.netstack=false", "transport.mrc.mprUnits=4", fmt.Sprintf("seed=%d", i+1)})
		if err != nil {
			t.Fatal(err)
		}
		if c, err = cluster.New(cfg, nil); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		o.Watch(c)
		for _, l := range c.Topo.Links {
			l.Loss = fabric.NewBernoulli(0.01, cfg.Seed, l.Name)
			l.Corr = fabric.NewBitErrors(1e-6, cfg.Seed, l.Name)
		}
		// Plane 0: the cable T0 1 – T1 0 down from 10 µs, a black hole
		// toward T0 0 at T1 1.
		var cable *fabric.Port
		for _, p := range c.Topo.Switch("p0.t0.1").Ports {
			if p.Peer.Owner == fabric.Device(c.Topo.Switch("p0.t1.0")) {
				cable = p
			}
		}
		c.Loop.At(10*sim.Microsecond, func() { cable.Tx.SetUp(false); cable.Peer.Tx.SetUp(false) })
		c.Topo.Switch("p0.t1.1").BlackHole(fabric.USID(0, fabric.USIDT0, 0), 0.5)
		trs = trs[:0]
		for _, pr := range [][2]int{{4, 0}, {8, 0}, {5, 1}} {
			tr, _ := clustertest.Transfer(t, c, pr[0], pr[1], 1<<20, 256<<10)
			trs = append(trs, tr)
		}
		c.Loop.RunUntil(30 * sim.Microsecond)
		o.publish(true)
		v := scrape("stopped mid-flight")
		if l, q := sum(v, "vcluster_fabric_frames_in_flight", `where="link"`), sum(v, "vcluster_fabric_frames_in_flight", `where="queue"`); l == 0 || q == 0 {
			t.Errorf("stopped mid-flight: in flight %g on links, %g queued", l, q)
		}
		c.Loop.RunWhile(func() bool { return !trs[0].Done() || !trs[1].Done() || !trs[2].Done() })
		o.publish(true)
		scrape("transfers done")
	}
	o.End()
	v := scrape("after the run")
	for _, r := range []string{"fcs", "link_down", "black_hole"} {
		if sum(v, "vcluster_fabric_frames_dropped_total", `experiment="conservation"`, `point="faulted"`, `reason="`+r+`"`) == 0 {
			t.Errorf("no %s drops exported: %v", r, v)
		}
	}
}

func TestMetricsAddr(t *testing.T) {
	for in, want := range map[string]string{":9464": "127.0.0.1:9464", "127.0.0.1:0": "127.0.0.1:0", "0.0.0.0:80": "0.0.0.0:80", "[::1]:9": "[::1]:9"} {
		if got, err := metricsAddr(in); err != nil || got != want {
			t.Errorf("metricsAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"9464", "host:port", ":70000"} {
		if _, err := metricsAddr(in); err == nil {
			t.Errorf("metricsAddr(%q) accepted", in)
		}
	}
	if code, _, errOut := runCLI(t, append(append([]string{}, quickExp...), "--out", t.TempDir(), "--metrics", "nope")...); code != 2 || !strings.Contains(errOut, "--metrics") {
		t.Errorf("--metrics nope: exit %d, %s", code, errOut)
	}
}

// Benchmarks opt in to --metrics (markObserved + benchObserver); the
// others reject it rather than serve nothing.
func TestBenchMetricsFlag(t *testing.T) {
	if code, _, errOut := runCLI(t, "bench", "loop", "--events", "10", "--metrics", "127.0.0.1:0"); code != 2 || !strings.Contains(errOut, "does not simulate a cluster") {
		t.Errorf("bench loop --metrics: exit %d, %s", code, errOut)
	}
	saved := benchCommands
	defer func() { benchCommands = saved }()
	var served string
	benchCommands = append(benchCommands, func() *cobra.Command {
		return markObserved(&cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			obs, stop, err := benchObserver(cmd)
			if err != nil {
				return err
			}
			defer stop()
			obs.Begin("probe")
			c, err := cluster.New(cfg, nil)
			if err != nil {
				return err
			}
			defer c.Close()
			obs.Point(0, 1, "pings")
			obs.Watch(c)
			c.Loop.At(0, func() { c.Hosts[0].Ping(c.Topo.HostAddr(1, 0), 1, 1, 56, 0, func(time.Duration, bool) {}) })
			c.Loop.Run()
			obs.End()
			resp, err := http.Get("http://" + obs.metrics.addr + "/metrics")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			served = string(b)
			return nil
		}})
	})
	code, _, errOut := runCLI(t, "bench", "probe", "--metrics", "127.0.0.1:0", "--progress", "log", "--set", "fabric.hosts=4", "--set", "fabric.hostsPerT0=2")
	if code != 0 {
		t.Fatalf("bench probe exited %d: %s", code, errOut)
	}
	m := parseMetrics(t, served)
	if sum(m, "vcluster_port_tx_packets_total", `tier="nic"`) < 2 || m["vcluster_events_total"] == 0 || !strings.Contains(errOut, "[probe] done, 1 point,") {
		t.Errorf("served:\n%s\nstderr:\n%s", served, errOut)
	}
}

// The served metrics pass promlint (names, units, counter suffixes, help
// texts), both as the collector produces them and as scraped; events are
// a counter beside the events/s gauge, QPs are queue pairs, and every
// fabric and transport series carries the experiment and the point label
// (escaped as the format wants).
func TestMetricsLint(t *testing.T) {
	m, o := testEndpoint(t)
	label := `MRC, loss 1%, a "quoted" word`
	o.Begin("lint")
	for i, l := range []string{label, "clean"} {
		o.Point(i, 2, l)
		c := transferCluster(t, int64(i+1), 0.01*float64(1-i))
		o.Watch(c)
		runTransfer(t, c, 0)
	}
	o.End()
	for _, p := range lintCollector(t, m) {
		t.Errorf("promlint (collector): %s: %s", p.Metric, p.Text)
	}
	text := scrapeText(t, m)
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint (scrape): %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{"# TYPE vcluster_events_total counter", "# TYPE vcluster_events_per_second gauge",
		"# TYPE vcluster_transport_queue_pairs gauge", "# TYPE vcluster_port_tx_packets_total counter"} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(text, "vcluster_transport_qps") {
		t.Error("vcluster_transport_qps still served")
	}
	v := parseMetrics(t, text)
	lost := perPoint(t, v, "vcluster_link_lost_total")
	qps := perPoint(t, v, "vcluster_transport_queue_pairs")
	for k := range v {
		name, l := seriesLabels(t, k)
		perPointSeries := strings.HasPrefix(name, "vcluster_port") || strings.HasPrefix(name, "vcluster_link") ||
			strings.HasPrefix(name, "vcluster_fabric") || strings.HasPrefix(name, "vcluster_transport")
		if _, ok := l["point"]; perPointSeries && (l["experiment"] != "lint" || !ok) {
			t.Errorf("%s: no experiment or point label", k)
		}
	}
	if lossy, clean := (pointKey{"lint", label}), (pointKey{"lint", "clean"}); lost[lossy] == 0 || lost[clean] != 0 || qps[lossy] != 2 || qps[clean] != 2 {
		t.Errorf("per point: link lost %v, queue pairs %v", lost, qps)
	}
	if conservedPerPoint(t, v, "lint"); len(perPoint(t, v, "vcluster_fabric_frames_sent_total")) != 2 {
		t.Errorf("points: %v", perPoint(t, v, "vcluster_fabric_frames_sent_total"))
	}
}

// lintCollector gathers m's collector through a pedantic registry (which
// also checks Collect against Describe) and returns promlint's problems.
func lintCollector(t *testing.T, m *metricsServer) []promlint.Problem {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&runCollector{m: m})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	return problems
}
