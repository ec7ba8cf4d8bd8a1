package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/cluster"
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

// The --metrics endpoint serves the run's counters while it goes and, with
// --metrics-linger, its final values after: scraped concurrently with the
// simulation (run this under -race), the counters only grow and end at
// what the run did — the events total equals the manifest's.
func TestMetricsEndpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- execute(append(append([]string{}, quickExp...), "--out", dir, "--metrics", "127.0.0.1:0", "--metrics-linger", "2s", "--seed", "3"), &stdout, &stderr)
	}()
	addrRe := regexp.MustCompile(`metrics: (http://127\.0\.0\.1:\d+/metrics)`)
	var url string
	for url == "" {
		select {
		case code := <-done:
			t.Fatalf("run ended (%d) before serving metrics: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if m := addrRe.FindStringSubmatch(stderr.String()); m != nil {
			url = m[1]
		}
	}
	var last map[string]float64
	var scrapes int
	var prevEvents float64
	code := -1
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
		m := parseMetrics(t, string(body))
		if len(m) == 0 {
			continue // nothing published yet
		}
		scrapes++
		if ev := m["vcluster_events_total"]; ev < prevEvents {
			t.Errorf("vcluster_events_total went down: %g after %g", ev, prevEvents)
		} else {
			prevEvents = ev
		}
		last = m
	}
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr.String())
	}
	if scrapes == 0 || last == nil {
		t.Fatal("no successful scrape")
	}
	var man manifest
	b, _ := os.ReadFile(filepath.Join(dir, manifestFile))
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d scrapes; final: events %g, nic tx %g packets, link lost %g, MRC retx %g, RoCE retx %g, RoCE timeouts %g",
		scrapes, last["vcluster_events_total"], sum(last, "vcluster_port_tx_packets_total", `tier="nic"`), sum(last, "vcluster_link_lost_total"),
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
