package labhost

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vcluster/vcluster/mrc"
)

// The RDMA metrics of the lab dashboard: the host's transport counters
// summed over its engine's QPs (the names and meanings of a simulated
// run's, cmd/vcluster/metrics.go, with a host label instead of
// experiment and point) and its multipath QPs' EVs by plane and state. A
// scrape copies them on the loop goroutine (onLoop), which owns the
// engine, and builds the metrics off it. Retired QPs keep their final
// counters in the engine, so the sums never go back.

var (
	engineLabels  = []string{"host", "transport"}
	descInfo      = newDesc("vcluster_host_info", "Always 1: the host's id and transport (join on instance to name other series by host).", engineLabels)
	descQPCount   = newDesc("vcluster_transport_queue_pairs", "QPs of the host's RDMA engine (retired ones included).", engineLabels)
	descBytesDone = newDesc("vcluster_transport_bytes_completed_total", "Payload bytes the host sent that were acknowledged and completed (goodput out).", engineLabels)
	descPlaced    = newDesc("vcluster_transport_bytes_placed_total", "Payload bytes placed into the host's memory by its peers (goodput in).", engineLabels)
	descData      = newDesc("vcluster_transport_data_packets_total", "Data packets sent for the first time.", engineLabels)
	descRetx      = newDesc("vcluster_transport_retransmissions_total", "Data packets retransmitted.", engineLabels)
	descTimeouts  = newDesc("vcluster_transport_timeouts_total", "Retransmission timeouts.", engineLabels)
	descNacks     = newDesc("vcluster_transport_nacks_received_total", "NACKs received.", engineLabels)
	descTrimRx    = newDesc("vcluster_transport_trimmed_received_total", "Trimmed packets received.", engineLabels)
	descECNRx     = newDesc("vcluster_transport_ecn_marked_received_total", "CE-marked data packets received.", engineLabels)
	descCNPs      = newDesc("vcluster_transport_cnps_sent_total", "Congestion notification packets sent.", engineLabels)
	descEVs       = newDesc("vcluster_host_evs", "Entropy values of the host's live multipath (MRC) QPs, by plane and state.", []string{"host", "plane", "state"})
)

// engineDescs are the descriptors of engineCollector.
var engineDescs = []*prometheus.Desc{descInfo, descQPCount, descBytesDone, descPlaced, descData, descRetx, descTimeouts, descNacks,
	descTrimRx, descECNRx, descCNPs, descEVs}

// evStates are the EV states in the order of mrc.EVState.
var evStates = [...]mrc.EVState{mrc.EVGood, mrc.EVSkip, mrc.EVAssumedBad, mrc.EVDenied}

// engineReading is the engine at one scrape.
type engineReading struct {
	qps                                            int
	completed, placed, data, retx, timeouts, nacks uint64
	trimmed, ecn, cnps                             uint64
	evs                                            [][len(evStates)]int // [plane][state]
}

// readEngine sums the engine's QP counters and counts its EVs. Loop
// goroutine only.
func (h *Host) readEngine() engineReading {
	r := engineReading{evs: make([][len(evStates)]int, h.planes)}
	for _, t := range h.cl.Hosts[h.id].RDMA().QPs() {
		if t == nil {
			continue
		}
		r.qps++
		s := t.Stats()
		r.completed += s.BytesCompleted
		r.placed += s.BytesPlaced
		r.data += s.DataPacketsSent
		r.retx += s.Retransmissions
		r.timeouts += s.Timeouts
		r.nacks += s.NacksReceived
		r.trimmed += s.TrimmedReceived
		r.ecn += s.ECNMarksReceived
		r.cnps += s.CNPsSent
		if m, ok := t.(evStater); ok {
			for _, ev := range m.EVStates() {
				if ev.Plane >= 0 && ev.Plane < len(r.evs) && int(ev.State) < len(evStates) {
					r.evs[ev.Plane][ev.State]++
				}
			}
		}
	}
	return r
}

// engineCollector turns one loop-side reading of the engine into metrics
// per scrape.
type engineCollector struct{ h *Host }

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range engineDescs {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	host, kind := strconv.Itoa(h.id), h.cl.Config.Transport.Kind
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, host, kind)
	var r engineReading
	if h.onLoop(func() { r = h.readEngine() }, loopTimeout) != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descQPCount, prometheus.GaugeValue, float64(r.qps), host, kind)
	for _, v := range []struct {
		d *prometheus.Desc
		n uint64
	}{{descBytesDone, r.completed}, {descPlaced, r.placed}, {descData, r.data}, {descRetx, r.retx}, {descTimeouts, r.timeouts},
		{descNacks, r.nacks}, {descTrimRx, r.trimmed}, {descECNRx, r.ecn}, {descCNPs, r.cnps}} {
		ch <- prometheus.MustNewConstMetric(v.d, prometheus.CounterValue, float64(v.n), host, kind)
	}
	for plane, counts := range r.evs {
		for i, st := range evStates {
			ch <- prometheus.MustNewConstMetric(descEVs, prometheus.GaugeValue, float64(counts[i]), host, strconv.Itoa(plane), st.String())
		}
	}
}

// exported are the names of every descriptor newDesc made.
var exported []string

// newDesc is prometheus.NewDesc, remembering the name for MetricNames.
func newDesc(name, help string, labels []string) *prometheus.Desc {
	exported = append(exported, name)
	return prometheus.NewDesc(name, help, labels, nil)
}

// MetricNames are the names of every metric a host's /metrics may serve
// (the lab dashboard's check reads them), sorted.
func MetricNames() []string {
	out := slices.Clone(exported)
	slices.Sort(out)
	return out
}
