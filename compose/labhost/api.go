package labhost

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vcluster/vcluster/compose/labapi"
	"github.com/vcluster/vcluster/compose/tunnel"
	"github.com/vcluster/vcluster/mrc"
	"github.com/vcluster/vcluster/verbs"
)

// hostStats count the host's collectives.
type hostStats struct {
	collectivesOK, collectivesFailed atomic.Uint64
}

// qpBook remembers each QP's peer host (the loop goroutine's).
type qpBook struct{ peer map[uint32]int }

func newQPBook() *qpBook                { return &qpBook{peer: map[uint32]int{}} }
func (b *qpBook) add(qpn uint32, p int) { b.peer[qpn] = p }

// maxBody bounds a request body.
const maxBody = 1 << 20

// loopTimeout bounds a quick read of the loop's state.
const loopTimeout = 5 * time.Second

func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+labapi.HostHealthPath, h.serveHealth)
	mux.HandleFunc("GET "+labapi.HostQPsPath, h.serveQPs)
	mux.HandleFunc("POST "+labapi.HostCollectivesPath, h.serveCollective)
	mux.HandleFunc("GET "+ExchangePath+"{id}/{name}", h.serveExchange)
	mux.Handle("GET "+labapi.MetricsPath, promhttp.HandlerFor(h.registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Errorf("no endpoint %s %s (have GET %s, GET %s, POST %s, GET %s)", r.Method, r.URL.Path,
			labapi.HostHealthPath, labapi.HostQPsPath, labapi.HostCollectivesPath, labapi.MetricsPath))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, labapi.Error{Error: err.Error()})
}

// decodeJSON reads one JSON object of at most maxBody bytes, refusing
// unknown fields.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: not a JSON request: %v", err)
	}
	if dec.More() {
		return errors.New("body: more than one JSON value")
	}
	return nil
}

// Health returns the host's state (as GET /v1/health).
func (h *Host) Health() labapi.HostHealth {
	st := "starting"
	if h.Up() {
		st = "up"
	}
	a := h.cl.Topo.HostAddr(h.id, 0)
	hh := labapi.HostHealth{Host: h.id, State: st, Transport: h.cl.Config.Transport.Kind, Fabric: h.fabricName,
		Address: ipString(a), Digest: hex.EncodeToString(h.lab.Digest[:]), PID: os.Getpid()}
	var early int64
	h.onLoop(func() { hh.VirtualNs = int64(h.loop.WallTime()); early = h.loop.Lag().Early }, loopTimeout)
	hh.Lag = h.lag.stats(early)
	return hh
}

func (h *Host) serveHealth(w http.ResponseWriter, _ *http.Request) {
	hh := h.Health()
	status := http.StatusOK
	if hh.State != "up" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, hh)
}

// evStater is what a multipath transport (MRC) tells of its EVs.
type evStater interface{ EVStates() []mrc.EVInfo }

// evOwner is a single-path transport's one EV (RoCE: bits 0..3 are its
// plane).
type evOwner interface{ EV() uint32 }

// QPs returns the host's QPs (as GET /v1/qps).
func (h *Host) QPs() ([]labapi.QPInfo, error) {
	var out []labapi.QPInfo
	err := h.onLoop(func() {
		e := h.cl.Hosts[h.id].RDMA()
		for _, t := range e.QPs() {
			peer, ok := h.qps.peer[t.QPN()]
			if !ok {
				continue // the engine's own (endpoint operations)
			}
			out = append(out, qpInfo(t, peer))
		}
	}, loopTimeout)
	slices.SortFunc(out, func(a, b labapi.QPInfo) int { return int(a.QPN) - int(b.QPN) })
	return out, err
}

