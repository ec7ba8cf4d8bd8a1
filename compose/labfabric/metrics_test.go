package labfabric

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/fabric"
)

// sumMetric adds the samples of name whose labels contain every one of
// labels (`k="v"` each) in a text exposition.
func sumMetric(t *testing.T, text, name string, labels ...string) (sum float64, series int) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		head := line[:sp]
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(head, l)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		sum += v
		series++
	}
	return sum, series
}

func TestHealthUpThenStopping(t *testing.T) {
	r := newRig(t, []int{1}, 0)
	resp, err := http.Get(r.api + labapi.FabricHealthPath)
	if err != nil {
		t.Fatal(err)
	}
	var h labapi.FabricHealth
	err = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || h.State != "up" || len(h.Planes) != 1 || h.Planes[0] != 1 || h.Tunnel == "" {
		t.Fatalf("GET %s: %s, %+v, %v; want 200, up, planes [1]", labapi.FabricHealthPath, resp.Status, h, err)
	}
	r.f.Stop()
	if h := r.f.Health(); h.State != "stopping" {
		t.Errorf("after Stop: state %q, want stopping", h.State)
	}
}

// Frames across the fabric show in the switch ports' counters of the
// planes this process runs, and only those; scrapes while frames flow do
// not race with the loop (go test -race).
func TestSwitchMetricsCountFrames(t *testing.T) {
	r := newRig(t, []int{0}, 8)
	r.attach(0)
	before := r.get(labapi.MetricsPath)
	tx0, ports := sumMetric(t, before, "vcluster_port_tx_packets_total", `plane="0"`)
	if ports == 0 {
		t.Fatalf("/metrics has no switch port of plane 0:\n%s", before)
	}
	if _, n := sumMetric(t, before, "vcluster_port_tx_packets_total", `plane="1"`); n != 0 {
		t.Errorf("/metrics has %d ports of plane 1, which this process does not run", n)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // scrapes racing the forwarding
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Get(r.api + labapi.MetricsPath); err == nil {
				resp.Body.Close()
			}
		}
	}()
	const frames = 20
	for i := range frames {
		fr := r.frame(0, 5, 0, uint32(i+1)) // across T1: three switches
		if err := r.hosts[0].SendData(0, fr, len(fr)+fabric.FCSLen, 0); err != nil {
			t.Fatal(err)
		}
		next(t, r.hosts[5])
	}
	close(stop)
	wg.Wait()
	after := r.get(labapi.MetricsPath)
	tx1, _ := sumMetric(t, after, "vcluster_port_tx_packets_total", `plane="0"`)
	if tx1-tx0 < 3*frames {
		t.Errorf("switch ports sent %v more frames, want ≥ %d (3 switches × %d frames)", tx1-tx0, 3*frames, frames)
	}
	if t1, _ := sumMetric(t, after, "vcluster_port_rx_packets_total", `tier="t1"`); t1 < frames {
		t.Errorf("T1 ports received %v frames, want ≥ %d", t1, frames)
	}
	if d, n := sumMetric(t, after, "vcluster_fabric_frames_in_flight"); n != 2 || d != 0 {
		t.Errorf("vcluster_fabric_frames_in_flight: %v in %d series, want 0 in 2 (every frame arrived)", d, n)
	}
	for _, name := range []string{"vcluster_port_queue_bytes", "vcluster_port_trims_total", "vcluster_port_pfc_pause_tx_total"} {
		if _, n := sumMetric(t, after, name, `plane="0"`); n != ports {
			t.Errorf("%s: %d series, want one per port (%d)", name, n, ports)
		}
	}
	if _, n := sumMetric(t, after, "vcluster_fabric_frames_dropped_total", `reason="link_down"`); n != 1 {
		t.Errorf("vcluster_fabric_frames_dropped_total{reason=\"link_down\"}: %d series, want 1", n)
	}
}

func TestMetricNamesListEveryDescriptor(t *testing.T) {
	names := MetricNames()
	for _, want := range []string{"vcluster_tunnel_frames_in_total", "vcluster_fabric_lag_seconds", "vcluster_port_queue_bytes", "vcluster_fabric_frames_dropped_total"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("MetricNames lacks %s: %q", want, names)
		}
	}
	if got, want := len(names), len(switchDescs)+10; got != want {
		t.Errorf("MetricNames: %d names, want %d (the fabric's 10 and the switches' %d)", got, want, len(switchDescs))
	}
}
