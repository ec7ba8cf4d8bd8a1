package fabric

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// WriteCountersCSV writes one row per port (switch ports, then NIC ports)
// with every counter, in build order, so two runs compare byte for byte.
// The link columns are the link leaving the port; queued_frames and
// link_in_flight are read now. Summed over the rows, the columns conserve
// frames (see Conservation): sent = delivered + drop_* + black_holed +
// link_lost + link_corrupted + link_down_drops + queued_frames +
// link_in_flight.
func (t *Topology) WriteCountersCSV(w io.Writer) error {
	if _, err := io.WriteString(w, CountersCSVHeader()+"\n"); err != nil {
		return err
	}
	return t.WriteCountersRows(w, "")
}

// CountersCSVHeader is WriteCountersCSV's header line, without its
// newline: port, then the counter columns.
func CountersCSVHeader() string {
	var b strings.Builder
	b.WriteString("port,tx_packets,tx_bytes,rx_packets,rx_bytes")
	for _, n := range DropReasonNames {
		b.WriteString(",drop_" + n)
	}
	b.WriteString(",ecn_marks,trims,pause_tx,resume_tx,pause_rx,resume_rx,storms,restored,max_queue_bytes,link_lost,link_corrupted,link_down_drops," +
		"sent,delivered,black_holed,queued_frames,link_in_flight")
	return b.String()
}

