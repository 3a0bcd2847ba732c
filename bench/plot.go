package bench

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// series is one line of a plot.
type series struct {
	Name     string
	X, Y     []float64
	Color    color.Color
	Dashed   bool
	Thin     bool
	NoLegend bool // hides the line from the legend (per-shard lines)
	Points   bool // marks every point (a series of one point draws no line)
	// LogY draws the plot's y axis on a log scale (any series asking for it; values must be > 0).
	LogY bool
}

// hline is a horizontal reference line.
type hline struct {
	Name  string
	Y     float64
	Color color.Color
}

// savePlot writes a PNG line chart.
func savePlot(path, title, xLabel, yLabel string, lines []series, refs []hline, width, height vg.Length) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	xmax := 0.0
	logY := false
	for _, s := range lines {
		if len(s.X) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(s.X))
		for i := range s.X {
			pts[i].X, pts[i].Y = s.X[i], s.Y[i]
			xmax = max(xmax, s.X[i])
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = s.Color
		l.Width = vg.Points(1.6)
		if s.Thin {
			l.Width = vg.Points(0.5)
		}
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		thumbs := []plot.Thumbnailer{l}
		if s.Points {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			sc.Color = s.Color
			sc.Radius = vg.Points(3)
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		logY = logY || s.LogY
		if !s.NoLegend {
			p.Legend.Add(s.Name, thumbs...)
		}
	}
	for _, r := range refs {
		pts := plotter.XYs{{X: 0, Y: r.Y}, {X: max(xmax, 1), Y: r.Y}}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = r.Color
		l.Width = vg.Points(1)
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add(r.Name, l)
	}
	p.Y.Min = 0
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = 1
	}
	p.X.Min = 0
	p.Legend.ThumbnailWidth = vg.Points(20)
	return p.Save(width, height, path)
}

var (
	colWalkeeper      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colWalkeeperLight = color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0x50}
	colBaseline       = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colBaselineLight  = color.NRGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0x50}
	colRef            = color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff}
	colRef2           = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
)