func qpInfo(t verbs.Transport, peer int) labapi.QPInfo {
	q := labapi.QPInfo{QPN: t.QPN(), Peer: peer, State: t.State().String(), Plane: -1}
	if m, ok := t.(evStater); ok {
		for _, ev := range m.EVStates() {
			q.EVs = append(q.EVs, labapi.EVInfo{EV: ev.EV, Plane: ev.Plane, State: ev.State.String()})
		}
	} else if o, ok := t.(evOwner); ok {
		q.Plane = int(o.EV() & 0xf)
	}
	s := t.Stats()
	q.Counters = map[string]uint64{
		"data_packets_sent": s.DataPacketsSent, "retransmissions": s.Retransmissions, "control_packets_sent": s.ControlPacketsSent,
		"bytes_posted": s.BytesPosted, "bytes_completed": s.BytesCompleted, "bytes_placed": s.BytesPlaced,
		"duplicates_received": s.DuplicatesReceived, "trimmed_received": s.TrimmedReceived, "nacks_received": s.NacksReceived,
		"timeouts": s.Timeouts, "ecn_marks_received": s.ECNMarksReceived, "cnps_sent": s.CNPsSent, "cnps_received": s.CNPsReceived,
	}
	return q
}

func (h *Host) serveQPs(w http.ResponseWriter, _ *http.Request) {
	qs, err := h.QPs()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if qs == nil {
		qs = []labapi.QPInfo{}
	}
	writeJSON(w, http.StatusOK, qs)
}

func ipString(a [16]byte) string { return netip.AddrFrom16(a).String() }

// registry is the host's own Prometheus registry.
func (h *Host) registry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(&hostCollector{h: h}, &engineCollector{h: h})
	return r
}

var (
	descFrames = newDesc("vcluster_tunnel_frames_total", "Valid tunnel frames, by direction (in: received from the fabric, out: sent to it).",
		[]string{"dir"})
	descDropped = newDesc("vcluster_tunnel_dropped_frames_total", "Tunnel frames dropped, by reason.", []string{"reason"})
	descUp      = newDesc("vcluster_host_up", "1 once the fabric answered on every plane.", nil)
	descColl    = newDesc("vcluster_collectives_total", "Collectives this host ran, by result.", []string{"result"})
	descLag     = newDesc("vcluster_loop_lag_seconds", "How late the real-time loop ran its recent events (quantiles) and the maximum (quantile 1).",
		[]string{"quantile"})
	descQP  = newDesc("vcluster_qp_counter_total", "Per-QP transport counters.", []string{"qpn", "peer_host", "counter"})
	descQPs = newDesc("vcluster_qps", "QPs of this host toward its collectives' peers, by state.", []string{"state"})
)

type hostCollector struct{ h *Host }

func (c *hostCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFrames, descDropped, descUp, descColl, descLag, descQP, descQPs} {
		ch <- d
	}
}

func (c *hostCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	ch <- prometheus.MustNewConstMetric(descFrames, prometheus.CounterValue, float64(h.framesIn.Load()), "in")
	ch <- prometheus.MustNewConstMetric(descFrames, prometheus.CounterValue, float64(h.framesOut.Load()), "out")
	for _, r := range tunnel.Reasons() {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(h.drops.Dropped(r)), r.String())
	}
	up := 0.0
	if h.Up() {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(descColl, prometheus.CounterValue, float64(h.stats.collectivesOK.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descColl, prometheus.CounterValue, float64(h.stats.collectivesFailed.Load()), "failed")
	l := h.lag.stats(0)
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(l.P50Ns)/1e9, "0.5")
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(l.P99Ns)/1e9, "0.99")
	ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(l.MaxNs)/1e9, "1")
	qs, err := h.QPs()
	if err != nil {
		return
	}
	states := map[string]int{}
	for _, q := range qs {
		states[q.State]++
		for _, k := range []string{"bytes_completed", "bytes_placed", "retransmissions", "timeouts", "data_packets_sent"} {
			ch <- prometheus.MustNewConstMetric(descQP, prometheus.CounterValue, float64(q.Counters[k]),
				strconv.FormatUint(uint64(q.QPN), 10), strconv.Itoa(q.Peer), k)
		}
	}
	for _, s := range []string{verbs.QPReset.String(), verbs.QPReady.String(), verbs.QPError.String()} {
		ch <- prometheus.MustNewConstMetric(descQPs, prometheus.GaugeValue, float64(states[s]), s)
	}
}
