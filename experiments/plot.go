package experiments

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The figure: 7 × 4.5 in, the PNG at 144 dpi (1008 × 648 pixels).
const (
	figWidth  = 7 * vg.Inch
	figHeight = 4.5 * vg.Inch
	figDPI    = 144
	figPad    = vg.Length(8)
)

// PlotFormats are the formats RenderPlotAs draws.
var PlotFormats = []string{"png", "svg"}

// palette is Tableau 10: distinct, colour-blind tolerable, and readable on
// white. Series keep their colour by their index in the plot.
var palette = []color.RGBA{
	{0x4e, 0x79, 0xa7, 0xff}, {0xf2, 0x8e, 0x2b, 0xff}, {0xe1, 0x57, 0x59, 0xff}, {0x76, 0xb7, 0xb2, 0xff},
	{0x59, 0xa1, 0x4f, 0xff}, {0xed, 0xc9, 0x48, 0xff}, {0xb0, 0x7a, 0xa1, 0xff}, {0xff, 0x9d, 0xa7, 0xff},
	{0x9c, 0x75, 0x5f, 0xff}, {0xba, 0xb0, 0xac, 0xff},
}

// glyphsUpTo is the most points a series draws with a glyph at each: a
// denser series (a time series) is a plain line.
const glyphsUpTo = 40

func sans(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: sans(size), Handler: plot.DefaultTextHandler}
}

// RenderPlot draws p with gonum/plot and returns it as PNG and SVG.
func RenderPlot(p Plot) (png, svg []byte, err error) {
	if png, err = RenderPlotAs(p, "png"); err != nil {
		return nil, nil, err
	}
	if svg, err = RenderPlotAs(p, "svg"); err != nil {
		return nil, nil, err
	}
	return png, svg, nil
}

// RenderPlotAs draws p in format (png or svg). The same plot gives the
// same bytes. The figure: the title on top (wrapped to fit), the legend
// to the right of the data or, when its names are long, below it, marks
// as dashed vertical lines labelled above the data area, y from 0, and
// linear axes ticked at round numbers (1, 2 or 5 × 10^k).
func RenderPlotAs(p Plot, format string) ([]byte, error) {
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(figWidth, figHeight), vgimg.UseDPI(figDPI))}
	case "svg":
		c = vgsvg.New(figWidth, figHeight)
	default:
		return nil, fmt.Errorf("plot format %q: want png or svg", format)
	}
	if err := drawPlot(draw.New(c), p); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	if format == "svg" {
		return fixSVGTextLengths(b.Bytes()), nil
	}
	return b.Bytes(), nil
}

// svgTextEl is a <text> element as vgsvg writes it: attributes, the
// style with the font size, the escaped text.
var svgTextEl = regexp.MustCompile(`<text ([^>]*?)style="([^"]*font-size:([0-9.]+)px[^"]*)">([^<]*)</text>`)

// fixSVGTextLengths gives every <text> of a rendered SVG the length it has
// in Liberation Sans, the font it was laid out with (textLength). The SVG
// names the font, but the viewer draws it with whatever it has (DejaVu
// Sans is some 15% wider): without the length a centred title overflows
// the figure and legend names run off its edge.
func fixSVGTextLengths(svg []byte) []byte {
	return svgTextEl.ReplaceAllFunc(svg, func(el []byte) []byte {
		m := svgTextEl.FindSubmatch(el)
		size, err := strconv.ParseFloat(string(m[3]), 64)
		txt := html.UnescapeString(string(m[4]))
		if err != nil || strings.TrimSpace(txt) == "" {
			return el
		}
		w := textStyle(vg.Length(size)).Width(txt).Points()
		return []byte(fmt.Sprintf(`<text %stextLength="%.5g" lengthAdjust="spacingAndGlyphs" style="%s">%s</text>`, m[1], w, m[2], m[4]))
	})
}

// legendEntry is one drawn series of the legend.
type legendEntry struct {
	name  string
	thumb []plot.Thumbnailer
}

