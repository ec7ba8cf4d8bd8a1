package fabric

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// WriteCountersCSV writes one row per port (switch ports, then NIC ports)
// with every counter, in build order, so two runs compare byte for byte.
func (t *Topology) WriteCountersCSV(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprint(b, "port,tx_packets,tx_bytes,rx_packets,rx_bytes")
	for _, n := range DropReasonNames {
		fmt.Fprintf(b, ",drop_%s", n)
	}
	fmt.Fprintln(b, ",ecn_marks,trims,pause_tx,resume_tx,pause_rx,resume_rx,storms,restored,max_queue_bytes,link_lost,link_corrupted,link_down_drops")
	row := func(p *Port) {
		c := &p.Counters
		fmt.Fprintf(b, "%s,%d,%d,%d,%d", p.Name, c.TxPackets, c.TxBytes, c.RxPackets, c.RxBytes)
		for _, d := range c.Drops {
			fmt.Fprintf(b, ",%d", d)
		}
		var lc LinkCounters
		if p.Tx != nil {
			lc = p.Tx.Counters
		}
		fmt.Fprintf(b, ",%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n", c.ECNMarks, c.Trims, c.PauseTx, c.ResumeTx, c.PauseRx, c.ResumeRx,
			c.StormsDetected, c.StormsRestored, c.MaxQueueBytes, lc.Lost, lc.Corrupted, lc.DroppedDown)
	}
	for _, s := range t.Switches {
		for _, p := range s.Ports {
			row(p)
		}
	}
	for _, hp := range t.HostPorts {
		for _, p := range hp {
			row(p)
		}
	}
	return b.Flush()
}

// QueueSample is one queue-depth reading.
type QueueSample struct {
	At    sim.Time
	Port  int // index into the sampler's ports
	Bytes int
}

// QueueSampler records the queued bytes of chosen ports every interval of
// virtual time (for plots and the max-depth series).
type QueueSampler struct {
	Ports    []*Port
	Interval time.Duration
	Samples  []QueueSample
	loop     *sim.Loop
	until    sim.Time
}

// NewQueueSampler samples ports every interval until the given time.
func NewQueueSampler(loop *sim.Loop, ports []*Port, interval time.Duration, until sim.Time) *QueueSampler {
	s := &QueueSampler{Ports: ports, Interval: interval, loop: loop, until: until}
	loop.Post(loop.Now(), s, 0)
	return s
}

// OnEvent takes one round of samples.
func (s *QueueSampler) OnEvent(uint64) {
	now := s.loop.Now()
	for i, p := range s.Ports {
		s.Samples = append(s.Samples, QueueSample{At: now, Port: i, Bytes: p.QueuedBytes()})
	}
	if next := now + sim.Time(s.Interval); next <= s.until {
		s.loop.Post(next, s, 0)
	}
}

// WriteCSV writes the samples as time_ns,port,bytes.
func (s *QueueSampler) WriteCSV(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintln(b, "time_ns,port,queue_bytes")
	for _, x := range s.Samples {
		fmt.Fprintf(b, "%d,%s,%d\n", x.At, s.Ports[x.Port].Name, x.Bytes)
	}
	return b.Flush()
}
