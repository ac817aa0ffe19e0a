package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type editArgs struct {
	Path       string `json:"path" jsonschema:"the file to edit, relative to the workspace root"`
	OldString  string `json:"old_string" jsonschema:"the exact text to replace, including whitespace and indentation; it must occur exactly once unless replace_all is set"`
	NewString  string `json:"new_string" jsonschema:"the text to put in its place"`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"replace every occurrence of old_string; default false"`
}

func (ts *Toolset) editFile() tool.Tool {
	return tool.Func("edit_file",
		"Edit a file of the workspace by replacing old_string with new_string. old_string must match the file exactly "+
			"(whitespace and indentation included) and occur exactly once, unless replace_all is set; otherwise nothing is changed. "+
			"Read the file first. The write is atomic.",
		func(ctx context.Context, in editArgs) (string, error) {
			ts.started()
			return ts.edit(ctx, in)
		}, &tool.FuncOptions[editArgs]{
			Effect:        llm.EffectDestructive,
			NeedsApproval: ts.opts.WritesNeedApproval,
			ApprovalFor:   func(in editArgs) bool { return ts.protected(in.Path) },
			MaxResult:     ts.opts.MaxResult,
		})
}

func (ts *Toolset) edit(ctx context.Context, in editArgs) (string, error) {
	rel, err := ts.rel(in.Path, false)
	if err != nil {
		return "", err
	}
	if in.OldString == "" {
		return "", errors.New("old_string is empty; to create a file or replace all of it, use write_file")
	}
	if in.OldString == in.NewString {
		return "", errors.New("old_string and new_string are the same; there is nothing to change")
	}
	if err := ts.refuseHidden(in.Path, rel); err != nil {
		return "", err
	}
	target, err := ts.resolve(rel)
	if err != nil {
		return "", err
	}
	f, fi, err := ts.openRegular(target)
	if err != nil {
		return "", err
	}
	if fi.Size() > ts.opts.MaxFileSize {
		f.Close()
		return "", fmt.Errorf("%s is %d bytes long; edit_file edits files of at most %d bytes", rel, fi.Size(), ts.opts.MaxFileSize)
	}
	data, err := io.ReadAll(io.LimitReader(f, ts.opts.MaxFileSize+1))
	f.Close()
	if err != nil {
		return "", pathErr(rel, err)
	}
	if isBinary(data[:min(len(data), sniffLen)]) {
		return "", fmt.Errorf("%s is a binary file; edit_file edits text", rel)
	}
	content := string(data)
	count := strings.Count(content, in.OldString)
	switch {
	case count == 0:
		return "", fmt.Errorf("old_string was not found in %s; nothing was changed. It must match exactly, whitespace and indentation included: read the file again and copy the text from it", rel)
	case count > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("old_string occurs %d times in %s (at lines %s); nothing was changed. Include more of the surrounding text to make it unique, or set replace_all to replace every occurrence", count, rel, matchLines(content, in.OldString, 10))
	}
	var updated string
	if in.ReplaceAll {
		updated = strings.ReplaceAll(content, in.OldString, in.NewString)
	} else {
		updated = strings.Replace(content, in.OldString, in.NewString, 1)
	}
	// Refuse to overwrite a change made since the file was read.
	if now, err := ts.root.Stat(target); err != nil || now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
		return "", fmt.Errorf("%s changed while it was being edited; nothing was written. Read it again and retry", rel)
	}
	if _, err := ts.writeAtomic(ctx, rel, target, []byte(updated), false); err != nil {
		return "", err
	}
	first := strings.Count(content[:strings.Index(content, in.OldString)], "\n") + 1
	noun := "occurrence"
	if count > 1 {
		noun = "occurrences"
	}
	return fmt.Sprintf("Edited %s: replaced %d %s of old_string (the first at line %d).", rel, count, noun, first), nil
}

// matchLines lists the line numbers where s occurs in content, at most max.
func matchLines(content, s string, max int) string {
	var lines []string
	off, line := 0, 1
	for len(lines) < max {
		i := strings.Index(content[off:], s)
		if i < 0 {
			break
		}
		line += strings.Count(content[off:off+i], "\n")
		lines = append(lines, fmt.Sprint(line))
		line += strings.Count(s, "\n")
		off += i + len(s)
	}
	return strings.Join(lines, ", ")
}