func drawPlot(dc draw.Canvas, p Plot) error {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	body := draw.Crop(dc, figPad, -figPad, figPad, -figPad)

	// Title, wrapped to the figure's width.
	ts := textStyle(12)
	ts.XAlign, ts.YAlign = draw.XCenter, draw.YTop
	lineH := ts.Height("Ag") * 1.15
	top := body.Max.Y
	for _, line := range wrapText(p.Title, ts, body.Max.X-body.Min.X) {
		body.FillText(ts, vg.Point{X: (body.Min.X + body.Max.X) / 2, Y: top}, line)
		top -= lineH
	}
	if p.Title != "" {
		body.Max.Y = top - 4
	}

	pl := plot.New()
	pl.BackgroundColor = nil // the figure's white
	for _, ax := range []*plot.Axis{&pl.X, &pl.Y} {
		ax.Label.TextStyle.Font = sans(11)
		ax.Tick.Label.Font = sans(9.5)
		ax.Padding = 0
	}
	// Long axis labels wrap (the plain text handler draws "\n" as a new
	// line).
	pl.X.Label.Text = strings.Join(wrapText(p.XLabel, pl.X.Label.TextStyle, (body.Max.X-body.Min.X)*0.7), "\n")
	pl.Y.Label.Text = strings.Join(wrapText(p.YLabel, pl.Y.Label.TextStyle, (body.Max.Y-body.Min.Y)*0.8), "\n")
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe4}
	grid.Horizontal.Color = color.Gray{Y: 0xe4}
	pl.Add(grid)

	// The series; a series without a value to draw is left out, legend
	// included.
	var entries []legendEntry
	xr, yr := newSpan(), newSpan()
	for i, s := range p.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plot %s: series %q has %d x and %d y values", p.Name, s.Name, len(s.X), len(s.Y))
		}
		xy := make(plotter.XYs, 0, len(s.X))
		for k := range s.X {
			if math.IsNaN(s.Y[k]) || math.IsNaN(s.X[k]) || (p.LogX && s.X[k] <= 0) {
				continue
			}
			xy = append(xy, plotter.XY{X: s.X[k], Y: s.Y[k]})
			xr.add(s.X[k])
			yr.add(s.Y[k])
		}
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("plot %s: series %q: %w", p.Name, s.Name, err)
		}
		c := palette[i%len(palette)]
		l.Color, l.Width = c, vg.Points(1.6)
		e := legendEntry{name: s.Name, thumb: []plot.Thumbnailer{l}}
		pl.Add(l)
		if len(xy) <= glyphsUpTo {
			pts.Color, pts.Shape, pts.Radius = c, plotutil.Shape(i), vg.Points(2.6)
			pl.Add(pts)
			e.thumb = append(e.thumb, pts)
		}
		entries = append(entries, e)
	}
	for _, m := range p.Marks {
		if !p.LogX || m.X > 0 {
			xr.add(m.X)
		}
	}

	// Axes: y from 0 (or below, for negative data) to a round number; x
	// over the data and the marks, on round ticks.
	// A dip below 0 by less than 2% of the top is noise (a loss of
	// −0.01%): y still starts at 0.
	lo, hi := math.Min(0, yr.min), yr.max
	if lo < 0 && -lo < 0.02*hi {
		lo = 0
	}
	if !yr.ok() {
		lo, hi = 0, 1
	}
	// 3% headroom: a series at its maximum (line rate, 100%) does not run
	// along the frame.
	if hi > 0 {
		hi *= 1.03
	}
	var ystep float64
	pl.Y.Min, pl.Y.Max, ystep = niceRange(lo, hi, 1)
	pl.Y.Tick.Marker = roundTicks{step: ystep}
	switch {
	case len(p.XLabels) > 0:
		pl.NominalX(p.XLabels...)
		pl.X.LineStyle.Width = vg.Points(0.5) // NominalX hides the axis line
		pl.X.Min, pl.X.Max = -0.5, float64(len(p.XLabels))-0.5
	case p.LogX:
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = logTicks{}
		if xr.ok() {
			pl.X.Min, pl.X.Max = xr.min, xr.max
		}
	default:
		lo, hi := 0.0, 1.0
		if xr.ok() {
			lo, hi = xr.min, xr.max
		}
		var xstep float64
		pl.X.Min, pl.X.Max, xstep = niceRange(lo, hi, 2)
		pl.X.Tick.Marker = roundTicks{step: xstep}
	}

	// The legend: right of the data when it takes at most 30% of the
	// width, else below it in rows.
	leg := legendLayout(entries, body)
	plotC := body
	switch {
	case len(entries) == 0:
	case leg.right:
		plotC.Max.X -= leg.w + 10
	default:
		plotC.Min.Y += leg.h + 6
	}

	// Categorical labels that would collide are slanted.
	if len(p.XLabels) > 0 {
		var w vg.Length
		for _, l := range p.XLabels {
			w += pl.X.Tick.Label.Width(l) + 8
		}
		if w > (plotC.Max.X-plotC.Min.X)*0.85 {
			pl.X.Tick.Label.Rotation = math.Pi / 7
			pl.X.Tick.Label.XAlign, pl.X.Tick.Label.YAlign = draw.XRight, draw.YTop
		}
	}

	// Marks, with a strip above the data for their labels.
	var marks *markLines
	if len(p.Marks) > 0 {
		marks = newMarkLines(p.Marks, pl, plotC.Max.X-plotC.Min.X-60)
		plotC.Max.Y -= marks.stripHeight()
		pl.Add(marks)
	}
	pl.Draw(plotC)
	if len(entries) > 0 {
		dataTop := plotC.Max.Y
		leg.draw(body, plotC, dataTop)
	}
	return nil
}

