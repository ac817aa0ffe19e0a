package web

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// HTMLText turns an HTML document into readable text: headings as
// "# Title", list items as "- item", links as "[text](url)" resolved
// against base (nil: left as written), paragraphs and blocks on their own
// lines, preformatted text kept as it is; scripts, styles, templates, SVG
// and the document head (except its title) dropped, and whitespace
// collapsed. The text is valid UTF-8 and ends in a newline. It never
// fails: broken HTML gives what could be read.
func HTMLText(doc []byte, base *url.URL) string {
	z := html.NewTokenizer(bytes.NewReader(doc))
	w := &textWriter{}
	skip := 0       // depth inside elements whose text is dropped
	inHead := false // text in <head> is dropped, except the title
	inTitle := false
	pre := 0
	var links []string // the open links' targets
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			w.flushLine()
			return strings.ToValidUTF8(strings.TrimSpace(w.b.String()), "\uFFFD") + "\n"
		case html.TextToken:
			if skip > 0 || inHead && !inTitle {
				continue
			}
			text := string(z.Text())
			if pre > 0 {
				w.raw(text)
			} else {
				w.words(text)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			var href, alt string // the only attributes used
			for hasAttr && (a == atom.A || a == atom.Img) {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "href":
					href = string(v)
				case "alt":
					alt = string(v)
				}
			}
			switch a {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Iframe, atom.Object, atom.Canvas:
				if tt == html.StartTagToken {
					skip++
				}
				continue
			case atom.Head:
				inHead = true
				continue
			case atom.Body:
				inHead = false
			case atom.Title:
				if tt == html.StartTagToken && skip == 0 {
					inTitle = true
					w.block()
					w.raw("# ")
				}
				continue
			}
			if skip > 0 || inHead {
				continue
			}
			switch a {
			case atom.Br:
				w.newline()
			case atom.Hr:
				w.block()
				w.raw("---")
				w.block()
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				w.block()
				w.raw(strings.Repeat("#", int(name[1]-'0')) + " ")
			case atom.Li:
				w.newline()
				w.raw("- ")
			case atom.Pre:
				w.block()
				pre++
			case atom.Img:
				if alt := strings.TrimSpace(alt); alt != "" {
					w.words(" [image: " + alt + "] ")
				}
			case atom.A:
				href := resolve(base, href)
				links = append(links, href)
				if href != "" {
					w.token("[")
				}
			case atom.Td, atom.Th:
				w.words(" | ")
			case atom.Tr:
				w.newline()
			default:
				if isBlock(a) {
					w.block()
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			switch a {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg, atom.Iframe, atom.Object, atom.Canvas:
				if skip > 0 {
					skip--
				}
				continue
			case atom.Head:
				inHead = false
				continue
			case atom.Title:
				if inTitle {
					inTitle = false
					w.block()
				}
				continue
			}
			if skip > 0 || inHead {
				continue
			}
			switch a {
			case atom.Pre:
				if pre > 0 {
					pre--
				}
				w.block()
			case atom.A:
				if n := len(links); n > 0 {
					href := links[n-1]
					links = links[:n-1]
					switch {
					case href == "":
					case endsWith(w.line, '['):
						w.line = w.line[:len(w.line)-1] // no text: no link
					default:
						w.line = append(w.line, "]("+href+")"...)
					}
				}
			case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				w.block()
			case atom.Tr:
				w.words(" |")
				w.newline()
			default:
				if isBlock(a) {
					w.block()
				}
			}
		}
	}
}

// resolve returns href as an absolute http(s) URL, or "" for links that
// lead nowhere a reader could follow (javascript:, fragments, mailto:).
func resolve(base *url.URL, href string) string {
	href = strings.TrimSpace(href)
	if href == "" || strings.HasPrefix(href, "#") {
		return ""
	}
	u, err := url.Parse(href)
	if err != nil {
		return ""
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https" {
		return ""
	}
	return u.String()
}

func isBlock(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Section, atom.Article, atom.Header, atom.Footer, atom.Nav, atom.Aside,
		atom.Main, atom.Blockquote, atom.Ul, atom.Ol, atom.Dl, atom.Dt, atom.Dd, atom.Table,
		atom.Thead, atom.Tbody, atom.Tfoot, atom.Caption, atom.Figure, atom.Figcaption, atom.Form,
		atom.Fieldset, atom.Address, atom.Details, atom.Summary, atom.Body, atom.Html:
		return true
	}
	return false
}

// textWriter builds the text line by line, collapsing whitespace and
// blank lines.
type textWriter struct {
	b      strings.Builder
	line   []byte
	blanks int // blank lines at the end of b
	space  bool
}

func (w *textWriter) words(s string) {
	if s == "" {
		return
	}
	if startsWithSpace(s) {
		w.space = true
	}
	for i, f := range strings.Fields(s) {
		if i > 0 {
			w.space = true
		}
		w.token(f)
	}
	if endsWithSpace(s) {
		w.space = true
	}
}

// token writes f, after a space when one is due.
func (w *textWriter) token(f string) {
	if w.space && len(w.line) > 0 && !endsWith(w.line, ' ') && !endsWith(w.line, '[') {
		w.line = append(w.line, ' ')
	}
	w.line = append(w.line, f...)
	w.space = false
}

func startsWithSpace(s string) bool { return s != "" && strings.IndexAny(s[:1], " \t\r\n\f") == 0 }
func endsWithSpace(s string) bool {
	return s != "" && strings.IndexAny(s[len(s)-1:], " \t\r\n\f") == 0
}
func endsWith(b []byte, c byte) bool { return len(b) > 0 && b[len(b)-1] == c }

// raw writes s as it is (preformatted text), line by line.
func (w *textWriter) raw(s string) {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			w.line = append(w.line, s...)
			return
		}
		w.line = append(w.line, s[:i]...)
		w.flushLine()
		w.b.WriteByte('\n')
		w.blanks = 0
		s = s[i+1:]
	}
}

func (w *textWriter) flushLine() {
	line := strings.TrimRight(string(w.line), " \t")
	w.line = w.line[:0]
	w.space = false
	if strings.TrimSpace(line) == "" {
		return
	}
	w.b.WriteString(line)
	w.blanks = -1 // inside a line
}

// newline ends the current line.
func (w *textWriter) newline() {
	if len(w.line) == 0 {
		return
	}
	w.flushLine()
	w.b.WriteByte('\n')
	w.blanks = 0
}

// block ends the current line and leaves one blank line.
func (w *textWriter) block() {
	w.newline()
	if w.b.Len() > 0 && w.blanks == 0 {
		w.b.WriteByte('\n')
		w.blanks = 1
	}
}
