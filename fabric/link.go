package fabric

import (
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
	Name     string
	Rate     uint64        // bits/s, used by the sending port
	Delay    time.Duration // propagation delay
	Loss     LossModel
	Corr     CorruptionModel
	Counters LinkCounters

	loop     *sim.Loop
	src, dst *Port // src: the port that serializes onto this link (nil if not cabled by a topology)
	up       bool
	rank     uint32   // nonzero: arrivals are ranked events (see RankLinks)
	cut      *cutLink // set when the link joins two partitions (partition.go)
	inflight packetFIFO
	lastDue  sim.Time
}

// NewLink returns an up link delivering to dst.
func NewLink(loop *sim.Loop, name string, rate uint64, delay time.Duration, dst *Port) *Link {
	return &Link{Name: name, Rate: rate, Delay: delay, loop: loop, dst: dst, up: true}
}

// Up reports whether the link carries traffic.
func (l *Link) Up() bool { return l.up }

// SetUp brings the link up or down. Frames in flight when it goes down are
// lost (counted as DroppedDown when they would have arrived). When it comes
// back, the sending port's device hears it (TxReadyNotifier), as a NIC
// gets a link-up interrupt, and the port resumes sending what it queued.
func (l *Link) SetUp(up bool) {
	was := l.up
	l.up = up
	if up && !was && l.src != nil {
		if !l.src.busy {
			l.src.startNext()
		}
		if l.src.Notify != nil {
			l.src.Notify.TxReady(l.src)
		}
	}
}

// Dst returns the port the link delivers to.
func (l *Link) Dst() *Port { return l.dst }

// transmit takes a fully serialized frame at the current time and delivers
// it after the propagation delay.
func (l *Link) transmit(p *Packet) {
	if !l.up {
		l.Counters.DroppedDown++
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
	at := l.loop.Now() + sim.Time(l.Delay)
	// A delay that shrank (a latency fault ending) must not reorder frames.
	if at < l.lastDue {
		at = l.lastDue
	}
	l.lastDue = at
	if l.cut != nil {
		l.cut.send(l, p, at) // the far partition schedules the arrival
		return
	}
	l.inflight.push(p)
	if uint64(l.inflight.n) > l.Counters.InFlightHW {
		l.Counters.InFlightHW = uint64(l.inflight.n)
	}
	if l.rank != 0 {
		l.loop.ScheduleRanked(at, l, 0, l.rank)
		return
	}
	l.loop.Schedule(at, l, 0)
}

// OnEvent delivers the oldest frame in flight.
func (l *Link) OnEvent(uint64) {
	p := l.inflight.pop()
	if !l.up {
		l.Counters.DroppedDown++
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
