package labfabric

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vcluster/vcluster/fabric"
)

// The switch metrics of the lab dashboard: per switch port of the planes
// this process runs, with the names and meanings `vcluster --metrics`
// gives a simulated run's port groups (cmd/vcluster/metrics.go), labelled
// by port instead of experiment and point, and the fabric-wide drops,
// losses and frames in flight (not Conservation's sent and delivered: a
// lab's frames enter and leave through the tunnels, which
// vcluster_tunnel_frames_in_total and _out_total count). A scrape copies the counters on the loop goroutine (Do),
// which owns them, and builds the metrics off it.

var (
	portLabels     = []string{"port", "tier", "plane"}
	descQueue      = newDesc("vcluster_port_queue_bytes", "Bytes in the port's egress queues now.", portLabels)
	descMaxQueue   = newDesc("vcluster_port_max_queue_bytes", "Largest egress queue the port has held.", portLabels)
	descTxPkts     = newDesc("vcluster_port_tx_packets_total", "Frames transmitted by the port.", portLabels)
	descTxBytes    = newDesc("vcluster_port_tx_bytes_total", "Bytes transmitted by the port.", portLabels)
	descRxPkts     = newDesc("vcluster_port_rx_packets_total", "Frames received by the port.", portLabels)
	descECN        = newDesc("vcluster_port_ecn_marks_total", "Frames ECN-marked (CE) by the port's egress queues.", portLabels)
	descTrims      = newDesc("vcluster_port_trims_total", "Frames the port trimmed to their headers.", portLabels)
	descPauseTx    = newDesc("vcluster_port_pfc_pause_tx_total", "PFC PAUSE frames the port sent.", portLabels)
	descPauseRx    = newDesc("vcluster_port_pfc_pause_rx_total", "PFC PAUSE frames the port received.", portLabels)
	descPortDrops  = newDesc("vcluster_port_drops_total", "Frames the port dropped, by reason (reasons that dropped none are left out).", append(portLabels[:3:3], "reason"))
	descLinkLost   = newDesc("vcluster_link_lost_total", "Frames lost on the link leaving the port (loss model).", portLabels)
	descFabDropped = newDesc("vcluster_fabric_frames_dropped_total", "Frames dropped in the fabric, by reason: the port drop reasons, black_hole (switch), fcs (bit errors on a link) and link_down.", []string{"reason"})
	descFabLost    = newDesc("vcluster_fabric_frames_lost_total", "Frames lost on links (loss model).", nil)
	descInFlight   = newDesc("vcluster_fabric_frames_in_flight", "Frames in the fabric now: on links (where=link) and in egress queues (where=queue).", []string{"where"})
)

// switchDescs are the descriptors of switchCollector.
var switchDescs = []*prometheus.Desc{descQueue, descMaxQueue, descTxPkts, descTxBytes, descRxPkts, descECN, descTrims, descPauseTx,
	descPauseRx, descPortDrops, descLinkLost, descFabDropped, descFabLost, descInFlight}

// portReading is one switch port's counters, copied on the loop.
type portReading struct {
	name, tier, plane string
	queued            int
	lost              uint64
	c                 fabric.PortCounters
}

// switchReading is the fabric's switches at one scrape.
type switchReading struct {
	ports []portReading
	cons  fabric.Conservation
}

// readSwitches copies the switch ports' counters of the planes this
// process runs. Loop goroutine only.
func (f *Fabric) readSwitches(into *switchReading) {
	into.ports = into.ports[:0]
	for _, s := range f.topo.Switches {
		if !f.runsPlane(s.Plane) {
			continue
		}
		tier, plane := "t"+strconv.Itoa(s.Tier), strconv.Itoa(s.Plane)
		for _, p := range s.Ports {
			r := portReading{name: p.Name, tier: tier, plane: plane, queued: p.QueuedBytes(), c: p.Counters}
			if p.Tx != nil {
				r.lost = p.Tx.Counters.Lost
			}
			into.ports = append(into.ports, r)
		}
	}
	into.cons = f.topo.Conservation()
}

func (f *Fabric) runsPlane(p int) bool {
	for _, q := range f.planes {
		if q == p {
			return true
		}
	}
	return false
}

// switchCollector turns one loop-side copy of the switch counters into
// metrics per scrape.
type switchCollector struct{ f *Fabric }

func (c *switchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range switchDescs {
		ch <- d
	}
}

func (c *switchCollector) Collect(ch chan<- prometheus.Metric) {
	var r switchReading
	if c.f.Do(func() { c.f.readSwitches(&r) }) != nil {
		return
	}
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	ct := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for i := range r.ports {
		p := &r.ports[i]
		l := []string{p.name, p.tier, p.plane}
		g(descQueue, float64(p.queued), l...)
		g(descMaxQueue, float64(p.c.MaxQueueBytes), l...)
		ct(descTxPkts, p.c.TxPackets, l...)
		ct(descTxBytes, p.c.TxBytes, l...)
		ct(descRxPkts, p.c.RxPackets, l...)
		ct(descECN, p.c.ECNMarks, l...)
		ct(descTrims, p.c.Trims, l...)
		ct(descPauseTx, p.c.PauseTx, l...)
		ct(descPauseRx, p.c.PauseRx, l...)
		ct(descLinkLost, p.lost, l...)
		for k, reason := range fabric.DropReasonNames {
			// Nine reasons per port would be most of the series, nearly
			// all zero; the fabric-wide counter has every reason.
			if n := p.c.Drops[k]; n > 0 {
				ct(descPortDrops, n, append(l[:3:3], reason)...)
			}
		}
	}
	cs := &r.cons
	for k, reason := range fabric.DropReasonNames {
		ct(descFabDropped, cs.Dropped[k], reason)
	}
	ct(descFabDropped, cs.BlackHoled, "black_hole")
	ct(descFabDropped, cs.Corrupted, "fcs")
	ct(descFabDropped, cs.LinkDown, "link_down")
	ct(descFabLost, cs.Lost)
	g(descInFlight, float64(cs.OnLinks), "link")
	g(descInFlight, float64(cs.InQueues), "queue")
}

// exported are the names of every descriptor newDesc made.
var exported []string

// newDesc is prometheus.NewDesc, remembering the name for MetricNames.
func newDesc(name, help string, labels []string) *prometheus.Desc {
	exported = append(exported, name)
	return prometheus.NewDesc(name, help, labels, nil)
}

// MetricNames are the names of every metric the fabric's /metrics may
// serve (the lab dashboard's check reads them), sorted.
func MetricNames() []string {
	out := slices.Clone(exported)
	slices.Sort(out)
	return out
}
