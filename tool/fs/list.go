package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"path"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type listArgs struct {
	Path string `json:"path,omitempty" jsonschema:"the directory to list, relative to the workspace root; default the root"`
}

func (ts *Toolset) listDir() tool.Tool {
	return tool.Func("list_dir",
		"List a directory of the workspace: one entry per line, directories ending in /, symbolic links shown with their target, file sizes in bytes.",
		func(ctx context.Context, in listArgs) (string, error) {
			ts.started()
			return ts.list(ctx, in)
		}, &tool.FuncOptions[listArgs]{Effect: llm.EffectReadOnly, MaxResult: ts.opts.MaxResult})
}

func (ts *Toolset) list(ctx context.Context, in listArgs) (string, error) {
	rel, err := ts.rel(in.Path, true)
	if err != nil {
		return "", err
	}
	if err := ts.refuseHidden(in.Path, rel); err != nil {
		return "", err
	}
	fi, err := ts.root.Stat(rel)
	if err != nil {
		return "", pathErr(rel, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is %s, not a directory; use read_file to read a file", rel, describe(fi.Mode()))
	}
	entries, err := ts.readDir(rel)
	if err != nil {
		return "", pathErr(rel, err)
	}
	if len(entries) == 0 {
		return fmt.Sprintf("%s is an empty directory.", rel), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d entries):\n", rel, len(entries))
	for i, e := range entries {
		if i == ts.opts.MaxEntries {
			fmt.Fprintf(&b, "[... %d more entries not shown; use glob to narrow down]\n", len(entries)-i)
			break
		}
		if i%256 == 0 && ctx.Err() != nil {
			return "", fmt.Errorf("list_dir stopped: %w", context.Cause(ctx))
		}
		name := display(e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			b.WriteString(name + "/\n")
		case t&iofs.ModeSymlink != 0:
			target, err := ts.root.Readlink(path.Join(rel, e.Name()))
			if err != nil {
				target = "?"
			}
			target = display(target)
			fmt.Fprintf(&b, "%s -> %s\n", name, target)
		case t.IsRegular():
			size := "?"
			if info, err := e.Info(); err == nil {
				size = fmt.Sprint(info.Size())
			}
			fmt.Fprintf(&b, "%s (%s bytes)\n", name, size)
		default:
			fmt.Fprintf(&b, "%s (%s)\n", name, describe(t))
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func describe(m iofs.FileMode) string {
	if k := kindOf(m); k != "" {
		return k
	}
	return "a file"
}
