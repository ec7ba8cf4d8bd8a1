package pathquality

import (
	"bufio"
	"io"
	"slices"
	"strconv"

	"github.com/vcluster/vcluster/fabric"
	"github.com/vcluster/vcluster/fabric/pcap"
)

// Output file names in a run directory.
const (
	SamplesFile = "pathquality_samples.csv"
	AdvertsFile = "pathquality_adverts.csv"
	HDCJSONFile = "hdc.jsonl"
	HDCPcapFile = "hdc.pcap"
)

func appendFloat(b []byte, x float64) []byte { return strconv.AppendFloat(b, x, 'g', 6, 64) }

// WriteSamplesCSV writes the time series: one row per port and sample,
// time-major (time_ns, switch, port, utilization, mean_queue_bytes,
// watermark_bytes, mean_delay_ns, hdc_records, score, quality_gbps).
func (cp *ControlPlane) WriteSamplesCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("time_ns,switch,port,utilization,mean_queue_bytes,watermark_bytes,mean_delay_ns,hdc_records,score,quality_gbps\n")
	var b []byte
	for k, at := range cp.ticks {
		for _, sc := range cp.sw {
			for i := range sc.ports {
				pc := &sc.ports[i]
				s := pc.series[k]
				b = strconv.AppendInt(b[:0], int64(at), 10)
				b = append(b, ',')
				b = append(b, sc.s.Name...)
				b = append(b, ',')
				b = append(b, pc.p.Name...)
				b = append(b, ',')
				b = appendFloat(b, float64(s.util))
				b = append(b, ',')
				b = appendFloat(b, float64(s.meanQ))
				b = append(b, ',')
				b = strconv.AppendInt(b, int64(s.watermark), 10)
				b = append(b, ',')
				b = strconv.AppendInt(b, int64(s.delay), 10)
				b = append(b, ',')
				b = strconv.AppendUint(b, uint64(s.hdc), 10)
				b = append(b, ',')
				b = appendFloat(b, float64(s.score))
				b = append(b, ',')
				b = appendFloat(b, float64(s.quality))
				b = append(b, '\n')
				bw.Write(b)
			}
		}
	}
	return bw.Flush()
}

// WriteAdvertsCSV writes every advertisement decision where the path
// bandwidth differed from the value last advertised (or none was):
// time_ns, switch, subnet, path_gbps, sent (1) or suppressed by damping
// (0), neighbours (how many it went, or would have gone, to).
func (cp *ControlPlane) WriteAdvertsCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("time_ns,switch,subnet,path_gbps,sent,neighbours\n")
	var b []byte
	for _, a := range cp.adverts {
		b = strconv.AppendInt(b[:0], int64(a.at), 10)
		b = append(b, ',')
		b = append(b, cp.sw[a.sw].s.Name...)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(a.subnet), 10)
		b = append(b, ',')
		b = appendFloat(b, a.gbps)
		if a.sent {
			b = append(b, ",1,"...)
		} else {
			b = append(b, ",0,"...)
		}
		b = strconv.AppendInt(b, int64(a.neighbours), 10)
		b = append(b, '\n')
		bw.Write(b)
	}
	return bw.Flush()
}

// hdcRef is one kept record of one switch.
type hdcRef struct {
	sw *switchCP
	r  *fabric.HDCRecord
}

// hdcRecords merges every switch's kept records in time order (ties:
// switch order, then capture order).
func (cp *ControlPlane) hdcRecords() []hdcRef {
	var refs []hdcRef
	for _, sc := range cp.sw {
		for i := range sc.hdc.Records {
			refs = append(refs, hdcRef{sc, &sc.hdc.Records[i]})
		}
	}
	slices.SortStableFunc(refs, func(a, b hdcRef) int {
		if a.r.Timestamp != b.r.Timestamp {
			return int(min(1, max(-1, a.r.Timestamp-b.r.Timestamp)))
		}
		return a.sw.idx - b.sw.idx
	})
	return refs
}

// portName names port i of sc in a record ("CPU": the switch made the frame).
func portName(sc *switchCP, i int32) string {
	if i < 0 || int(i) >= len(sc.ports) {
		return "CPU"
	}
	return sc.ports[i].p.Name
}

// WriteHDCJSONL writes every switch's kept HDC records as JSON lines in
// the seed's shape (ingress_port, egress_port, queue_id, queue_depth in
// bytes, latency in µs, timestamp in ns) plus switch, class ("rdma" or
// "other") and orig_len, in time order.
func (cp *ControlPlane) WriteHDCJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var b []byte
	for _, x := range cp.hdcRecords() {
		r := x.r
		b = append(b[:0], `{"switch":`...)
		b = strconv.AppendQuote(b, x.sw.s.Name)
		b = append(b, `,"ingress_port":`...)
		b = strconv.AppendQuote(b, portName(x.sw, r.IngressPort))
		b = append(b, `,"egress_port":`...)
		b = strconv.AppendQuote(b, portName(x.sw, r.EgressPort))
		b = append(b, `,"queue_id":`...)
		b = strconv.AppendUint(b, uint64(r.QueueID), 10)
		b = append(b, `,"queue_depth":`...)
		b = strconv.AppendInt(b, int64(r.QueueDepth), 10)
		b = append(b, `,"latency":`...)
		b = strconv.AppendFloat(b, float64(r.Latency)/1e3, 'f', -1, 64)
		b = append(b, `,"timestamp":`...)
		b = strconv.AppendInt(b, int64(r.Timestamp), 10)
		if r.RDMA {
			b = append(b, `,"class":"rdma"`...)
		} else {
			b = append(b, `,"class":"other"`...)
		}
		b = append(b, `,"orig_len":`...)
		b = strconv.AppendInt(b, int64(r.OrigLen), 10)
		b = append(b, "}\n"...)
		bw.Write(b)
	}
	return bw.Flush()
}

// WriteHDCPcap writes the records' excerpts as a pcap (Ethernet, snaplen
// fabric.HDCSnapLen, original lengths kept) that tshark decodes, in time
// order.
func (cp *ControlPlane) WriteHDCPcap(w io.Writer) error {
	pw, err := pcap.NewWriter(w, pcap.LinkTypeEthernet, fabric.HDCSnapLen)
	if err != nil {
		return err
	}
	for _, x := range cp.hdcRecords() {
		r := x.r
		n := min(r.SnapLen, len(r.Excerpt))
		if err := pw.WritePacket(int64(r.Timestamp), r.Excerpt[:n], r.OrigLen); err != nil {
			return err
		}
	}
	return pw.Flush()
}
