package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vcluster/vcluster/sim"
)

type stepWall struct{ now int64 }

func (s *stepWall) Now() int64                            { return s.now }
func (s *stepWall) SleepUntil(d int64, _ <-chan struct{}) { s.now = d }

func TestProgressLine(t *testing.T) {
	w := &stepWall{}
	loop := sim.NewLoop(sim.Options{Wall: w})
	var out bytes.Buffer
	p := attachProgress(&out, loop, w, sim.Second, 0)
	// 2^17 events over 1 ms of virtual time, each taking 1 µs of wall time.
	for i := 0; i < 1<<17; i++ {
		loop.At(sim.Time(i)*sim.Millisecond/(1<<17), func() { w.now += 1000 })
	}
	loop.Run()
	p.done()
	s := out.String()
	for _, want := range []string{"virtual ", "/ 1s (", "ETA ", "M events/s"} {
		if !strings.Contains(s, want) {
			t.Fatalf("progress line %q lacks %q", s, want)
		}
	}
	// 1 event per µs of wall → 1.00 M events/s.
	if !strings.Contains(s, "1.00 M events/s") {
		t.Fatalf("rate wrong in %q", s)
	}
}
