package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// prometheusBin is Debian's Prometheus (apt-get install prometheus).
const prometheusBin = "/usr/bin/prometheus"

// scrapeTargets are the addresses Prometheus scrapes in a lab: the
// fabric processes' APIs and the hosts' (each serves /metrics there).
func scrapeTargets(st *State) (fabric, hosts []string) {
	for _, p := range st.Processes {
		switch p.Role {
		case RoleFabric:
			fabric = append(fabric, p.API)
		case RoleHost:
			hosts = append(hosts, p.API)
		}
	}
	return fabric, hosts
}

// prometheusConfig is a Prometheus configuration scraping the targets
// every second (YAML; JSON lists are YAML flow sequences).
func prometheusConfig(fabric, hosts []string) string {
	list := func(ts []string) string {
		b, _ := json.Marshal(ts)
		return string(b)
	}
	return fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: vcluster-fabric
    static_configs:
      - targets: %s
  - job_name: vcluster-hosts
    static_configs:
      - targets: %s
`, list(fabric), list(hosts))
}

// syncBuffer collects a process's output for a failure message.
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

// startPrometheus runs Prometheus on 127.0.0.1:<free port> with config
// and a temporary TSDB until the test ends; it returns its base URL once
// ready.
func startPrometheus(t *testing.T, config string) (string, *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // Prometheus binds it; another taker in between fails the start, which the log shows
	logs := &syncBuffer{}
	cmd := exec.Command(prometheusBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // not left behind by a killed test
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("prometheus exited at start: %v\n%s", cmd.ProcessState, logs)
		default:
		}
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, logs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus on %s not ready within 60 s\n%s", addr, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promGet decodes one answer of Prometheus's HTTP API into v.
func promGet(base, path string, v any) error {
	resp, err := http.Get(base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// promMax is the largest sample an instant query returns (false: none).
func promMax(base, query string) (float64, bool, error) {
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			}
		}
	}
	if err := promGet(base, "/api/v1/query?query="+url.QueryEscape(query), &r); err != nil {
		return 0, false, err
	}
	found, best := false, 0.0
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: sample %v: %v", query, s.Value, err)
		}
		if !found || v > best {
			found, best = true, v
		}
	}
	return best, found, nil
}

// A real Prometheus scrapes a running lab: every process is an up
// target, and after a collective the fabric's tunnel and switch counters
// and the hosts' goodput have moved.
func TestPrometheusScrapesLab(t *testing.T) {
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Skipf("%s is not installed (apt-get install prometheus): %v", prometheusBin, err)
	}
	dir := filepath.Join(t.TempDir(), "lab")
	var upOut bytes.Buffer
	// As the e2e tests' lab: 4 hosts, 2 per T0, 100 Mb/s per plane (five
	// real-time processes share 2 cores).
	st, err := Up(context.Background(), UpOptions{Dir: dir, Runtime: ProcessRuntime{}, Executable: vclusterBin(t),
		Sets: []string{"fabric.preset=C", "fabric.hosts=4", "fabric.hostsPerT0=2"}, PlaneBps: 100e6,
		ReadyTimeout: 2 * time.Minute, HealthTimeout: 2 * time.Minute}, &upOut)
	t.Cleanup(func() {
		if err := Down(dir, &bytes.Buffer{}); err != nil {
			t.Errorf("lab down: %v", err)
		}
		if st == nil {
			return
		}
		for _, p := range st.Processes {
			if !waitGonePID(p.PID, 15*time.Second) {
				t.Errorf("%s (pid %d) still exists after lab down", p.Name, p.PID)
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	if err != nil {
		t.Fatalf("Up: %v\n%s\n%s", err, upOut.String(), labLogs(dir))
	}
	prometheusScrapesLab(t, st, func() string { return labLogs(dir) })
}

// prometheusScrapesLab runs a real Prometheus against the running lab st
// (1 fabric + 4 hosts), runs a collective so that counters move, and
// checks that PromQL through its HTTP API returns the fabric's frame
// counters and the hosts' transport counters, and that every target is
// up. logs tells the lab's logs on failure.
func prometheusScrapesLab(t *testing.T, st *State, logs func() string) {
	dir := st.Dir
	fabric, hosts := scrapeTargets(st)
	if len(fabric) != 1 || len(hosts) != 4 {
		t.Fatalf("scrape targets: fabric %v, hosts %v; want 1 and 4", fabric, hosts)
	}
	base, promLogs := startPrometheus(t, prometheusConfig(fabric, hosts))
	defer func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s\nlab logs:\n%s", promLogs, logs())
		}
	}()

	var collOut, collErr bytes.Buffer
	if _, err := RunCollective(context.Background(), dir, CollectiveOptions{Op: "allreduce", Size: "1M", Iters: 1, Timeout: 2 * time.Minute},
		&collOut, &collErr); err != nil {
		t.Fatalf("run-collective: %v\n%s%s", err, collOut.String(), collErr.String())
	}

	// Bounded: a few scrape intervals on an idle machine, a minute on a
	// loaded one.
	want := []string{"vcluster_tunnel_frames_in_total", "sum(vcluster_port_tx_packets_total)",
		"sum(vcluster_transport_bytes_completed_total)", `count(vcluster_host_evs{state="GOOD"} > 0)`}
	deadline := time.Now().Add(60 * time.Second)
	for _, q := range want {
		for {
			v, ok, err := promMax(base, q)
			if err == nil && ok && v > 0 {
				t.Logf("%s = %v", q, v)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v (found %v, err %v) after 60 s; want a sample > 0", q, v, ok, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	var tg struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
	}
	for {
		err := promGet(base, "/api/v1/targets", &tg)
		up := 0
		for _, a := range tg.Data.ActiveTargets {
			if a.Health == "up" {
				up++
			}
		}
		if err == nil && up == 5 && len(tg.Data.ActiveTargets) == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("targets: %d of %d up, want 5 of 5 (err %v): %+v", up, len(tg.Data.ActiveTargets), err, tg.Data.ActiveTargets)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, a := range tg.Data.ActiveTargets {
		if !strings.HasSuffix(a.ScrapeURL, "/metrics") {
			t.Errorf("target %s: not the /metrics path", a.ScrapeURL)
		}
	}
}
