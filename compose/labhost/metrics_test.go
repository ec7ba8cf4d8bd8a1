package labhost

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vcluster/vcluster/compose/labapi"
)

// scrape reads a host's /metrics into sample → value (the sample is the
// exposition's name{labels}).
func scrape(t *testing.T, h *Host) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.APIAddr() + labapi.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[line[:sp]] = v
	}
	return out
}

// sumOf adds the samples of name whose labels contain every one of
// labels; series counts them.
func sumOf(m map[string]float64, name string, labels ...string) (sum float64, series int) {
	for k, v := range m {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			sum += v
			series++
		}
	}
	return sum, series
}

// A collective moves the engine metrics: goodput both ways, EVs on every
// plane; scrapes during it do not race with the loop (go test -race).
func TestEngineMetricsAfterCollective(t *testing.T) {
	lab := testLab(t)
	_, hs := startHosts(t, lab, 2)
	before := scrape(t, hs[0])
	if v, n := sumOf(before, "vcluster_host_info", `host="0"`, `transport="mrc"`); n != 1 || v != 1 {
		t.Fatalf("vcluster_host_info{host=\"0\",transport=\"mrc\"}: %v in %d series, want 1 in 1", v, n)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // scrapes racing the collective
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Get("http://" + hs[1].APIAddr() + labapi.MetricsPath); err == nil {
				resp.Body.Close()
			}
		}
	}()
	out := runAll(t, hs, labapi.CollectiveRequest{ID: "metrics", Op: "allreduce", Size: "256K", Peers: members(hs), TimeoutMs: 60000})
	close(stop)
	wg.Wait()
	for i, r := range out {
		if r.Error != "" || !r.Verified {
			t.Fatalf("host %d: %+v", i, r)
		}
	}
	planes := lab.Config.Fabric.Planes
	for _, h := range hs {
		m := scrape(t, h)
		id := `host="` + strconv.Itoa(h.ID()) + `"`
		// A ring allreduce sends and receives 2·(n−1)/n of the buffer.
		for _, name := range []string{"vcluster_transport_bytes_completed_total", "vcluster_transport_bytes_placed_total"} {
			if v, n := sumOf(m, name, id); n != 1 || v < 128<<10 {
				t.Errorf("host %d: %s = %v in %d series, want ≥ 128 KiB in 1", h.ID(), name, v, n)
			}
		}
		if v, _ := sumOf(m, "vcluster_transport_data_packets_total", id); v == 0 {
			t.Errorf("host %d: no data packets", h.ID())
		}
		for _, name := range []string{"vcluster_transport_retransmissions_total", "vcluster_transport_timeouts_total", "vcluster_transport_nacks_received_total"} {
			if _, n := sumOf(m, name, id); n != 1 {
				t.Errorf("host %d: %s: %d series, want 1", h.ID(), name, n)
			}
		}
		if _, n := sumOf(m, "vcluster_host_evs", id); n != planes*len(evStates) {
			t.Errorf("host %d: vcluster_host_evs: %d series, want %d planes × %d states", h.ID(), n, planes, len(evStates))
		}
		for p := range planes {
			if v, _ := sumOf(m, "vcluster_host_evs", id, `plane="`+strconv.Itoa(p)+`"`); v == 0 {
				t.Errorf("host %d plane %d: no EVs after an MRC collective", h.ID(), p)
			}
		}
	}
}

func TestMetricNamesListEveryDescriptor(t *testing.T) {
	names := MetricNames()
	if got, want := len(names), len(engineDescs)+7; got != want {
		t.Errorf("MetricNames: %d names, want %d (the host's 7 and the engine's %d): %q", got, want, len(engineDescs), names)
	}
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Errorf("MetricNames: %s twice", names[i])
		}
	}
}