// WriteCountersRows writes WriteCountersCSV's rows without its header,
// each line starting with prefix (CSV fields ending in a comma, or ""):
// a file can stack the fabrics of several runs, one block each, under
// one header of its own.
func (t *Topology) WriteCountersRows(w io.Writer, prefix string) error {
	b := bufio.NewWriter(w)
	outbox := t.outboxFrames()
	row := func(p *Port) {
		c := &p.Counters
		fmt.Fprintf(b, "%s%s,%d,%d,%d,%d", prefix, p.Name, c.TxPackets, c.TxBytes, c.RxPackets, c.RxBytes)
		for _, d := range c.Drops {
			fmt.Fprintf(b, ",%d", d)
		}
		var lc LinkCounters
		var onLink int
		if p.Tx != nil {
			lc = p.Tx.Counters
			lc.DroppedDown = atomic.LoadUint64(&p.Tx.Counters.DroppedDown)
			onLink = p.Tx.InFlight() + outbox[p.Tx]
		}
		fmt.Fprintf(b, ",%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d", c.ECNMarks, c.Trims, c.PauseTx, c.ResumeTx, c.PauseRx, c.ResumeRx,
			c.StormsDetected, c.StormsRestored, c.MaxQueueBytes, lc.Lost, lc.Corrupted, lc.DroppedDown)
		fmt.Fprintf(b, ",%d,%d,%d,%d,%d\n", c.Sent, c.Delivered, c.BlackHoled, p.QueuedFrames(), onLink)
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

// Conservation is where every frame of a fabric went, read at one instant
// (Topology.Conservation). Every frame that enters the fabric (Sent) is at
// every moment exactly one of: delivered, dropped by a port (by reason),
// black-holed by a switch, lost, corrupted or dropped for a down link on a
// link, or still in flight — on a link or in a port's queue:
//
//	Sent = Delivered + Σ Dropped + BlackHoled + Lost + Corrupted + LinkDown + OnLinks + InQueues
//
// Frames a NIC drops before handing them to its port, or after taking
// them (endpoint's NIC counters), never were in the fabric.
type Conservation struct {
	Sent, Delivered uint64                 // PortCounters.Sent, .Delivered
	Dropped         [numDropReasons]uint64 // PortCounters.Drops, by DropReasonNames
	BlackHoled      uint64                 // SwitchCounters.BlackHoled
	// Lost, Corrupted, LinkDown: LinkCounters.Lost, .Corrupted (a failed
	// FCS, dropped by the receiving MAC), .DroppedDown.
	Lost, Corrupted, LinkDown uint64
	// OnLinks, InQueues: frames in flight at the reading — sent onto a link
	// and not yet arrived (the frame being serialized is on its link), and
	// waiting in egress queues.
	OnLinks, InQueues uint64
}

// Add adds o's counts to c (summing clusters).
func (c *Conservation) Add(o Conservation) {
	c.Sent += o.Sent
	c.Delivered += o.Delivered
	for i := range c.Dropped {
		c.Dropped[i] += o.Dropped[i]
	}
	c.BlackHoled += o.BlackHoled
	c.Lost += o.Lost
	c.Corrupted += o.Corrupted
	c.LinkDown += o.LinkDown
	c.OnLinks += o.OnLinks
	c.InQueues += o.InQueues
}

// Accounted is every frame the reading places: delivered, dropped, lost
// or in flight. It equals Sent.
func (c Conservation) Accounted() uint64 {
	n := c.Delivered + c.BlackHoled + c.Lost + c.Corrupted + c.LinkDown + c.OnLinks + c.InQueues
	for _, d := range c.Dropped {
		n += d
	}
	return n
}

// Check returns an error naming the gap when the reading does not
// account for every frame sent.
func (c Conservation) Check() error {
	if a := c.Accounted(); a != c.Sent {
		return fmt.Errorf("fabric: %d frames sent, %d accounted for (%+d): %+v", c.Sent, a, int64(a)-int64(c.Sent), c)
	}
	return nil
}

// Conservation reads the fabric's frame accounting now. Call it between
// events (from an event, or with the loop stopped); for a partitioned
// fabric, with every partition stopped (between windows, or after a run).
func (t *Topology) Conservation() Conservation {
	var c Conservation
	port := func(p *Port) {
		pc := &p.Counters
		c.Sent += pc.Sent
		c.Delivered += pc.Delivered
		for i, d := range pc.Drops {
			c.Dropped[i] += d
		}
		c.InQueues += uint64(p.QueuedFrames())
	}
	for _, s := range t.Switches {
		c.BlackHoled += s.Counters.BlackHoled
		for _, p := range s.Ports {
			port(p)
		}
	}
	for _, hp := range t.HostPorts {
		for _, p := range hp {
			port(p)
		}
	}
	for _, l := range t.Links {
		lc := &l.Counters
		c.Lost += lc.Lost
		c.Corrupted += lc.Corrupted
		c.LinkDown += atomic.LoadUint64(&lc.DroppedDown)
		c.OnLinks += uint64(l.InFlight())
	}
	for _, n := range t.outboxFrames() {
		c.OnLinks += uint64(n)
	}
	return c
}

// outboxFrames counts the frames on cut links (partition.go) that the
// receiving partition has not adopted yet: they wait in their sender's
// outbox, not in the link's in-flight queue. Nil when nothing is cut.
func (t *Topology) outboxFrames() map[*Link]int {
	var parts []*partState
	for _, l := range t.Links {
		if l.cut != nil && l.cut.src != nil && !slices.Contains(parts, l.cut.src) {
			parts = append(parts, l.cut.src)
		}
	}
	if parts == nil {
		return nil
	}
	m := map[*Link]int{}
	for _, s := range parts {
		for _, boxes := range s.out {
			for _, box := range boxes {
				for _, x := range box {
					m[x.l]++
				}
			}
		}
	}
	return m
}

// InFlight returns the frames on the link now: sent onto it and neither
// delivered nor dropped yet. On a cut link (partition.go) it counts only the
// frames already handed to the receiving partition, not those still in the
// sender's outbox (Topology.Conservation and WriteCountersCSV add them).
func (l *Link) InFlight() int { return l.inflight.n }

// QueuedFrames returns the frames waiting in the port's egress queues (all
// classes and MAC control; not the one being serialized, which its link
// already holds).
func (pt *Port) QueuedFrames() int {
	n := pt.ctrl.n
	for c := range pt.queues {
		n += pt.queues[c].n
	}
	return n
}
