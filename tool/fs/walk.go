package fs

import (
	"context"
	"errors"
	iofs "io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// readDir returns the entries of the directory rel sorted by name. It opens
// the directory with O_DIRECTORY and O_NONBLOCK, so a FIFO swapped in for it
// fails at once instead of blocking.
func (ts *Toolset) readDir(rel string) ([]os.DirEntry, error) {
	f, err := ts.root.OpenFile(rel, os.O_RDONLY|directoryOf|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if ts.openedHidden(f) {
		return nil, errHiddenOpened
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, nil
}

// errStopWalk ends a walk early without an error.
var errStopWalk = errors.New("stop walk")

// walker visits a tree under the root in lexical order, without following
// symbolic links and skipping .git unless asked for.
type walker struct {
	ts       *Toolset
	ctx      context.Context
	keepGit  bool
	visited  int
	limitHit bool
	hidden   int // entries passed by as hidden (credential stores)
	// descend, when set, says whether to enter a directory.
	descend func(rel string) bool
	// visit is called for every entry but the start; rel is the entry's
	// clean slash path relative to the root.
	visit func(rel string, d os.DirEntry) error
}

// walk walks the tree under start (a directory). It returns ctx's error
// when cancelled, nil when the visit limit stopped it (limitHit is then
// set) or visit returned errStopWalk.
func (w *walker) walk(start string) error {
	err := w.dir(start)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

func (w *walker) dir(rel string) error {
	entries, err := w.ts.readDir(rel)
	if err != nil {
		if rel == "." || w.visited == 0 {
			return err
		}
		return nil // a directory that vanished or is unreadable is skipped
	}
	for _, d := range entries {
		w.visited++
		if w.visited > w.ts.opts.MaxVisit {
			w.limitHit = true
			return errStopWalk
		}
		if w.visited%256 == 0 {
			if err := w.ctx.Err(); err != nil {
				return err
			}
		}
		name := d.Name()
		child := name
		if rel != "." {
			child = rel + "/" + name
		}
		if d.IsDir() && name == ".git" && !w.keepGit {
			continue
		}
		if w.ts.isHidden(child) {
			w.hidden++
			continue
		}
		if err := w.visit(child, d); err != nil {
			return err
		}
		if d.Type()&iofs.ModeType == iofs.ModeDir && (w.descend == nil || w.descend(child)) {
			if err := w.dir(child); err != nil {
				return err
			}
		}
	}
	return nil
}

// display returns a name as a tool shows it: quoted when it holds control
// characters or invalid UTF-8, so a hostile file name cannot forge lines of
// output.
func display(name string) string {
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return strconv.Quote(name)
		}
	}
	return name
}