// span is the range of finite values seen.
type span struct{ min, max float64 }

func newSpan() span { return span{math.Inf(1), math.Inf(-1)} }

func (s *span) add(v float64) {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return
	}
	s.min, s.max = math.Min(s.min, v), math.Max(s.max, v)
}

func (s span) ok() bool { return s.min <= s.max }

// niceStep is the 1, 2 or 5 × 10^k step that cuts span into at most
// seven.
func niceStep(span float64) float64 {
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / 7
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// niceRange widens [lo, hi] to multiples of its tick step / div (div 1:
// whole steps, so both ends are labelled; 2: half steps, which keeps the
// axis close to the data) and returns the step.
func niceRange(lo, hi, div float64) (float64, float64, float64) {
	if !(hi > lo) {
		if lo == 0 {
			return 0, 1, niceStep(1)
		}
		lo, hi = lo-math.Abs(lo)/2, hi+math.Abs(hi)/2
	}
	step := niceStep(hi - lo)
	u := step / div
	return math.Floor(lo/u+1e-9) * u, math.Ceil(hi/u-1e-9) * u, step
}

// roundTicks marks a linear axis at multiples of step (niceStep of the
// range when 0), labelled without exponents (M, G, T for millions and
// up), with a minor tick between. The step is the one the range was
// widened to (niceRange): the widened range's own might be coarser and
// leave the ends unlabelled.
type roundTicks struct{ step float64 }

func (rt roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: formatTick(lo, 1, 1, "")}}
	}
	step := rt.step
	if !(step > 0) || (hi-lo)/step > 20 {
		step = niceStep(hi - lo)
	}
	scale, suffix := tickUnit(lo, hi)
	var ticks []plot.Tick
	minor := step / 2
	for i := math.Ceil(lo/minor - 1e-9); i*minor <= hi+minor*1e-9; i++ {
		v := i * minor
		t := plot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			t.Label = formatTick(v, step, scale, suffix)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// tickUnit is the unit tick labels of [lo, hi] are written in: 1, or
// millions (M) and up for large numbers.
func tickUnit(lo, hi float64) (scale float64, suffix string) {
	switch m := math.Max(math.Abs(lo), math.Abs(hi)); {
	case m >= 1e12:
		return 1e12, "T"
	case m >= 1e9:
		return 1e9, "G"
	case m >= 1e6:
		return 1e6, "M"
	}
	return 1, ""
}

// logTicks are gonum's log ticks (powers of ten, minor ticks between)
// with the powers labelled 1, 10, 100, 1k, …, 1M instead of 1e+06.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = formatPower(ts[i].Value)
		}
	}
	return ts
}

