package fs

import (
	"errors"
	iofs "io/fs"
	"path"
	"strings"
)

// maxLinks bounds symbolic links followed while resolving a path (Linux
// allows 40).
const maxLinks = 40

// resolve returns rel with every symbolic link in its existing components
// replaced by what it points to, as a clean slash path relative to the
// root. Components past the first missing one are taken as they are. It
// returns an error when the path leaves the root. It is how writes land on
// a link's target instead of replacing the link, and how approval sees
// through links; os.Root still checks every operation.
func (ts *Toolset) resolve(rel string) (string, error) {
	todo := strings.Split(rel, "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", pathErr(rel, errEscape)
			}
			done = done[:len(done)-1]
			continue
		}
		cand := path.Join(append(done, c)...)
		fi, err := ts.root.Lstat(cand)
		if errors.Is(err, iofs.ErrNotExist) {
			done = append(done, c)
			out := path.Clean(path.Join(append(done, todo...)...))
			if out == ".." || strings.HasPrefix(out, "../") {
				return "", pathErr(rel, errEscape)
			}
			return out, nil
		}
		if err != nil {
			return "", pathErr(rel, err)
		}
		if fi.Mode()&iofs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		links++
		if links > maxLinks {
			return "", pathErr(rel, errLoop)
		}
		target, err := ts.root.Readlink(cand)
		if err != nil {
			return "", pathErr(rel, err)
		}
		if target == "" || path.IsAbs(target) || strings.HasPrefix(target, `\`) || (len(target) > 1 && target[1] == ':') {
			return "", pathErr(rel, errEscape)
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

var (
	errEscape = errors.New("path escapes from parent")
	errLoop   = errors.New("too many levels of symbolic links")
)

// protected reports whether writing rel needs approval: when rel, or the
// path its links resolve to, matches a protected pattern. A path that
// cannot be resolved is protected: the write will fail, and nothing is
// lost by asking.
func (ts *Toolset) protected(p string) bool {
	if ts.opts.WritesNeedApproval {
		return true
	}
	rel, err := ts.rel(p, false)
	if err != nil {
		return false // refused before anything is touched
	}
	if ts.isProtected(rel) {
		return true
	}
	real, err := ts.resolve(rel)
	if err != nil {
		return true
	}
	return ts.isProtected(real)
}

func (ts *Toolset) isProtected(rel string) bool {
	low := strings.ToLower(rel)
	for _, g := range ts.protectedGlobs {
		if g.match(low) {
			return true
		}
	}
	return false
}
