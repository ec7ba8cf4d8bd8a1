package experiments

import (
	"encoding/xml"
	"io"
	"os"
	"strings"
	"testing"
)

// FuzzDecodePlots: reading plots.json and a plot's CSV never panics, and
// what it accepts writes back to files that read back the same plots (so
// `vcluster plot` redraws exactly what it read).
func FuzzDecodePlots(f *testing.F) {
	files, err := PlotDataFiles(testPlots())
	if err != nil {
		f.Fatal(err)
	}
	byName := map[string][]byte{}
	for _, fl := range files {
		byName[fl.Name] = fl.Data
	}
	f.Add(byName[PlotsFile], byName["throughput_over_time.csv"])
	f.Add(byName[PlotsFile], byName["capacity_lost.csv"])
	f.Add([]byte(`{"plots":[{"name":"p","title":"","xLabel":"","yLabel":"","series":["s"],"csv":"p.csv"}]}`), []byte("series,x,y\ns,1,\ns,2,3\n"))
	f.Add([]byte(`{"plots":[{"name":"p","title":"","xLabel":"","yLabel":"","xLabels":["a"],"series":["s"],"csv":"p.csv"}]}`), []byte("series,x,x_label,y\ns,0,a,1\n"))
	f.Fuzz(func(t *testing.T, js, csvData []byte) {
		read := func(string) ([]byte, error) { return csvData, nil }
		plots, err := DecodePlots("plots.json", js, read)
		if err != nil {
			return
		}
		again, err := PlotDataFiles(plots)
		if err != nil {
			t.Fatalf("accepted plots do not write back: %v", err)
		}
		written := map[string][]byte{}
		for _, fl := range again {
			written[fl.Name] = fl.Data
		}
		back, err := DecodePlots("plots.json", written[PlotsFile], func(name string) ([]byte, error) {
			b, ok := written[name]
			if !ok {
				return nil, os.ErrNotExist
			}
			return b, nil
		})
		if err != nil {
			t.Fatalf("written back, they do not read: %v\n%s", err, written[PlotsFile])
		}
		if len(back) != len(plots) {
			t.Fatalf("%d plots read back, %d written", len(back), len(plots))
		}
		for i := range plots {
			if err := samePlot(plots[i], back[i]); err != nil {
				t.Fatalf("plot %d: %v", i, err)
			}
		}
	})
}

// FuzzMarkdownHTML: whatever the prose, its HTML is well-formed XML (so
// report.html parses) and no tag comes from the input.
func FuzzMarkdownHTML(f *testing.F) {
	for _, s := range []string{
		"para **bold** and `code`\n\n- a\n- b\n  more\n\n1. one\n2. two\n\n```\nx < y & z\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
		"**unclosed `code **x` y", "# h\n## h2\n####### no", "<script>alert(1)</script>", "| a |\n|---|\n| 1 | 2 | 3 |", "```\nopen fence",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		h := markdownHTML(md)
		d := xml.NewDecoder(strings.NewReader("<div>" + h + "</div>"))
		d.Strict = true
		d.Entity = xml.HTMLEntity
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not well-formed: %v\n%q", err, h)
			}
			if se, ok := tok.(xml.StartElement); ok {
				switch se.Name.Local {
				case "div", "p", "pre", "code", "strong", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td", "h3", "h4", "h5", "h6":
				default:
					t.Fatalf("element <%s> from the input:\n%s", se.Name.Local, h)
				}
				if len(se.Attr) > 0 {
					t.Fatalf("<%s> has attributes from the input", se.Name.Local)
				}
			}
		}
	})
}