// formatPower is a power of ten with an SI prefix: 0.01, 1, 10k, 100M.
func formatPower(v float64) string {
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.scale {
			return strconv.FormatFloat(v/u.scale, 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// formatTick prints v (a multiple of step) in units of scale with as many
// decimals as step needs.
func formatTick(v, step, scale float64, suffix string) string {
	dec := 0
	if s := step / scale; s < 1 {
		dec = int(math.Ceil(-math.Log10(s) - 1e-9))
	}
	t := strconv.FormatFloat(v/scale, 'f', dec, 64)
	if t == "-0" || strings.Trim(t, "-0.") == "" {
		return "0"
	}
	return t + suffix
}

// wrapText cuts s into lines no wider than w at spaces.
func wrapText(s string, st text.Style, w vg.Length) []string {
	if s == "" {
		return nil
	}
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		next := word
		if cur != "" {
			next = cur + " " + word
		}
		if cur != "" && st.Width(next) > w {
			lines = append(lines, cur)
			next = word
		}
		cur = next
	}
	return append(lines, cur)
}

// legend is the legend's layout: one column right of the plot, or rows
// below it.
type legend struct {
	entries []legendEntry
	st      text.Style
	right   bool
	w, h    vg.Length // of the whole legend
	rowH    vg.Length
	widths  []vg.Length // of each entry, thumbnail included
}

const (
	legThumb = vg.Length(22)
	legGap   = vg.Length(5)
)

func legendLayout(entries []legendEntry, body draw.Canvas) *legend {
	l := &legend{entries: entries, st: textStyle(9.5)}
	l.st.YAlign = draw.YCenter
	l.rowH = l.st.Height("Ag") * 1.5
	var widest vg.Length
	for _, e := range entries {
		w := legThumb + legGap + l.st.Width(e.name)
		l.widths = append(l.widths, w)
		widest = max(widest, w)
	}
	bw := body.Max.X - body.Min.X
	l.right = widest <= bw*0.3 && l.rowH*vg.Length(len(entries)) <= (body.Max.Y-body.Min.Y)*0.8
	if l.right {
		l.w, l.h = widest, l.rowH*vg.Length(len(entries))
		return l
	}
	rows, x := 1, vg.Length(0)
	for _, w := range l.widths {
		if x > 0 && x+w > bw {
			rows, x = rows+1, 0
		}
		x += w + 14
	}
	l.w, l.h = bw, l.rowH*vg.Length(rows)
	return l
}

// draw puts the legend right of plotC level with the data's top, or
// below plotC, in body.
func (l *legend) draw(body, plotC draw.Canvas, dataTop vg.Length) {
	entry := func(i int, x, y vg.Length) {
		th := draw.Canvas{Canvas: body.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y - l.rowH/2 + 2}, Max: vg.Point{X: x + legThumb, Y: y + l.rowH/2 - 2}}}
		for _, t := range l.entries[i].thumb {
			t.Thumbnail(&th)
		}
		body.FillText(l.st, vg.Point{X: x + legThumb + legGap, Y: y}, l.entries[i].name)
	}
	if l.right {
		x := body.Max.X - l.w
		for i := range l.entries {
			entry(i, x, dataTop-l.rowH*(vg.Length(i)+0.5))
		}
		return
	}
	x, y := body.Min.X, body.Min.Y+l.h-l.rowH/2
	for i, w := range l.widths {
		if x > body.Min.X && x+w > body.Max.X {
			x, y = body.Min.X, y-l.rowH
		}
		entry(i, x, y)
		x += w + 14
	}
}

