package experiments

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/vcluster/vcluster/config"
)

// Manifest is <out>/manifest.json: what ran, with what, and how long it
// took. It is the one output file that is not a function of config and
// seed alone (wall time, versions, paths).
type Manifest struct {
	Tool          string            `json:"tool"`
	Command       string            `json:"command,omitempty"`  // run or experiment
	ReplayOf      string            `json:"replayOf,omitempty"` // the manifest this run replayed
	Version       string            `json:"version"`
	GoVersion     string            `json:"goVersion"`
	GvisorVersion string            `json:"gvisorVersion"`
	Seed          uint64            `json:"seed"`
	ConfigFile    string            `json:"configFile,omitempty"`
	Sets          []string          `json:"sets,omitempty"`
	Status        string            `json:"status"`
	Experiment    string            `json:"experiment,omitempty"`
	TargetRows    []string          `json:"targetRows,omitempty"`
	Size          Size              `json:"size,omitempty"`
	Params        map[string]string `json:"params,omitempty"`
	WallSeconds   float64           `json:"wallSeconds,omitempty"`
	Events        uint64            `json:"events,omitempty"`
	ChecksPassed  *bool             `json:"checksPassed,omitempty"`
	Files         []string          `json:"files,omitempty"`
	// Parallel is the run's --parallel: 0 the classic single loop, N ≥ 1
	// a partitioned cluster on N goroutines (the same results for every
	// N ≥ 1, slightly different from 0's).
	Parallel int           `json:"parallel,omitempty"`
	Config   config.Config `json:"config"`
}

// WriteManifest writes m as dir/manifest.json.
func WriteManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "manifest.json"), append(b, '\n'), 0o644)
}

// CheckTable is the check table as aligned text.
func CheckTable(cs []Check) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tclaim\texpected (published)\tmeasured\tshape")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Target, c.Claim, c.Expected, c.Measured, c.Verdict())
	}
	tw.Flush()
	return b.String()
}

// WriteReport writes results.csv, results.json, the plots (PNG and SVG),
// report.md and report.html into dir and returns the file names written.
// head is a line describing the cluster.
func WriteReport(dir string, e Experiment, env *Env, r *Results, head string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	put := func(name string, b []byte) error {
		files = append(files, name)
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	// results.csv / results.json
	var cb bytes.Buffer
	cw := csv.NewWriter(&cb)
	cw.Write(r.Columns)
	cw.WriteAll(r.Rows)
	if err := put("results.csv", cb.Bytes()); err != nil {
		return nil, err
	}
	objs := make([]map[string]string, 0, len(r.Rows))
	for _, row := range r.Rows {
		o := map[string]string{}
		for i, c := range r.Columns {
			if i < len(row) {
				o[c] = row[i]
			}
		}
		objs = append(objs, o)
	}
	jb, err := json.MarshalIndent(map[string]any{"experiment": e.Name(), "targetRows": e.TargetRows(), "params": env.Params, "rows": objs, "checks": r.Checks}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := put("results.json", append(jb, '\n')); err != nil {
		return nil, err
	}
	// plots
	pngs := map[string][]byte{}
	for _, p := range r.Plots {
		png, svg, err := RenderPlot(p)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", p.Name, err)
		}
		pngs[p.Name] = png
		if err := put(p.Name+".png", png); err != nil {
			return nil, err
		}
		if err := put(p.Name+".svg", svg); err != nil {
			return nil, err
		}
	}
	for _, f := range r.Files {
		if err := put(f.Name, f.Data); err != nil {
			return nil, err
		}
	}
	// report.md
	var md bytes.Buffer
	fmt.Fprintf(&md, "# %s — %s\n\n%s\n\nReproduces: %s (docs TARGETS.md). Size: %s. Parameters: %s.\n\n",
		e.Name(), e.Title(), head, strings.Join(e.TargetRows(), ", "), env.Size, paramString(e, env.Params))
	for _, s := range r.Before {
		fmt.Fprintf(&md, "## %s\n\n%s\n\n", s.Title, s.Body)
	}
	fmt.Fprintf(&md, "## Setup\n\n%s\n\n## Results\n\n```\n%s```\n\n", e.Describe(), r.Table)
	if r.Notes != "" {
		fmt.Fprintf(&md, "%s\n\n", r.Notes)
	}
	for _, p := range r.Plots {
		fmt.Fprintf(&md, "![%s](%s.png)\n\n", p.Title, p.Name)
	}
	fmt.Fprintf(&md, "## Check\n\nThe shape of each published claim, measured here (numbers are not tuned toward the target):\n\n| row | claim | expected (published) | measured | shape |\n|---|---|---|---|---|\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&md, "| %s | %s | %s | %s | %s |\n", c.Target, c.Claim, c.Expected, c.Measured, c.Verdict())
	}
	fmt.Fprintf(&md, "\nFiles: results.csv, results.json, report.html, manifest.json")
	for _, p := range r.Plots {
		fmt.Fprintf(&md, ", %s.png, %s.svg", p.Name, p.Name)
	}
	for _, f := range r.Files {
		fmt.Fprintf(&md, ", %s", f.Name)
	}
	md.WriteString(".\n")
	if err := put("report.md", md.Bytes()); err != nil {
		return nil, err
	}
	// report.html: well-formed XHTML, images as data URIs.
	var h bytes.Buffer
	esc := html.EscapeString
	fmt.Fprintf(&h, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head><meta charset=\"utf-8\"/><title>%s</title>\n", esc(e.Name()))
	h.WriteString("<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}pre{background:#f4f4f4;padding:1em;overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #999;padding:.2em .5em}.pass{color:#070}.differs{color:#a00}</style>\n</head>\n<body>\n")
	fmt.Fprintf(&h, "<h1>%s — %s</h1>\n<p>%s</p>\n<p>Reproduces: %s. Size: %s. Parameters: %s.</p>\n", esc(e.Name()), esc(e.Title()), esc(head), esc(strings.Join(e.TargetRows(), ", ")), esc(string(env.Size)), esc(paramString(e, env.Params)))
	for _, s := range r.Before {
		fmt.Fprintf(&h, "<h2>%s</h2>\n<pre>%s</pre>\n", esc(s.Title), esc(s.Body))
	}
	fmt.Fprintf(&h, "<h2>Setup</h2>\n<pre>%s</pre>\n<h2>Results</h2>\n<pre>%s</pre>\n", esc(e.Describe()), esc(r.Table))
	if r.Notes != "" {
		fmt.Fprintf(&h, "<p>%s</p>\n", esc(r.Notes))
	}
	for _, p := range r.Plots {
		fmt.Fprintf(&h, "<figure><img alt=\"%s\" src=\"data:image/png;base64,%s\"/><figcaption>%s</figcaption></figure>\n", esc(p.Title), base64.StdEncoding.EncodeToString(pngs[p.Name]), esc(p.Title))
	}
	h.WriteString("<h2>Check</h2>\n<table>\n<tr><th>row</th><th>claim</th><th>expected (published)</th><th>measured</th><th>shape</th></tr>\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&h, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"%s\">%s</td></tr>\n", esc(c.Target), esc(c.Claim), esc(c.Expected), esc(c.Measured), c.Verdict(), c.Verdict())
	}
	h.WriteString("</table>\n</body>\n</html>\n")
	if err := put("report.html", h.Bytes()); err != nil {
		return nil, err
	}
	return files, nil
}

