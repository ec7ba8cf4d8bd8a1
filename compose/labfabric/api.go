package labfabric

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/faults"
	"github.com/vcluster/vcluster/sim"
)

// maxPlanBytes bounds a POSTed fault plan.
const maxPlanBytes = 1 << 20

func (f *Fabric) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+labapi.FabricHealthPath, f.serveHealth)
	mux.HandleFunc("GET "+labapi.FabricStatusPath, f.serveStatus)
	mux.HandleFunc("GET "+labapi.FabricPortsPath, f.servePorts)
	mux.HandleFunc("POST "+labapi.FabricFaultsPath, f.serveFaults)
	mux.HandleFunc("GET "+labapi.FabricCapturePath, f.serveCapture)
	mux.HandleFunc("GET "+labapi.FabricGraphPath, f.serveGraph)
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{f: f}, &switchCollector{f: f})
	mux.Handle("GET "+labapi.MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s: the fabric serves GET %s, %s, %s, %s?port=NAME, %s?format=dot|svg, %s and POST %s",
			r.Method, r.URL.Path, labapi.FabricHealthPath, labapi.FabricStatusPath, labapi.FabricPortsPath, labapi.FabricCapturePath, labapi.FabricGraphPath,
			labapi.MetricsPath, labapi.FabricFaultsPath))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, labapi.Error{Error: msg})
}

func (f *Fabric) serveStatus(w http.ResponseWriter, _ *http.Request) {
	s, err := f.Status()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s)
}

// Health returns the fabric's state (as GET /v1/health): "up" once its
// loop answers. It reads only the loop's clock, so a docker healthcheck
// polling it costs the loop one injected call.
func (f *Fabric) Health() labapi.FabricHealth {
	h := labapi.FabricHealth{State: "stopping", Planes: slices.Clone(f.planes), Tunnel: f.TunnelAddr().String(), UptimeNs: f.wall.Now()}
	if f.Do(func() { h.VirtualNs = int64(f.loop.WallTime()) }) == nil {
		h.State = "up"
	}
	return h
}

func (f *Fabric) serveHealth(w http.ResponseWriter, _ *http.Request) {
	h := f.Health()
	code := http.StatusOK
	if h.State != "up" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}

func (f *Fabric) servePorts(w http.ResponseWriter, _ *http.Request) {
	var names []string
	if err := f.Do(func() { names = f.topo.PortNames() }); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, names)
}

// ApplyFaults checks a fault plan (YAML, as `vcluster drill` takes) and
// schedules it from now: its times are offsets from the moment it runs.
func (f *Fabric) ApplyFaults(source string, yaml []byte) (labapi.FaultResponse, error) {
	plan, err := faults.ParsePlan(source, yaml)
	if err != nil {
		return labapi.FaultResponse{}, err
	}
	if err := faults.CheckPlan(f.lab.Config, plan); err != nil {
		return labapi.FaultResponse{}, err
	}
	var resp labapi.FaultResponse
	var ierr error
	if err := f.Do(func() {
		rec := faults.NewRecorder(f.loop, f.log)
		// Sampling serves the drill's per-fault judgement, which a lab
		// does not make: keep it coarse so a fault costs the real-time
		// loop little.
		rec.Fine, rec.FineWindow, rec.Coarse = 100*time.Millisecond, 0, time.Second
		var in *faults.Injector
		in, ierr = faults.NewInjector(f.topo, f.loop, plan, f.lab.Config.Seed, rec)
		if ierr != nil {
			return
		}
		// Injected work runs at the wall clock's now: Start's offsets
		// count from the plan's arrival.
		in.Start()
		f.recs = append(f.recs, rec)
		resp = labapi.FaultResponse{Events: len(plan.Events), StartNs: int64(f.loop.Now()), Summary: planSummary(plan, in)}
	}); err != nil {
		return resp, err
	}
	return resp, ierr
}

// planSummary is one line per event: when (from the plan's start), what,
// on what.
func planSummary(p *faults.Plan, in *faults.Injector) string {
	var b strings.Builder
	for i, ev := range p.Events {
		what := "until stopped"
		if end := ev.End(); end > 0 {
			what = "until +" + end.String()
		}
		tg := strings.Join(in.Target(i).Names(), ",")
		if in.Target(i).Dynamic != nil {
			tg = ev.Target + " (resolved when it starts)"
		}
		fmt.Fprintf(&b, "+%v %s %s: %s\n", ev.At, what, ev.Label(), tg)
	}
	return b.String()
}

