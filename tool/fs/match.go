package fs

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// globPattern is a slash-separated glob whose segments are path.Match
// patterns, and where a segment "**" matches any number of segments (none
// included).
type globPattern struct {
	segs []string
}

func compileGlob(p string) (*globPattern, error) {
	if p == "" {
		return nil, errors.New("pattern is empty")
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." {
			continue
		}
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue // a/**/**/b is a/**/b; also keeps matching polynomial
		}
		if strings.Contains(s, "**") && s != "**" {
			// "a**b" means what "a*b" does within one segment.
			for strings.Contains(s, "**") {
				s = strings.ReplaceAll(s, "**", "*")
			}
		}
		if _, err := path.Match(s, ""); err != nil {
			return nil, fmt.Errorf("bad pattern segment %q: %v", s, err)
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		segs = []string{"."}
	}
	return &globPattern{segs: segs}, nil
}

// match reports whether the clean slash path name matches.
func (g *globPattern) match(name string) bool {
	return matchSegs(g.segs, strings.Split(name, "/"))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if matchSegs(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// mayMatchUnder reports whether something under the directory dir (a clean
// slash path, "." for the root) may match, so a walk can skip the rest.
func (g *globPattern) mayMatchUnder(dir string) bool {
	if dir == "." {
		return true
	}
	return prefixSegs(g.segs, strings.Split(dir, "/"))
}

func prefixSegs(pat, dir []string) bool {
	for len(dir) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[0], dir[0]); !ok {
			return false
		}
		pat, dir = pat[1:], dir[1:]
	}
	return len(pat) > 0
}

// literalPrefix returns the leading segments that hold no pattern syntax:
// the directory a walk can start from.
func (g *globPattern) literalPrefix() string {
	var lit []string
	for _, s := range g.segs[:len(g.segs)-1] {
		if strings.ContainsAny(s, `*?[\`) {
			break
		}
		lit = append(lit, s)
	}
	if len(lit) == 0 {
		return "."
	}
	return strings.Join(lit, "/")
}

// namesGit reports whether a segment of the pattern names .git literally,
// so that a walk does not skip .git for it.
func (g *globPattern) namesGit() bool {
	for _, s := range g.segs {
		if s == ".git" {
			return true
		}
	}
	return false
}
