package fabric

import (
	"sync/atomic"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// LossModel decides whether a link loses a packet. Implementations keep
// their own random stream (seeded from the run seed) so runs replay exactly.
type LossModel interface {
	Lose(p *Packet) bool
}

// CorruptionModel decides whether a packet arrives with bit errors; a
// corrupted frame fails its FCS and the receiving MAC drops it.
type CorruptionModel interface {
	Corrupt(p *Packet) bool
}

// Bernoulli loses each packet independently with probability P.
type Bernoulli struct {
	P   float64
	rng sim.FastRand
}

// NewBernoulli returns a Bernoulli loss model with its own stream.
func NewBernoulli(p float64, seed uint64, name string) *Bernoulli {
	return &Bernoulli{P: p, rng: sim.NewFastRand(seed, "loss/"+name)}
}

// Lose implements LossModel.
func (b *Bernoulli) Lose(*Packet) bool { return b.P > 0 && b.rng.Float64() < b.P }

// Corrupt implements CorruptionModel (a Bernoulli model can serve as both).
func (b *Bernoulli) Corrupt(p *Packet) bool { return b.Lose(p) }

// LinkCounters count what happened on one direction of a cable.
type LinkCounters struct {
	Packets, Bytes        uint64 // delivered
	DroppedDown, Lost     uint64
	Corrupted, InFlightHW uint64 // InFlightHW: high-water mark of packets in flight
}

// Link is one direction of a cable: it carries serialized frames from a
// port to its peer with a fixed propagation delay. Serialization happens in
// the sending Port at Rate; the Link only delays, loses or corrupts. Frames
// are delivered in order (a FIFO in flight), one event each.
type Link struct {
	// Hot fields first: a frame's arrival reads the first cache line
	// (in-flight FIFO, destination, state, delivery counters), a transmit
	// the first two (see Prefetch).
	inflight packetFIFO
	dst      *Port // the port it delivers to
	up       bool
	rank     uint32 // nonzero: arrivals are ranked events (its position in Topology.Links + 1)
	Counters LinkCounters
	loop     *sim.Loop
	lastDue  sim.Time
	Delay    time.Duration // propagation delay
	// Pipeline is the sending device's forwarding latency: a switch's
	// (Options/ClosSpec SwitchLatency) on every link leaving a switch, 0
	// on a NIC's. A frame reaches the far end Pipeline + Delay after its
	// last bit left the sending port: the switch's pipeline sits after its
	// egress queue and serialization, so queueing, ECN marking at enqueue
	// and PFC accounting see a frame the moment it arrives, and every
	// frame the switch sends (data, control, PAUSE) pays it once.
	Pipeline time.Duration
	cut      *cutLink // set when the link joins two partitions (partition.go)
	Loss     LossModel
	Corr     CorruptionModel

	Rate uint64 // bits/s, used by the sending port
	src  *Port  // the port that serializes onto this link (nil if not cabled by a topology)
	Name string
	rt   *routing // hears state changes (Topology.SetReconvergence), or nil
}

// NewLink returns an up link delivering to dst. A topology's links are
// ranked by their position in Links (Topology.connect), so their arrivals
// are ranked loop events: frames arriving at one time are received before
// anything else happening then, in link order, on the classic loop as on
// a partitioned run. A link made alone is unranked.
func NewLink(loop *sim.Loop, name string, rate uint64, delay time.Duration, dst *Port) *Link {
	ll := &lineLink{Link: Link{Name: name, Rate: rate, Delay: delay, loop: loop, dst: dst, up: true}}
	return &ll.Link
}

// Up reports whether the link carries traffic.
func (l *Link) Up() bool { return l.up }

// SetUp brings the link up or down. Frames in flight when it goes down are
// lost (counted as DroppedDown when they would have arrived). The sending
// port's device hears of either change (TxReadyNotifier), as a NIC gets a
// link interrupt; when the link comes back the port resumes sending what
// it queued. With routing reconvergence on (Topology.SetReconvergence)
// the ECMP tables follow the change a delay later.
func (l *Link) SetUp(up bool) {
	was := l.up
	l.up = up
	if up == was {
		return
	}
	if l.rt != nil {
		l.rt.changed(l)
	}
	if l.src == nil {
		return
	}
	if up {
		l.src.kick()
	}
	if l.src.Notify != nil {
		l.src.Notify.TxReady(l.src)
	}
}

// Dst returns the port the link delivers to.
func (l *Link) Dst() *Port { return l.dst }

// transmit takes a frame whose serialization started now and ends at done,
// and delivers it the pipeline and propagation delays after done. A frame that a fault
// would lose is dropped here, when it is sent.
func (l *Link) transmit(p *Packet, done sim.Time) {
	if !l.up {
		// Atomic: on a cut link the sender (here at transmit) and the
		// receiver (at arrival) both count, in different partitions.
		atomic.AddUint64(&l.Counters.DroppedDown, 1)
		p.Release()
		return
	}
	if l.Loss != nil && l.Loss.Lose(p) {
		l.Counters.Lost++
		p.Release()
		return
	}
	if l.Corr != nil && l.Corr.Corrupt(p) {
		l.Counters.Corrupted++
		p.Release()
		return
	}
	at := done + sim.Time(l.Delay+l.Pipeline)
	// A delay that shrank (a latency fault ending) must not reorder frames.
	if at < l.lastDue {
		at = l.lastDue
	}
	l.lastDue = at
	if l.cut != nil {
		l.cut.send(l, p, at) // the far partition schedules the arrival
		return
	}
	p.due = at
	l.inflight.push(p)
	if uint64(l.inflight.n) > l.Counters.InFlightHW {
		// In flight means due after now: frames due now whose arrival has
		// not run yet (a transmit from inside a ranked arrival) do not
		// count, so cut and uncut links agree (cutLink.send).
		n, now := l.inflight.n, l.loop.Now()
		for q := l.inflight.head; q != nil && q.due <= now; q = q.next {
			n--
		}
		l.Counters.InFlightHW = max(l.Counters.InFlightHW, uint64(n))
	}
	if l.rank != 0 {
		l.loop.PostRanked(at, l, 0, l.rank)
		return
	}
	l.loop.Post(at, l, 0)
}

// OnEvent delivers the oldest frame in flight.
func (l *Link) OnEvent(uint64) {
	p := l.inflight.pop()
	if !l.up {
		// Atomic: on a cut link the sender (here at transmit) and the
		// receiver (at arrival) both count, in different partitions.
		atomic.AddUint64(&l.Counters.DroppedDown, 1)
		p.Release()
		return
	}
	l.Counters.Packets++
	l.Counters.Bytes += uint64(p.WireLen)
	l.dst.receive(p)
}

// serializationTime returns how long bytes take at rate bits/s, carrying a
// sub-nanosecond remainder so long runs keep exact line rate.
func serializationTime(bytes int, rate uint64, rem *uint64) sim.Time {
	num := uint64(bytes)*8*1_000_000_000 + *rem
	t := num / rate
	*rem = num % rate
	return sim.Time(t)
}
