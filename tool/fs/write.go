package fs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type writeArgs struct {
	Path    string `json:"path" jsonschema:"the file to write, relative to the workspace root; missing parent directories are created"`
	Content string `json:"content" jsonschema:"the whole new content of the file"`
}

func (ts *Toolset) writeFile() tool.Tool {
	return tool.Func("write_file",
		"Write a file of the workspace, replacing it if it exists and creating it and its parent directories if not. "+
			"The write is atomic: the file holds either its old or its new content, never a mix. "+
			"To change part of an existing file, prefer edit_file.",
		func(ctx context.Context, in writeArgs) (string, error) {
			ts.started()
			return ts.write(ctx, in)
		}, &tool.FuncOptions[writeArgs]{
			Effect:        llm.EffectIdempotent,
			NeedsApproval: ts.opts.WritesNeedApproval,
			ApprovalFor:   func(in writeArgs) bool { return ts.protected(in.Path) },
			MaxResult:     ts.opts.MaxResult,
		})
}

func (ts *Toolset) write(ctx context.Context, in writeArgs) (string, error) {
	rel, err := ts.rel(in.Path, false)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", errors.New("path names the workspace root; give the path of a file")
	}
	if err := ts.refuseHidden(in.Path, rel); err != nil {
		return "", err
	}
	target, err := ts.resolve(rel)
	if err != nil {
		return "", err
	}
	created, err := ts.writeAtomic(ctx, rel, target, []byte(in.Content), true)
	if err != nil {
		return "", err
	}
	verb := "Wrote"
	if created {
		verb = "Created"
	}
	lines := strings.Count(in.Content, "\n")
	if in.Content != "" && !strings.HasSuffix(in.Content, "\n") {
		lines++
	}
	where := rel
	if target != rel {
		where = fmt.Sprintf("%s (the file %s links to)", target, rel)
	}
	return fmt.Sprintf("%s %s: %d bytes, %d lines.", verb, where, len(in.Content), lines), nil
}

// writeAtomic replaces the file target (a resolved path) with data: a
// temporary file in the same directory, written, synced and renamed over
// it, so a reader or a crash sees the old content or the new, never a mix.
// A new file gets mode 0644, an existing one keeps its mode. makeDirs
// creates missing parent directories. rel is the path as the model gave it,
// for messages. created reports that there was no file before.
func (ts *Toolset) writeAtomic(ctx context.Context, rel, target string, data []byte, makeDirs bool) (created bool, err error) {
	if err := checkDeviceNames(target); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("not written: %w", context.Cause(ctx))
	}
	dir, base := path.Split(target)
	dir = path.Clean(dir)
	if makeDirs && dir != "." {
		if err := ts.root.MkdirAll(dir, 0o755); err != nil {
			return false, pathErr(dir, err)
		}
	}
	perm := iofs.FileMode(0o644)
	fi, err := ts.root.Lstat(target)
	switch {
	case err == nil:
		if err := notRegular(rel, fi.Mode()); err != nil {
			return false, err
		}
		perm = fi.Mode().Perm()
	case errors.Is(err, iofs.ErrNotExist):
		created = true
	default:
		return false, pathErr(rel, err)
	}

	tmp := path.Join(dir, tempName(base))
	f, err := ts.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return false, pathErr(rel, err)
	}
	committed := false
	defer func() {
		if !committed {
			ts.root.Remove(tmp)
		}
	}()
	if ts.openedHidden(f) {
		f.Close()
		return false, errHiddenOpened
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // the umask may have narrowed it
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("writing %q: %v; the file is unchanged", rel, err)
	}
	if err := ts.root.Rename(tmp, target); err != nil {
		return false, fmt.Errorf("%v; the file is unchanged", pathErr(rel, err))
	}
	committed = true
	// Make the rename durable; a failure here loses nothing already
	// visible, so it is not reported.
	if d, err := ts.root.OpenFile(dir, os.O_RDONLY|directoryOf|nonblock, 0); err == nil {
		d.Sync()
		d.Close()
	}
	return created, nil
}

// tempName returns a fresh hidden name next to base, short enough for any
// file system.
func tempName(base string) string {
	if len(base) > 100 {
		base = base[:100]
	}
	return "." + base + ".loom-" + rand.Text()[:12] + ".tmp"
}
