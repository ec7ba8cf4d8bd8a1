package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

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
// ETA in its description; log lines are printed above it. The bar moves
// within a point by the observer's estimate of the share done
// (progressStatus.share), so it never goes back and only the end fills
// it. Every line fits the terminal: describe drops and cuts the
// description's parts so the ETA always shows.
type barProgress struct {
	w    io.Writer
	cols int      // terminal width, 0 if unknown (no limit)
	tty  *os.File // the terminal cols is read from again at every point (a resize); nil: cols is fixed
	bar  *progressbar.ProgressBar
	name string
	n    int // the bar's length in points; -1 for a spinner
	pos  int // the bar's position, in 1/barSteps of a point; never goes down
}

// barSteps is the bar's resolution within one point.
const barSteps = 1000

// Columns the bar draws around its description: "%4d%% |" + the bar +
// "| " and a trailing space for a bar, the spinner and two spaces around
// the description and a trailing one for a spinner.
const (
	barFrame     = 10
	spinnerFrame = 4
)

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

// barWidth is the bar's own width: 20 columns, 10 below 100.
func (b *barProgress) barWidth() int {
	if b.cols > 0 && b.cols < 100 {
		return 10
	}
	return 20
}

// ensure makes a bar of n points (a spinner when n is 0).
func (b *barProgress) ensure(n int) {
	length := n * barSteps
	if n == 0 {
		n, length = -1, -1
	}
	if b.bar != nil && b.n == n {
		return
	}
	b.finish()
	b.n, b.pos = n, 0
	b.bar = progressbar.NewOptions(length, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription(b.name),
		progressbar.OptionSetWidth(b.barWidth()), progressbar.OptionSetPredictTime(false), progressbar.OptionSetElapsedTime(false),
		// The observer paces updates (interval); the bar draws each.
		progressbar.OptionThrottle(0), progressbar.OptionSpinnerType(14),
		// No ticker goroutine for the spinner: it turns when we render.
		progressbar.OptionSetSpinnerChangeInterval(0))
}

// describe is the bar's description of s, made to fit the terminal.
func (b *barProgress) describe(s progressStatus) string {
	budget := 0 // no limit
	if b.cols > 0 {
		frame := b.barWidth() + barFrame
		if s.n == 0 {
			frame = spinnerFrame
		}
		// One column spare: a line that reaches the last column wraps on
		// some terminals, and could not be redrawn in place.
		budget = max(b.cols-frame-1, 1)
	}
	return fitDescription(s, budget)
}

// fitDescription is "exp point i/n label │ virtual t │ r M ev/s │ ETA e",
// within budget columns (0: any): when it is too wide, the label is cut
// to no fewer than 20 columns, the virtual time goes, then the rate; then
// the label is cut further (to 8 columns) or goes; the experiment's name
// is cut last, the point count and the ETA never (unless budget cannot
// hold them alone).
func fitDescription(s progressStatus, budget int) string {
	head := s.exp
	if c := s.countText(); c != "" {
		head += " " + c
	}
	label := ""
	if s.n > 0 {
		label = s.label
	}
	virt := "virtual " + s.virtual.Round(time.Microsecond).String()
	rate := fmt.Sprintf("%.2f M ev/s", s.rate/1e6)
	eta := s.etaText()
	for _, try := range []struct {
		parts    []string
		minLabel int
	}{{[]string{virt, rate, eta}, 20}, {[]string{rate, eta}, 20}, {[]string{eta}, 8}} {
		tail := " │ " + strings.Join(try.parts, " │ ")
		if label == "" {
			if d := head + tail; budget == 0 || cols(d) <= budget {
				return d
			}
			continue
		}
		if d := head + " " + label + tail; budget == 0 || cols(d) <= budget {
			return d
		}
		if room := budget - cols(head+" "+tail); room >= min(try.minLabel, cols(label)) {
			return head + " " + cut(label, room) + tail
		}
	}
	tail := " │ " + eta
	if c := s.countText(); c != "" {
		tail = " " + c + tail
	}
	if room := budget - cols(tail); room >= 4 {
		return cut(s.exp, room) + tail
	}
	return cut(eta, budget)
}

// cols is s's width on a terminal, one column a rune (what the
// descriptions hold: ASCII, │, …, µ).
func cols(s string) int { return utf8.RuneCountInString(s) }

// cut shortens s to n columns, ending in "…" when it cut.
func cut(s string, n int) string {
	if cols(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 0)]) + "…"
}

// advance moves the bar to point s.i plus its share done, never back.
func (b *barProgress) advance(s progressStatus) {
	if s.n <= 0 {
		return
	}
	share := min(max(s.share, 0), 1-1.0/barSteps)
	b.pos = max(b.pos, s.i*barSteps+int(share*barSteps))
	b.bar.Set(b.pos)
}

func (b *barProgress) point(s progressStatus) {
	if b.tty != nil {
		if c := termCols(b.tty); c > 0 {
			b.cols = c
		}
	}
	b.ensure(s.n)
	b.bar.Describe(b.describe(s))
	b.advance(s)
}

// update redraws the description, then moves the bar (which draws again
// only when the percentage changes).
func (b *barProgress) update(s progressStatus) {
	if b.bar == nil {
		b.ensure(s.n)
	}
	b.bar.Describe(b.describe(s))
	b.advance(s)
}

func (b *barProgress) end(s progressStatus) {
	if s.interrupted && b.bar != nil {
		// Not a full bar: draw where it stopped (and the buffered log
		// lines), then leave it.
		b.bar.Describe(b.describe(s))
		b.bar.Exit()
		fmt.Fprintln(b.w)
		b.bar = nil
	}
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
			return &barProgress{w: w, cols: termCols(w), tty: f}, nil
		}
		return &logProgress{w: w, every: 10 * time.Second}, nil
	case "bar":
		b := &barProgress{w: w, cols: termCols(w)}
		if f, ok := w.(*os.File); ok && b.cols > 0 {
			b.tty = f
		}
		return b, nil
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
