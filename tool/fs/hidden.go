package fs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/loomkit/loom/internal/sensitive"
)

// hiddenPaths returns the hidden paths of list that lie inside the
// workspace dir (absolute, links resolved), as lower-case slash paths
// relative to it, and whether dir itself is inside one. Each path counts
// as given and with its links resolved (also when only its parent exists:
// a ~/.ssh made later is hidden too).
func hiddenPaths(dir string, list []string) (inside []string, all bool) {
	d := strings.ToLower(filepath.Clean(dir))
	seen := map[string]bool{}
	for _, p := range list {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		cands := []string{filepath.Clean(p)}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			cands = append(cands, real)
		} else if parent, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			cands = append(cands, filepath.Join(parent, filepath.Base(p)))
		}
		for _, c := range cands {
			c = strings.ToLower(c)
			switch {
			case c == d || strings.HasPrefix(d, strings.TrimSuffix(c, string(filepath.Separator))+string(filepath.Separator)):
				all = true
			case strings.HasPrefix(c, d+string(filepath.Separator)):
				rel := filepath.ToSlash(c[len(d)+1:])
				if !seen[rel] {
					seen[rel] = true
					inside = append(inside, rel)
				}
			}
		}
	}
	return inside, all
}

// defaultHidden is the list Options.Hidden defaults to.
func defaultHidden() []string {
	home, _ := os.UserHomeDir()
	return sensitive.Credentials(home)
}

// isHidden reports whether rel, a clean slash path relative to the root,
// is a hidden path or inside one. Names are compared without regard to
// case, as some file systems do.
func (ts *Toolset) isHidden(rel string) bool {
	if ts.allHidden {
		return true
	}
	if len(ts.hidden) == 0 {
		return false
	}
	low := strings.ToLower(rel)
	for _, h := range ts.hidden {
		if low == h || strings.HasPrefix(low, h+"/") {
			return true
		}
	}
	return false
}

// refuseHidden refuses rel (shown as p) when it, or what its links
// resolve to, is hidden.
func (ts *Toolset) refuseHidden(p, rel string) error {
	if ts.allHidden {
		return hiddenError(p)
	}
	if len(ts.hidden) == 0 {
		return nil
	}
	if ts.isHidden(rel) {
		return hiddenError(p)
	}
	if real, err := ts.resolve(rel); err == nil && ts.isHidden(real) {
		return hiddenError(p)
	}
	return nil
}

func hiddenError(p string) error {
	return fmt.Errorf("%q holds credentials, or is inside a directory that does: the file tools do not read, list, search or change credential stores (~/.ssh, ~/.aws, .netrc, ...), and commands cannot reach them either", p)
}

// errHiddenOpened is what an open returns when the kernel says the file
// opened is hidden although its path did not look it (a link swapped in
// meanwhile).
var errHiddenOpened = fmt.Errorf("the file opened is a credential store or inside one (a symbolic link changed while it was opened): the file tools do not read credential stores")

// openedRel returns the path of the open file f relative to the root,
// as the kernel tells it, and false when it cannot tell (a system
// without /proc/self/fd) or f is not under the workspace.
func (ts *Toolset) openedRel(f *os.File) (string, bool) {
	p, ok := fdPath(f)
	if !ok {
		return "", false
	}
	p = strings.TrimSuffix(p, " (deleted)")
	return ts.insideAbs(p)
}

// openedHidden reports whether f, just opened, is hidden by what the
// kernel says was opened. It costs a system call only when some hidden
// path lies inside the workspace.
func (ts *Toolset) openedHidden(f *os.File) bool {
	if len(ts.hidden) == 0 && !ts.allHidden {
		return false
	}
	rel, ok := ts.openedRel(f)
	return ok && ts.isHidden(rel)
}

// isEnvName reports whether a file name is an environment file's: .env,
// .env.local, .envrc, ... (the files cat .env asks about in bash, and
// whose writes are protected).
func isEnvName(name string) bool {
	return strings.HasPrefix(strings.ToLower(name), ".env")
}

// envRead reports whether reading p reads an environment file: by its
// name or by what its links resolve to. A path whose links cannot be
// resolved (out of the workspace, a loop) cannot be read at all: it needs
// no approval, and the read fails.
func (ts *Toolset) envRead(p string) bool {
	rel, err := ts.rel(p, false)
	if err != nil {
		return false // refused before anything is read
	}
	if isEnvName(path.Base(rel)) {
		return true
	}
	real, err := ts.resolve(rel)
	return err == nil && isEnvName(path.Base(real))
}

// envSearch reports whether a grep call may search environment files:
// when its path is one, or its include pattern names them (its last
// element starts with .env). Otherwise grep passes them by, so that the
// answer and the search agree.
func (ts *Toolset) envSearch(in grepArgs) bool {
	if in.Path != "" && ts.envRead(in.Path) {
		return true
	}
	inc := strings.TrimRight(in.Include, "/")
	return isEnvName(path.Base(inc)) && inc != ""
}
