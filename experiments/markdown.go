package experiments

import (
	"bytes"
	"strings"
)

// markdownHTML renders the markdown subset the reports' prose uses as
// XHTML: paragraphs, fenced code blocks (<pre>), "- "/"* " and "1. "
// lists, pipe tables, "#" headings (from <h3> down), and inline `code`
// and **bold**. Everything else is text, escaped: whatever the input, the
// output is well-formed (a fuzz test holds it to that).
func markdownHTML(md string) string {
	var b bytes.Buffer
	lines := strings.Split(strings.ReplaceAll(xmlChars(md), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			i++
		case strings.HasPrefix(trim, "```"):
			i++
			b.WriteString("<pre>")
			for ; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				b.WriteString(esc(lines[i]))
				b.WriteByte('\n')
			}
			i++ // the closing fence (or the end)
			b.WriteString("</pre>\n")
		case headingLevel(trim) > 0:
			n := headingLevel(trim)
			tag := "h" + string(rune('0'+min(n+2, 6)))
			b.WriteString("<" + tag + ">" + inlineHTML(strings.TrimSpace(trim[n:])) + "</" + tag + ">\n")
			i++
		case isTableStart(lines, i):
			i = writeMDTable(&b, lines, i)
		case listItem(trim) != "":
			tag := listItem(trim)
			b.WriteString("<" + tag + ">\n")
			for i < len(lines) && listItem(strings.TrimSpace(lines[i])) == tag {
				item := listText(strings.TrimSpace(lines[i]))
				i++
				// Continuation lines: indented, not a new item.
				for i < len(lines) && strings.TrimSpace(lines[i]) != "" && listItem(strings.TrimSpace(lines[i])) == "" &&
					(strings.HasPrefix(lines[i], " ") || strings.HasPrefix(lines[i], "\t")) {
					item += " " + strings.TrimSpace(lines[i])
					i++
				}
				b.WriteString("<li>" + inlineHTML(item) + "</li>\n")
			}
			b.WriteString("</" + tag + ">\n")
		default:
			var para []string
			for i < len(lines) {
				t := strings.TrimSpace(lines[i])
				if t == "" || strings.HasPrefix(t, "```") || headingLevel(t) > 0 || listItem(t) != "" || isTableStart(lines, i) {
					break
				}
				para = append(para, t)
				i++
			}
			b.WriteString("<p>" + inlineHTML(strings.Join(para, " ")) + "</p>\n")
		}
	}
	return b.String()
}

func headingLevel(t string) int {
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(t) || t[n] != ' ' {
		return 0
	}
	return n
}

// listItem is "ul" or "ol" for a list item line, "" otherwise.
func listItem(t string) string {
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") {
		return "ul"
	}
	d := 0
	for d < len(t) && t[d] >= '0' && t[d] <= '9' {
		d++
	}
	if d > 0 && d < 10 && strings.HasPrefix(t[d:], ". ") {
		return "ol"
	}
	return ""
}

func listText(t string) string {
	if listItem(t) == "ul" {
		return strings.TrimSpace(t[2:])
	}
	_, rest, _ := strings.Cut(t, ". ")
	return strings.TrimSpace(rest)
}

// isTableStart: a pipe row followed by a |---|---| separator.
func isTableStart(lines []string, i int) bool {
	if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i]), "|") {
		return false
	}
	sep := strings.TrimSpace(lines[i+1])
	return strings.HasPrefix(sep, "|") && strings.Trim(sep, "|-: ") == "" && strings.Contains(sep, "-")
}

func tableCells(t string) []string {
	t = strings.TrimSpace(t)
	t = strings.TrimPrefix(t, "|")
	t = strings.TrimSuffix(t, "|")
	cells := strings.Split(t, "|")
	for k := range cells {
		cells[k] = strings.TrimSpace(cells[k])
	}
	return cells
}

func writeMDTable(b *bytes.Buffer, lines []string, i int) int {
	head := tableCells(lines[i])
	b.WriteString("<table>\n<thead><tr>")
	for _, c := range head {
		b.WriteString("<th>" + inlineHTML(c) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for i += 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		cells := tableCells(lines[i])
		b.WriteString("<tr>")
		for k := range head {
			c := ""
			if k < len(cells) {
				c = cells[k]
			}
			b.WriteString("<td>" + inlineHTML(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	return i
}

// inlineHTML escapes s and renders `code` and **bold** spans; a marker
// without its closing one is text.
func inlineHTML(s string) string {
	var b strings.Builder
	bold := false
	for len(s) > 0 {
		k := strings.IndexAny(s, "`*")
		if k < 0 {
			b.WriteString(esc(s))
			break
		}
		b.WriteString(esc(s[:k]))
		s = s[k:]
		switch {
		case s[0] == '`':
			if end := strings.IndexByte(s[1:], '`'); end >= 0 {
				b.WriteString("<code>" + esc(s[1:1+end]) + "</code>")
				s = s[2+end:]
				continue
			}
			b.WriteString("`")
			s = s[1:]
		case strings.HasPrefix(s, "**") && (bold || strings.Contains(s[2:], "**")):
			if bold {
				b.WriteString("</strong>")
			} else {
				b.WriteString("<strong>")
			}
			bold = !bold
			s = s[2:]
		default:
			b.WriteByte('*')
			s = s[1:]
		}
	}
	if bold {
		b.WriteString("</strong>")
	}
	return b.String()
}
