package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressUI shows an observer's status: a bar on a terminal, plain log
// lines otherwise, or nothing. As an io.Writer it takes the experiments'
// own log lines (env.Progress).
type progressUI interface {
	io.Writer
	begin(name string)
	point(s progressStatus)  // a point starts
	update(s progressStatus) // from inside the loop, at most every interval()
	end(s progressStatus)
	interval() time.Duration
}

type noProgress struct{}

func (noProgress) Write(b []byte) (int, error) { return len(b), nil }
func (noProgress) begin(string)                {}
func (noProgress) point(progressStatus)        {}
func (noProgress) update(progressStatus)       {}
func (noProgress) end(progressStatus)          {}
func (noProgress) interval() time.Duration     { return time.Hour }

// logProgress writes plain lines (CI, pipes, tests): one per point, one
// every `every` of wall time inside a long point, one at the end.
type logProgress struct {
	w     io.Writer
	every time.Duration
}

func (l *logProgress) Write(b []byte) (int, error) { return l.w.Write(b) }
func (l *logProgress) begin(name string)           {}
func (l *logProgress) interval() time.Duration     { return l.every }

func (l *logProgress) point(s progressStatus) {
	fmt.Fprintf(l.w, "[%s] %s (elapsed %v, %s)\n", s.exp, s.pointText(), s.elapsed.Round(100*time.Millisecond), s.etaText())
}

func (l *logProgress) update(s progressStatus) {
	fmt.Fprintf(l.w, "[%s] %s: virtual %v, %.2f M events/s, elapsed %v, %s\n", s.exp, s.pointText(), s.virtual.Round(time.Microsecond), s.rate/1e6, s.elapsed.Round(100*time.Millisecond), s.etaText())
}

func (l *logProgress) end(s progressStatus) {
	fmt.Fprintf(l.w, "[%s] %s\n", s.exp, s.doneText())
}

// barProgress draws a progress bar over the points (github.com/schollz/
// progressbar/v3) with the experiment, point, virtual time, events/s and
// ETA in its description; log lines are printed above it.
type barProgress struct {
	w    io.Writer
	cols int // terminal width, 0 if unknown: the description is cut to fit
	bar  *progressbar.ProgressBar
	name string
	n    int // the bar's length in points; -1 for a spinner
}

func (b *barProgress) interval() time.Duration { return 100 * time.Millisecond }

func (b *barProgress) Write(p []byte) (int, error) {
	if b.bar == nil {
		return b.w.Write(p)
	}
	// Printed above the bar at its next render.
	return progressbar.Bprintf(b.bar, "%s", p)
}

func (b *barProgress) begin(name string) {
	b.finish()
	b.name = name
}

// ensure makes a bar of n points (a spinner when n is 0).
func (b *barProgress) ensure(n int) {
	if n == 0 {
		n = -1
	}
	if b.bar != nil && b.n == n {
		return
	}
	b.finish()
	b.n = n
	b.bar = progressbar.NewOptions(n, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription(b.name),
		progressbar.OptionSetWidth(20), progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSpinnerType(14),
		// No ticker goroutine for the spinner: it turns when we render.
		progressbar.OptionSetSpinnerChangeInterval(0))
}

func (b *barProgress) describe(s progressStatus) string {
	d := s.exp
	if p := s.pointText(); p != "" {
		d += " " + p
	}
	d = fmt.Sprintf("%s │ virtual %v │ %.2f M ev/s │ %s", d, s.virtual.Round(time.Microsecond), s.rate/1e6, s.etaText())
	// The bar, percentage and counts take about 30 columns; a line that
	// wraps could not be redrawn in place.
	if r := []rune(d); b.cols > 0 && len(r) > b.cols-32 {
		d = string(r[:max(b.cols-33, 10)]) + "…"
	}
	return d
}

func (b *barProgress) point(s progressStatus) {
	b.ensure(s.n)
	b.bar.Describe(b.describe(s))
	if s.n > 0 {
		b.bar.Set(s.i)
	}
}

func (b *barProgress) update(s progressStatus) {
	if b.bar == nil {
		b.ensure(0)
	}
	b.bar.Describe(b.describe(s))
}

func (b *barProgress) end(s progressStatus) {
	b.finish()
	fmt.Fprintf(b.w, "%s: %s\n", s.exp, s.doneText())
}

func (b *barProgress) finish() {
	if b.bar != nil {
		b.bar.Finish() // draws the full bar and the log lines still buffered
		fmt.Fprintln(b.w)
		b.bar = nil
	}
}

// newProgressUI picks the display for mode: "auto" (a bar when w is a
// terminal, log lines otherwise), "bar", "log" or "none".
func newProgressUI(mode string, w io.Writer) (progressUI, error) {
	switch mode {
	case "auto":
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return &barProgress{w: w, cols: termCols(w)}, nil
		}
		return &logProgress{w: w, every: 10 * time.Second}, nil
	case "bar":
		return &barProgress{w: w, cols: termCols(w)}, nil
	case "log":
		return &logProgress{w: w, every: 10 * time.Second}, nil
	case "none":
		return noProgress{}, nil
	}
	return nil, fmt.Errorf("--progress: want auto, bar, log or none, got %q", mode)
}

// termCols is w's terminal width, or 0.
func termCols(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if c, _, err := term.GetSize(int(f.Fd())); err == nil {
			return c
		}
	}
	return 0
}
