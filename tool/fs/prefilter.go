package fs

import (
	"bytes"
	"regexp/syntax"
)

// prefilter speeds up grep for the common regexps: when every match must
// contain a literal and no match can span lines, a file is scanned for the
// literal with bytes.Index (fast) and the regexp runs only on the lines that
// hold it. Go's regexp is otherwise slow on large inputs without a literal
// prefix, as under (?m)^.
type prefilter struct {
	literal []byte
}

// newPrefilter returns the prefilter for pattern (as compiled, flags
// included), or nil when none applies.
func newPrefilter(pattern string) *prefilter {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	re = re.Simplify()
	if !lineLocal(re) {
		return nil
	}
	lit := requiredLiteral(re)
	if len(lit) < 2 {
		return nil
	}
	return &prefilter{literal: []byte(lit)}
}

// requiredLiteral returns a case-sensitive literal every match of re
// contains, the longest it finds, or "".
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return ""
		}
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

// lineLocal reports whether re matches a line cut out of a file exactly
// where it matches that line inside the file: no match may contain '\n', and
// no assertion may look past the line's ends. Text anchors (\A, \z, and ^ or
// $ without the m flag) hold at a line's ends only when the line is the
// file's first or last, so they rule the prefilter out. It is conservative:
// false when unsure.
func lineLocal(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpAnyCharNotNL,
		syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		// Word boundaries see the same thing at a line's end as at the
		// '\n' after it: a non-word character.
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return false
			}
		}
		return true
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return false
			}
		}
		return true
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat, syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if !lineLocal(sub) {
				return false
			}
		}
		return true
	}
	return false
}

// nextCandidate returns the bounds of the first line of data at or after
// from that holds the literal, or -1.
func (p *prefilter) nextCandidate(data []byte, from int) (start, end int) {
	i := bytes.Index(data[from:], p.literal)
	if i < 0 {
		return -1, -1
	}
	i += from
	start = bytes.LastIndexByte(data[:i], '\n') + 1
	end = len(data)
	if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
		end = i + j
	}
	return start, end
}