// markLines draws a plot's marks: dashed vertical lines across the data
// area, each labelled in a strip above it. Labels go in up to three rows
// so that neighbours do not overlap; a label with no room left in any
// row is not drawn (its line still is).
type markLines struct {
	marks []Mark
	st    text.Style
	rows  int
	rowH  vg.Length
	line  draw.LineStyle
}

const maxMarkRows = 3

func newMarkLines(ms []Mark, pl *plot.Plot, estWidth vg.Length) *markLines {
	m := &markLines{marks: append([]Mark(nil), ms...), st: textStyle(8.5)}
	sort.SliceStable(m.marks, func(i, j int) bool { return m.marks[i].X < m.marks[j].X })
	m.st.Color = color.Gray{Y: 0x30}
	m.st.YAlign = draw.YBottom
	m.rowH = m.st.Height("Ag") * 1.25
	m.line = draw.LineStyle{Color: color.Gray{Y: 0x50}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	// Rows from an estimate of the data area's width: the y axis is not
	// laid out yet. The estimate is narrower than the real area, so the
	// labels need at most the rows it reserves.
	m.rows = 1
	place := m.layout(func(x float64) vg.Length {
		return vg.Length(pl.X.Norm(x)) * estWidth
	}, estWidth)
	for _, r := range place {
		m.rows = max(m.rows, r.row+1)
	}
	m.rows = min(m.rows, maxMarkRows)
	return m
}

func (m *markLines) stripHeight() vg.Length { return m.rowH*vg.Length(m.rows) + 3 }

type markPlace struct {
	x, left vg.Length // line, label's left edge
	row     int       // -1: no room
}

// layout places the labels: right of their line, or left of it at the
// right edge, in the lowest row where they do not touch a neighbour.
func (m *markLines) layout(tr func(float64) vg.Length, width vg.Length) []markPlace {
	ends := make([]vg.Length, maxMarkRows)
	for i := range ends {
		ends[i] = vg.Length(math.Inf(-1))
	}
	out := make([]markPlace, len(m.marks))
	for i, mk := range m.marks {
		x := tr(mk.X)
		w := m.st.Width(mk.Label)
		left := x + 2
		if left+w > width {
			left = x - 2 - w
		}
		out[i] = markPlace{x: x, left: left, row: -1}
		for r := range ends {
			if left > ends[r]+4 {
				out[i].row, ends[r] = r, left+w
				break
			}
		}
	}
	return out
}

// Plot implements plot.Plotter: the lines first, then the labels on a
// white ground, so that a line reaching a higher row passes behind the
// labels below it.
func (m *markLines) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, _ := plt.Transforms(&c)
	place := m.layout(func(x float64) vg.Length { return trX(x) - c.Min.X }, c.Max.X-c.Min.X)
	labelled := func(i int) bool { return place[i].row >= 0 && place[i].row < m.rows }
	inside := func(i int) bool {
		x := c.Min.X + place[i].x
		return x >= c.Min.X-0.5 && x <= c.Max.X+0.5
	}
	for i := range m.marks {
		if !inside(i) {
			continue
		}
		x, top := c.Min.X+place[i].x, c.Max.Y
		if labelled(i) {
			top = c.Max.Y + 2 + m.rowH*vg.Length(place[i].row) + m.rowH/2
		}
		c.StrokeLine2(m.line, x, c.Min.Y, x, top)
	}
	for i, mk := range m.marks {
		if !inside(i) || !labelled(i) {
			continue
		}
		at := vg.Point{X: c.Min.X + place[i].left, Y: c.Max.Y + 2 + m.rowH*vg.Length(place[i].row)}
		w := m.st.Width(mk.Label)
		// The canvas's own Fill: FillPolygon would clip to the data area.
		c.SetColor(color.White)
		c.Fill(vg.Rectangle{Min: vg.Point{X: at.X - 1, Y: at.Y}, Max: vg.Point{X: at.X + w + 1, Y: at.Y + m.rowH - 1}}.Path())
		c.FillText(m.st, at, mk.Label)
	}
}
