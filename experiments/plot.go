package experiments

import (
	"bytes"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// RenderPlot draws p with gonum/plot and returns it as PNG and SVG.
func RenderPlot(p Plot) (png, svg []byte, err error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Y.Min = 0
	pl.Legend.Top = true
	pl.Add(plotter.NewGrid())
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	for i, s := range p.Series {
		xy := make(plotter.XYs, 0, len(s.X))
		for k := range s.X {
			if math.IsNaN(s.Y[k]) {
				continue
			}
			xy = append(xy, plotter.XY{X: s.X[k], Y: s.Y[k]})
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, nil, err
		}
		c := plotutil.Color(i)
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		pts.Shape = plotutil.Shape(i)
		pl.Add(l, pts)
		pl.Legend.Add(s.Name, l, pts)
	}
	if len(p.XLabels) > 0 {
		pl.NominalX(p.XLabels...)
		pl.X.Min, pl.X.Max = -0.3, float64(len(p.XLabels))-0.7
	}
	pl.BackgroundColor = color.White
	for _, format := range []string{"png", "svg"} {
		wt, err := pl.WriterTo(7*vg.Inch, 4.5*vg.Inch, format)
		if err != nil {
			return nil, nil, err
		}
		var b bytes.Buffer
		if _, err := wt.WriteTo(&b); err != nil {
			return nil, nil, err
		}
		if format == "png" {
			png = b.Bytes()
		} else {
			svg = b.Bytes()
		}
	}
	return png, svg, nil
}