func paramString(e Experiment, p map[string]string) string {
	var s []string
	for _, q := range e.Params() {
		s = append(s, q.Key+"="+p[q.Key])
	}
	return strings.Join(s, ", ")
}

// LintReportHTML checks what report.html promises: it is well-formed XHTML
// (strict XML with HTML entities) rooted at an XHTML <html>, every image
// is a PNG embedded as a data URI that decodes, and nothing refers outside
// the file (no scripts, links, frames, objects, event handlers, URLs in
// attributes or in CSS). It returns the number of images and table rows and
// every problem found.
func LintReportHTML(b []byte) (imgs, rows int, problems []string) {
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	var stack []string
	root := true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			bad("does not parse: %v", err)
			return imgs, rows, problems
		}
		switch t := tok.(type) {
		case xml.StartElement:
			el := t.Name.Local
			if root {
				if el != "html" || t.Name.Space != "http://www.w3.org/1999/xhtml" {
					bad("root element is <%s> in %q, want XHTML <html>", el, t.Name.Space)
				}
				root = false
			}
			stack = append(stack, el)
			switch el {
			case "img":
				imgs++
			case "tr":
				rows++
			case "script", "link", "iframe", "frame", "object", "embed", "base", "form", "audio", "video", "source", "track", "applet":
				bad("has a <%s>", el)
			}
			for _, a := range t.Attr {
				n := strings.ToLower(a.Name.Local)
				v := strings.TrimSpace(a.Value)
				if n == "xmlns" || a.Name.Space == "xmlns" {
					continue // a namespace name, not a reference
				}
				switch {
				case strings.HasPrefix(n, "on"):
					bad("<%s %s>: event handler", el, n)
				case n == "http-equiv":
					bad("<%s http-equiv=%q>", el, v)
				case el == "img" && n == "src":
					if err := embeddedPNG(v); err != nil {
						bad("<img src=%.40q>: %v", v, err)
					}
				case n == "src" || n == "href" || n == "srcset" || n == "poster" || n == "data" || n == "action" || n == "background" || n == "formaction" || n == "cite":
					bad("<%s %s=%.40q>: refers to something", el, n, v)
				case strings.Contains(v, "://") || strings.HasPrefix(v, "//"):
					bad("<%s %s=%.40q>: a URL", el, n, v)
				case n == "style" && strings.Contains(strings.ToLower(v), "url("):
					bad("<%s style>: url() in CSS", el)
				}
			}
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "style" {
				css := strings.ToLower(string(t))
				if strings.Contains(css, "url(") || strings.Contains(css, "@import") {
					bad("<style> loads something (url() or @import)")
				}
			}
		}
	}
	if root {
		bad("no root element")
	}
	return imgs, rows, problems
}

// embeddedPNG checks that src is a data URI holding a decodable PNG.
func embeddedPNG(src string) error {
	data, ok := strings.CutPrefix(src, "data:image/png;base64,")
	if !ok {
		return fmt.Errorf("not an embedded PNG (data:image/png;base64,...)")
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("base64: %v", err)
	}
	c, err := png.DecodeConfig(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("PNG: %v", err)
	}
	if c.Width == 0 || c.Height == 0 {
		return fmt.Errorf("PNG is %d×%d", c.Width, c.Height)
	}
	return nil
}
