package fabric

import (
	"testing"
	"time"

	"github.com/vcluster/vcluster/sim"
)

type exportRec struct {
	frames [][]byte
	at     []sim.Time
}

func (e *exportRec) ExportFrame(l *Link, p *Packet, at sim.Time) {
	e.frames = append(e.frames, append([]byte(nil), p.Data...))
	e.at = append(e.at, at)
	p.Release()
}

type sinkDev struct{ got int }

func (d *sinkDev) Ingress(p *Packet, _ *Port) { d.got++; p.Release() }

// An exported link hands its frames to the exporter at their arrival time
// instead of delivering them; Arrive on the far copy delivers them, and
// a down link drops at either half.
func TestLinkExportAndArrive(t *testing.T) {
	loop := sim.NewLoop(sim.Options{})
	pool := NewPool(9000)
	cfg := &PortConfig{BufferBytes: 1 << 20, Classes: DefaultClassMap()}
	a := NewPort(loop, pool, "a", cfg)
	b := NewPort(loop, pool, "b", cfg)
	dev := &sinkDev{}
	b.Owner = dev
	a.Tx = NewLink(loop, "a-b", 1e9, time.Microsecond, b)
	a.Tx.src = a
	rec := &exportRec{}
	a.Tx.SetExporter(rec)
	frame := BuildFrame(pool, FrameSpec{Payload: 1000, Stored: -1})
	a.Enqueue(frame)
	loop.Run()
	if len(rec.frames) != 1 || dev.got != 0 {
		t.Fatalf("exported %d frames, delivered %d; want 1 and 0", len(rec.frames), dev.got)
	}
	// 1000 B + FCS + IFG at 1 Gb/s, then 1 µs of propagation.
	if rec.at[0] <= sim.Time(time.Microsecond) {
		t.Fatalf("arrival time %v does not include the propagation delay", rec.at[0])
	}
	in := pool.Get(len(rec.frames[0]))
	copy(in.Data, rec.frames[0])
	a.Tx.Arrive(in)
	if dev.got != 1 || a.Tx.Counters.Packets != 2 {
		t.Fatalf("Arrive delivered %d, link counted %d packets; want 1 and 2 (one exported, one arrived)", dev.got, a.Tx.Counters.Packets)
	}
	a.Tx.SetUp(false)
	in = pool.Get(len(rec.frames[0]))
	a.Tx.Arrive(in)
	a.Enqueue(BuildFrame(pool, FrameSpec{Payload: 1000, Stored: -1}))
	loop.Run()
	if dev.got != 1 || len(rec.frames) != 1 || a.Tx.Counters.DroppedDown != 2 {
		t.Fatalf("down link: delivered %d, exported %d, DroppedDown %d; want 1, 1, 2", dev.got, len(rec.frames), a.Tx.Counters.DroppedDown)
	}
	if pool.Live != 0 {
		t.Fatalf("%d packets leaked", pool.Live)
	}
	a.Tx.SetExporter(nil)
	a.Tx.SetUp(true)
	a.Enqueue(BuildFrame(pool, FrameSpec{Payload: 1000, Stored: -1}))
	loop.Run()
	if dev.got != 2 {
		t.Fatalf("after SetExporter(nil) the link delivered %d frames in all, want 2", dev.got)
	}
}

// AtArrival hands frames on at their arrival time, not their send time.
func TestAtArrival(t *testing.T) {
	loop := sim.NewLoop(sim.Options{})
	pool := NewPool(9000)
	cfg := &PortConfig{BufferBytes: 1 << 20, Classes: DefaultClassMap()}
	a, b := NewPort(loop, pool, "a", cfg), NewPort(loop, pool, "b", cfg)
	a.Tx = NewLink(loop, "a-b", 1e9, 10*time.Microsecond, b)
	a.Tx.src = a
	rec := &exportRec{}
	var seen []sim.Time
	a.Tx.SetExporter(AtArrival(loop, exportFunc(func(l *Link, p *Packet, at sim.Time) {
		seen = append(seen, loop.Now())
		rec.ExportFrame(l, p, at)
	})))
	for range 3 {
		a.Enqueue(BuildFrame(pool, FrameSpec{Payload: 1000, Stored: -1}))
	}
	loop.Run()
	if len(seen) != 3 {
		t.Fatalf("%d frames handed on, want 3", len(seen))
	}
	for i := range seen {
		if seen[i] != rec.at[i] || (i > 0 && seen[i] <= seen[i-1]) {
			t.Fatalf("frame %d handed on at %v, due %v (all: %v)", i, seen[i], rec.at[i], seen)
		}
	}
	if pool.Live != 0 {
		t.Fatalf("%d packets leaked", pool.Live)
	}
}

type exportFunc func(l *Link, p *Packet, at sim.Time)

func (f exportFunc) ExportFrame(l *Link, p *Packet, at sim.Time) { f(l, p, at) }
