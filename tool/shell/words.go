package shell

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// dyn stands for a part of a word known only when the shell runs it (a
// variable, a command substitution, ...). NUL cannot occur in a shell word,
// so it never collides with literal text.
const dyn = "\x00"

// dynNonEmpty stands for a dynamic part that cannot be empty: ${X:?msg}
// stops the shell when X is empty or unset.
const dynNonEmpty = "\x02"

// word is a shell word as the policy sees it: its text with quoting
// removed, dynamic parts replaced by dyn, $HOME and ${HOME} by "~".
type word struct {
	s    string
	node *syntax.Word // nil for words built from text (find -exec, xargs)
}

// static reports whether the word's value is known before the shell runs.
func (w word) static() bool {
	return !strings.Contains(w.s, dyn) && !strings.Contains(w.s, dynNonEmpty)
}

func words(ws []*syntax.Word) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		out[i] = word{s: wordText(w), node: w}
	}
	return out
}

// wordText returns w's value with quotes and escapes removed and every
// dynamic part replaced by dyn.
func wordText(w *syntax.Word) string {
	var b strings.Builder
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeBare(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(ansiC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				switch q := q.(type) {
				case *syntax.Lit:
					b.WriteString(unescapeDouble(q.Value))
				case *syntax.ParamExp:
					b.WriteString(paramText(q, i == 0 && b.Len() == 0))
				default:
					b.WriteString(dyn)
				}
			}
		case *syntax.ParamExp:
			b.WriteString(paramText(p, i == 0))
		case *syntax.ExtGlob:
			b.WriteString("*")
		default: // CmdSubst, ArithmExp, ProcSubst
			b.WriteString(dyn)
		}
	}
	return b.String()
}

// paramText is "~" for a plain $HOME at the start of a word (so that
// rm -rf $HOME is judged like rm -rf ~), dyn for anything else.
func paramText(p *syntax.ParamExp, first bool) string {
	if first && p.Param != nil && p.Param.Value == "HOME" && !p.Excl && !p.Length &&
		p.Index == nil && p.Slice == nil && p.Repl == nil && p.Exp == nil && p.Names == 0 {
		return "~"
	}
	if p.Exp != nil && p.Exp.Op == syntax.ErrorUnsetOrNull {
		return dynNonEmpty
	}
	return dyn
}

// unescapeBare removes backslash quoting outside quotes: \x is x, and a
// backslash-newline disappears.
func unescapeBare(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescapeDouble removes backslash quoting inside double quotes, where a
// backslash quotes only $ ` " \ and newline.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ansiC decodes the body of a $'...' string.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if c == 'x' {
				b.WriteByte(byte(n))
			} else if utf8.ValidRune(rune(n)) {
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		default: // \\ \' \" \? and unknown escapes
			if c != '\\' && c != '\'' && c != '"' && c != '?' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// braceAlternatives expands the brace alternatives of s ("/{etc,usr}" is
// "/etc" and "/usr"), giving up (returning s alone) beyond a small number.
// Sequences ({1..3}) are left as they are: they never produce a path.
func braceAlternatives(s string) []string {
	out := []string{s}
	for range 8 {
		var next []string
		changed := false
		for _, x := range out {
			alts, ok := expandFirstBrace(x)
			if !ok {
				next = append(next, x)
				continue
			}
			changed = true
			next = append(next, alts...)
		}
		if len(next) > 64 {
			return out
		}
		out = next
		if !changed {
			break
		}
	}
	return out
}

// expandFirstBrace expands the first {a,b,...} group of s.
func expandFirstBrace(s string) ([]string, bool) {
	open := strings.IndexByte(s, '{')
	if open < 0 {
		return nil, false
	}
	depth := 0
	var commas []int
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				if len(commas) == 0 {
					return nil, false
				}
				var alts []string
				start := open + 1
				for _, c := range append(commas, i) {
					alts = append(alts, s[:open]+s[start:c]+s[i+1:])
					start = c + 1
				}
				return alts, true
			}
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		}
	}
	return nil, false
}