func (f *Fabric) serveFaults(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPlanBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "reading the plan: "+err.Error())
		return
	}
	if len(body) > maxPlanBytes {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the plan is larger than %d bytes", maxPlanBytes))
		return
	}
	resp, err := f.ApplyFaults("request", body)
	switch {
	case errors.Is(err, errStopped):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeJSON(w, http.StatusOK, resp)
	}
}

func (f *Fabric) serveGraph(w http.ResponseWriter, r *http.Request) {
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "dot"
	}
	if format != "dot" && format != "svg" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("format: %q is not dot or svg", format))
		return
	}
	var dot bytes.Buffer
	if err := f.Do(func() { f.topo.WriteDOT(&dot) }); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if format == "dot" {
		w.Header().Set("Content-Type", "text/vnd.graphviz")
		w.Write(dot.Bytes())
		return
	}
	bin, err := exec.LookPath("dot")
	if err != nil {
		writeError(w, http.StatusNotImplemented, "format=svg needs Graphviz's dot on the fabric's PATH (not found): install graphviz, or ask for format=dot")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-Tsvg")
	cmd.Stdin = &dot
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("dot -Tsvg: %v: %s", err, strings.TrimSpace(stderr.String())))
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(out.Bytes())
}

// collector turns one loop-side snapshot into metrics per scrape.
type collector struct{ f *Fabric }

var (
	descLag       = newDesc("vcluster_fabric_lag_seconds", "How far the real-time loop ran behind wall time, over its events (quantile 1 is the maximum).", []string{"quantile"})
	descLagEvents = newDesc("vcluster_fabric_events_total", "Events the loop ran.", nil)
	descIn        = newDesc("vcluster_tunnel_frames_in_total", "Valid tunnel frames received from hosts.", nil)
	descOut       = newDesc("vcluster_tunnel_frames_out_total", "Tunnel frames sent to hosts.", nil)
	descDropped   = newDesc("vcluster_tunnel_dropped_frames_total", "Tunnel frames dropped, by reason.", []string{"reason"})
	descPortIn    = newDesc("vcluster_tunnel_port_frames_in_total", "Valid frames received per attached host port.", []string{"host", "plane"})
	descPortOut   = newDesc("vcluster_tunnel_port_frames_out_total", "Frames sent per attached host port.", []string{"host", "plane"})
	descFaults    = newDesc("vcluster_fabric_fault_events_total", "Fault events applied (inject) and undone (recovered).", []string{"event"})
	descLinksDown = newDesc("vcluster_fabric_links_down", "Links a fault holds down now.", nil)
	descVirtual   = newDesc("vcluster_fabric_virtual_seconds", "The loop's virtual time.", nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descLagEvents, descIn, descOut, descDropped, descPortIn, descPortOut, descFaults, descLinksDown, descVirtual} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	f := c.f
	var s labapi.FabricStatus
	var recovered int
	if f.Do(func() { s = f.status(); recovered = f.faultEvents("recovered") }) != nil {
		return
	}
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ct := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	g(descLag, float64(s.Lag.P50Ns)/1e9, "0.5")
	g(descLag, float64(s.Lag.P99Ns)/1e9, "0.99")
	g(descLag, float64(s.Lag.MaxNs)/1e9, "1")
	ct(descLagEvents, float64(s.Lag.Events))
	ct(descIn, float64(s.FramesIn))
	ct(descOut, float64(s.FramesOut))
	for reason, n := range s.Drops {
		ct(descDropped, float64(n), reason)
	}
	for _, a := range s.Attached {
		h, p := fmt.Sprint(a.Host), fmt.Sprint(a.Plane)
		ct(descPortIn, float64(a.FramesIn), h, p)
		ct(descPortOut, float64(a.FramesOut), h, p)
	}
	ct(descFaults, float64(s.FaultEvents), "inject")
	ct(descFaults, float64(recovered), "recovered")
	g(descLinksDown, float64(len(s.LinksDown)))
	g(descVirtual, float64(sim.Time(s.VirtualNs))/1e9)
}
