package main

import (
	"fmt"
	"io"
	"time"

	"github.com/vcluster/vcluster/sim"
)

// progressLine prints a one-line status of a long simulation to w, at most
// once per interval of wall time: virtual time reached (and the target, if
// known), events per second, and the ETA from the virtual-time rate. The
// loop must have been created with a WallClock (events/s come from it).
type progressLine struct {
	w        io.Writer
	until    sim.Time
	interval time.Duration
	wall     sim.WallClock
	last     int64
	lastVT   sim.Time
	printed  bool
}

func attachProgress(w io.Writer, loop *sim.Loop, wall sim.WallClock, until sim.Time, interval time.Duration) *progressLine {
	p := &progressLine{w: w, until: until, interval: interval, wall: wall, last: wall.Now()}
	loop.OnProgress(1<<16, p.report)
	return p
}

func (p *progressLine) report(pr sim.Progress) {
	now := p.wall.Now()
	if time.Duration(now-p.last) < p.interval {
		return
	}
	dt := time.Duration(now - p.last)
	rate := float64(pr.Now-p.lastVT) / dt.Seconds() // virtual ns per wall second
	p.last, p.lastVT = now, pr.Now
	line := fmt.Sprintf("\r  virtual %v", time.Duration(pr.Now))
	if p.until > 0 {
		line += fmt.Sprintf(" / %v (%.0f%%)", time.Duration(p.until), 100*float64(pr.Now)/float64(p.until))
		if rate > 0 {
			eta := time.Duration(float64(p.until-pr.Now) / rate * 1e9)
			line += fmt.Sprintf("  ETA %v", eta.Round(time.Second))
		}
	}
	line += fmt.Sprintf("  %.2f M events/s  %d pending  wall %v   ", pr.EventsPerSec/1e6, pr.Pending, pr.WallElapsed.Round(time.Second))
	fmt.Fprint(p.w, line)
	p.printed = true
}

// done ends the status line if one was printed.
func (p *progressLine) done() {
	if p.printed {
		fmt.Fprintln(p.w)
	}
}
