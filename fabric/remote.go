package fabric

import "github.com/vcluster/vcluster/sim"

// FrameExporter takes the frames a link carries out of this process: the
// sending half of a cable whose receiving half runs elsewhere (a lab
// fabric's host-facing links, a lab host's NIC links). ExportFrame owns p
// and must Release it; at is when the frame's last bit would reach the
// far end (serialization, pipeline and propagation done), in this
// process's virtual time. It runs on the loop goroutine.
type FrameExporter interface {
	ExportFrame(l *Link, p *Packet, at sim.Time)
}

// SetExporter sends every frame the link transmits to e instead of its
// destination port (nil restores local delivery). The link keeps its
// rate, delay, loss, corruption and up/down state: a frame a fault drops
// never reaches e. It reuses the partition seam, so uncut links pay
// nothing for it; a link cut between partitions cannot also be exported.
func (l *Link) SetExporter(e FrameExporter) {
	if e == nil {
		if l.cut != nil && l.cut.remote != nil {
			l.cut = nil
		}
		return
	}
	if l.cut != nil && l.cut.remote == nil {
		panic("fabric: SetExporter on a link cut between partitions")
	}
	l.cut = &cutLink{remote: e}
}

// Arrive delivers p, a frame that reached this process from the link's
// far half (a lab tunnel), to the link's destination port now, as the
// link's own arrival event does: dropped and counted as DroppedDown while
// the link is down. p must come from the destination's pool (Pool.Get,
// Data and WireLen set); Arrive takes ownership. It must run on the loop
// goroutine (sim.Loop.Inject from a tunnel reader).
func (l *Link) Arrive(p *Packet) {
	if !l.up {
		l.Counters.DroppedDown++
		p.Release()
		return
	}
	l.Counters.Packets++
	l.Counters.Bytes += uint64(p.WireLen)
	l.dst.receive(p)
}

// Pool returns the packet pool frames arriving at the port come from.
func (pt *Port) Pool() *Pool { return pt.pool }

// dueExporter holds one link's exported frames until their arrival time.
type dueExporter struct {
	loop *sim.Loop
	next FrameExporter
	link *Link
	q    packetFIFO
}

// AtArrival wraps e so that each frame reaches it at its arrival time (the
// at of ExportFrame) instead of when its serialization starts: a lab
// tunnel then sends a frame when its last bit would have reached the far
// end, so the far process sees the line rate and the delays the fabric
// models. Use one per link (a link's arrival times never decrease, so its
// frames leave in order, each on time).
func AtArrival(loop *sim.Loop, e FrameExporter) FrameExporter {
	return &dueExporter{loop: loop, next: e}
}

func (d *dueExporter) ExportFrame(l *Link, p *Packet, at sim.Time) {
	d.link = l
	p.due = at
	d.q.push(p)
	d.loop.Post(at, d, 0)
}

// OnEvent hands on the oldest frame: one event per frame, at its due time.
func (d *dueExporter) OnEvent(uint64) {
	p := d.q.pop()
	d.next.ExportFrame(d.link, p, p.due)
}
