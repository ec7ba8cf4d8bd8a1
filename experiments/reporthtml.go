package experiments

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// report.html and index.html are XHTML (they parse as strict XML and as
// HTML) and self-contained: styles and one small sort script inline, the
// plots as inline SVG, nothing loaded from anywhere. LintReportHTML and
// LintIndexHTML hold them to that.

const pageStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",Arial,sans-serif;max-width:76em;margin:2em auto;padding:0 1.2em;color:#1f2328;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.3em}
h2{font-size:1.25em;border-bottom:1px solid #d8dee4;padding-bottom:.2em;margin-top:1.8em}
h3,h4,h5,h6{font-size:1.05em}
.meta{color:#57606a;margin:.2em 0}
pre{background:#f6f8fa;border:1px solid #e5e8eb;border-radius:4px;padding:.7em 1em;overflow-x:auto;font-size:.85em;line-height:1.3}
code{background:#eff1f3;border-radius:3px;padding:0 .25em;font-size:.9em}
pre code{background:none;padding:0}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
div.wide{overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa;white-space:nowrap}
tbody tr:nth-child(even){background:#f9fafb}
td:first-child{white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.sortable th{cursor:pointer;user-select:none}
table.sortable th:hover{background:#eaeef2}
table.sortable th[data-sort=asc]::after{content:" \25B2"}
table.sortable th[data-sort=desc]::after{content:" \25BC"}
.pass{color:#1a7f37;font-weight:600}
.untestable{color:#9a6700;font-weight:600}
.differs,.failed,.interrupted{color:#cf222e;font-weight:600}
figure{margin:1.2em 0}
figure svg{width:100%;max-width:58em;height:auto;border:1px solid #eaeef2}
figure svg text{font-family:"Liberation Sans",Arimo,Arial,"Helvetica Neue",Helvetica,"Nimbus Sans",FreeSans,sans-serif !important}
figcaption{color:#57606a;font-size:.9em}
details{margin:.6em 0}
summary{cursor:pointer;color:#57606a}
`

// sortScript sorts a table.sortable by the column whose header is
// clicked (again: the other way), numbers by value, the rest as text.
const sortScript = `//<![CDATA[
(function(){
  function key(cell){
    var s=cell.textContent.trim();
    var m=s.match(/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?/i);
    return m ? [0, parseFloat(m[0]), s] : [1, 0, s.toLowerCase()];
  }
  function cmp(a,b){
    if(a[0]!==b[0]) return a[0]-b[0];
    if(a[0]===0 && a[1]!==b[1]) return a[1]-b[1];
    return a[2]<b[2] ? -1 : (a[2]>b[2] ? 1 : 0);
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function(t){
    var heads=t.querySelectorAll("thead th");
    Array.prototype.forEach.call(heads, function(th,i){
      th.title="sort by this column";
      th.addEventListener("click", function(){
        var asc=th.getAttribute("data-sort")!=="asc";
        Array.prototype.forEach.call(heads, function(h){h.removeAttribute("data-sort");});
        th.setAttribute("data-sort", asc ? "asc" : "desc");
        var body=t.tBodies[0];
        var rows=Array.prototype.slice.call(body.rows).map(function(r,k){return [key(r.cells[i]||r), k, r];});
        rows.sort(function(a,b){var c=cmp(a[0],b[0]); return (asc ? c : -c) || a[1]-b[1];});
        rows.forEach(function(r){body.appendChild(r[2]);});
      });
    });
  });
})();
//]]>`

// writePageStart writes the XHTML prolog, head and <body>.
func writePageStart(b *bytes.Buffer, title string) {
	fmt.Fprintf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head><meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(title), pageStyle)
}

// writePageEnd writes the sort script and closes the page.
func writePageEnd(b *bytes.Buffer) {
	fmt.Fprintf(b, "<script>\n%s\n</script>\n</body>\n</html>\n", sortScript)
}

// esc escapes s for XHTML text or an attribute value.
func esc(s string) string { return html.EscapeString(xmlChars(s)) }

// xmlChars replaces what XML 1.0 does not allow in a document (control
// characters but tab and newlines, U+FFFE, U+FFFF, invalid UTF-8) with
// U+FFFD, so that no text can make a page ill-formed.
func xmlChars(s string) string {
	ok := func(r rune) bool {
		return r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r != 0xfffe && r != 0xffff && r != utf8.RuneError)
	}
	clean := true
	for _, r := range s {
		if !ok(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if !ok(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// numberCell matches a cell that starts with a number ("12.5", "-3",
// "1.2e6", "40%"): a column of those is right-aligned.
var numberCell = regexp.MustCompile(`^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\b`)

// writeTable writes a sortable table with id: a header row and rows;
// cell(r, c) is a row's cell as HTML (nil: escaped text); class(r, c) adds
// a class to a cell.
func writeTable(b *bytes.Buffer, id string, head []string, rows [][]string, cell func(r, c int) string, class func(r, c int) string) {
	numeric := make([]bool, len(head))
	for c := range head {
		numeric[c] = len(rows) > 0
		for _, row := range rows {
			if c < len(row) && row[c] != "" && !numberCell.MatchString(row[c]) {
				numeric[c] = false
			}
		}
	}
	fmt.Fprintf(b, "<div class=\"wide\"><table id=\"%s\" class=\"sortable\">\n<thead><tr>", esc(id))
	for _, h := range head {
		fmt.Fprintf(b, "<th>%s</th>", esc(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for r, row := range rows {
		b.WriteString("<tr>")
		for c := range head {
			v := ""
			if c < len(row) {
				v = row[c]
			}
			h := esc(v)
			if cell != nil {
				if s := cell(r, c); s != "" {
					h = s
				}
			}
			var cls []string
			if numeric[c] {
				cls = append(cls, "num")
			}
			if class != nil {
				if s := class(r, c); s != "" {
					cls = append(cls, s)
				}
			}
			if len(cls) > 0 {
				fmt.Fprintf(b, "<td class=\"%s\">%s</td>", strings.Join(cls, " "), h)
			} else {
				fmt.Fprintf(b, "<td>%s</td>", h)
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>\n")
}

// checkHead are the check table's columns (checkRow's cells); the
// verdict is the last.
var checkHead = []string{"row", "claim", "published", "band", "why this band", "median", "spread over seeds", "detail (first seed)", "verdict"}

// verdictCol is the verdict's column in checkHead.
var verdictCol = len(checkHead) - 1

// checkRow is c's cells under checkHead.
func checkRow(c Check) []string {
	if !c.Testable() {
		return []string{c.Target, c.Claim, c.Expected, "", "", "", "", c.Measured, c.Verdict()}
	}
	why, seeds := "", ""
	if c.Band != nil {
		why = c.Band.Why
	}
	if len(c.Values) > 0 {
		seeds = fmt.Sprintf("%s (%s)", c.spread(), c.perSeed())
	}
	return []string{c.Target, c.Claim, c.Expected, c.Band.String(), why, c.Band.Format(c.Median), seeds, c.Measured, c.Verdict()}
}

func checkRows(cs []Check) [][]string {
	rows := make([][]string, 0, len(cs))
	for _, c := range cs {
		rows = append(rows, checkRow(c))
	}
	return rows
}

// inlineSVG is a rendered SVG without its XML prolog and comments, to sit
// inside the page.
func inlineSVG(svg []byte) []byte {
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	return bytes.TrimSpace(svg)
}

// reportHTML is report.html: the report.md sections with the results and
// checks as sortable tables, prose rendered from its markdown, and each
// plot as inline SVG (svgs by plot name).
func reportHTML(e *Experiment, env *Env, r *Results, head string, svgs map[string][]byte) []byte {
	var h bytes.Buffer
	writePageStart(&h, e.Name+" — "+e.Title)
	fmt.Fprintf(&h, "<h1>%s — %s</h1>\n<p class=\"meta\">%s</p>\n<p class=\"meta\">Reproduces %s (docs TARGETS.md). Size: %s. Parameters: %s.</p>\n",
		esc(e.Name), esc(e.Title), esc(head), esc(strings.Join(e.Targets, ", ")), esc(string(env.Size)), paramHTML(e, env.Params))
	for _, s := range r.Before {
		fmt.Fprintf(&h, "<h2>%s</h2>\n%s", esc(s.Title), markdownHTML(s.Body))
	}
	fmt.Fprintf(&h, "<h2>Setup</h2>\n%s<h2>Results</h2>\n", markdownHTML(e.Setup))
	writeTable(&h, "results", r.Columns, r.Rows, nil, nil)
	if r.Table != "" {
		fmt.Fprintf(&h, "<details><summary>the same as text, with the experiment's own layout</summary>\n<pre>%s</pre>\n</details>\n", esc(r.Table))
	}
	if r.Notes != "" {
		h.WriteString(markdownHTML(r.Notes))
	}
	if len(r.Plots) > 0 {
		h.WriteString("<h2>Plots</h2>\n")
	}
	for _, p := range r.Plots {
		fmt.Fprintf(&h, "<figure id=\"plot-%s\">\n", esc(p.Name))
		h.Write(inlineSVG(svgs[p.Name]))
		fmt.Fprintf(&h, "\n<figcaption>%s — data: <code>%s.csv</code>, picture: <code>%s.png</code>, <code>%s.svg</code></figcaption>\n</figure>\n",
			esc(p.Title), esc(p.Name), esc(p.Name), esc(p.Name))
	}
	h.WriteString("<h2>Check</h2>\n<p>" + esc(checkIntro) + "</p>\n")
	writeTable(&h, "checks", checkHead, checkRows(r.Checks), nil, func(row, c int) string {
		if c == verdictCol {
			return r.Checks[row].verdictClass()
		}
		return ""
	})
	files := []string{"results.csv", "results.json", "report.md", "manifest.json"}
	for _, p := range r.Plots {
		files = append(files, p.Name+".png", p.Name+".svg", p.Name+".csv")
	}
	files = append(files, PlotsFile)
	for _, f := range r.Files {
		files = append(files, f.Name)
	}
	files = append(files, env.Beside...)
	h.WriteString("<p class=\"meta\">Files:")
	for i, f := range files {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(&h, "%s <code>%s</code>", sep, esc(f))
	}
	h.WriteString(". <code>vcluster plot DIR</code> redraws the plots from the CSV files and plots.json.</p>\n")
	writePageEnd(&h)
	return h.Bytes()
}

// ReplaceReportSVGs puts svgs (rendered SVG by plot name) in place of
// the inline SVGs of the same plots in report.html b, so that a redrawn
// plot shows in the report too. It returns the page and how many plots
// it replaced; plots the page does not have are left out.
func ReplaceReportSVGs(b []byte, svgs map[string][]byte) ([]byte, int) {
	n := 0
	for name, svg := range svgs {
		start := []byte("<figure id=\"plot-" + esc(name) + "\">\n")
		i := bytes.Index(b, start)
		if i < 0 {
			continue
		}
		i += len(start)
		j := bytes.Index(b[i:], []byte("\n<figcaption>"))
		if j < 0 {
			continue
		}
		out := append([]byte(nil), b[:i]...)
		out = append(out, inlineSVG(svg)...)
		b = append(out, b[i+j:]...)
		n++
	}
	return b, n
}

func paramHTML(e *Experiment, p map[string]string) string {
	var s []string
	for _, q := range e.Params {
		s = append(s, "<code>"+esc(q.Key+"="+p[q.Key])+"</code>")
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// HTMLLint is what LintReportHTML and LintIndexHTML found in a page.
type HTMLLint struct {
	SVGs   int            // inline <svg> figures
	Tables map[string]int // rows (the header row included) of each table, by id ("" for tables without one)
	Links  []string       // <a href> targets, in order (index pages only)
	// Problems lists what breaks the page's promises; empty for a good page.
	Problems []string
}

// LintReportHTML checks what report.html promises: it is well-formed XHTML
// (strict XML with HTML entities) rooted at an XHTML <html>; the plots are
// inline SVG (no <img>); each table has one header row of <th> and rows of
// as many cells; no markdown fence (```) is left in the text; and nothing
// refers outside the file: no links, frames, objects, event handlers, URLs
// in attributes or CSS, and only inline scripts that load nothing.
func LintReportHTML(b []byte) HTMLLint { return lintHTML(b, false) }

// LintIndexHTML is LintReportHTML for index.html, which may also link
// (<a href>) to files below its directory by relative paths.
func LintIndexHTML(b []byte) HTMLLint { return lintHTML(b, true) }

// scriptLoads are what an inline script must not contain: ways to load or
// send something.
var scriptLoads = []string{"://", "fetch", "xmlhttprequest", "import", "websocket", "eval", "src", "href", "location", "cookie", "sendbeacon", "worker"}

func lintHTML(b []byte, links bool) HTMLLint {
	res := HTMLLint{Tables: map[string]int{}}
	bad := func(format string, a ...any) { res.Problems = append(res.Problems, fmt.Sprintf(format, a...)) }
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	type table struct {
		id         string
		rows, cols int // rows so far, cells of the header row
		cells      int // of the current row
		heads      int // <th> of the current row
	}
	var (
		stack  []string
		tables []*table
	)
	root := true
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			bad("does not parse: %v", err)
			return res
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
			var tb *table
			if len(tables) > 0 {
				tb = tables[len(tables)-1]
			}
			switch el {
			case "svg":
				if t.Name.Space != "http://www.w3.org/2000/svg" {
					bad("<svg> outside the SVG namespace (%q)", t.Name.Space)
				}
				res.SVGs++
			case "img":
				bad("has an <img>: plots are inline SVG")
			case "script":
				if len(t.Attr) > 0 {
					bad("<script> with attributes: only inline scripts")
				}
			case "table":
				if tb != nil {
					bad("a table inside a table")
				}
				id := ""
				for _, a := range t.Attr {
					if a.Name.Local == "id" {
						id = a.Value
					}
				}
				if _, dup := res.Tables[id]; dup && id != "" {
					bad("two tables with id %q", id)
				}
				res.Tables[id] += 0
				tables = append(tables, &table{id: id})
			case "tr":
				if tb == nil {
					bad("<tr> outside a table")
				} else {
					tb.cells, tb.heads = 0, 0
				}
			case "td", "th":
				if tb != nil {
					tb.cells++
					if el == "th" {
						tb.heads++
					}
				}
			case "link", "iframe", "frame", "object", "embed", "base", "form", "audio", "video", "source", "track", "applet", "image", "use", "foreignObject":
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
				case links && el == "a" && n == "href":
					if err := relativeLink(v); err != nil {
						bad("<a href=%.60q>: %v", v, err)
					}
					res.Links = append(res.Links, v)
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
			if len(tables) == 0 {
				break
			}
			tb := tables[len(tables)-1]
			switch t.Name.Local {
			case "tr":
				tb.rows++
				res.Tables[tb.id]++
				switch {
				case tb.rows == 1 && (tb.heads != tb.cells || tb.cells == 0):
					bad("table %q: the first row is not a header row of <th>", tb.id)
				case tb.rows == 1:
					tb.cols = tb.cells
				case tb.heads > 0:
					bad("table %q row %d: a <th> below the header", tb.id, tb.rows)
				case tb.cells != tb.cols:
					bad("table %q row %d: %d cells under %d headers", tb.id, tb.rows, tb.cells, tb.cols)
				}
			case "table":
				if tb.rows == 0 {
					bad("table %q has no rows", tb.id)
				}
				tables = tables[:len(tables)-1]
			}
		case xml.CharData:
			if len(stack) == 0 {
				break
			}
			txt := string(t)
			switch stack[len(stack)-1] {
			case "style":
				css := strings.ToLower(txt)
				if strings.Contains(css, "url(") || strings.Contains(css, "@import") {
					bad("<style> loads something (url() or @import)")
				}
			case "script":
				js := strings.ToLower(txt)
				for _, w := range scriptLoads {
					if strings.Contains(js, w) {
						bad("<script> has %q: an inline script may not load anything", w)
					}
				}
			default:
				if strings.Contains(txt, "```") {
					bad("a markdown fence (```) in the text of <%s>", stack[len(stack)-1])
				}
			}
		}
	}
	if root {
		bad("no root element")
	}
	return res
}

// relativeLink accepts a link to a file below the page's directory.
func relativeLink(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("empty")
	case strings.Contains(v, ":") || strings.HasPrefix(v, "/") || strings.HasPrefix(v, "\\"):
		return fmt.Errorf("not a relative path")
	}
	for _, part := range strings.Split(v, "/") {
		if part == ".." || part == "" {
			return fmt.Errorf("leaves or skips a directory (%q)", part)
		}
	}
	return nil
}

// formatWall is a wall time in seconds, to a tenth.
func formatWall(s float64) string { return strconv.FormatFloat(s, 'f', 1, 64) + " s" }
