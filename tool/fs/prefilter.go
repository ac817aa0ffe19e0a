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
	if mayMatchNewline(re) {
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

// mayMatchNewline reports whether a match of re may contain '\n'
// (conservatively: true when unsure).
func mayMatchNewline(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpAnyCharNotNL,
		syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return false
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return true
			}
		}
		return false
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return true
			}
		}
		return false
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat, syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			if mayMatchNewline(sub) {
				return true
			}
		}
		return false
	}
	return true
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
