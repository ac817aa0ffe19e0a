package fs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"strconv"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type readArgs struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the workspace root"`
	Offset int    `json:"offset,omitempty" jsonschema:"the 1-based line number to start at; default 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"how many lines to return at most; default 2000"`
}

// kindOf names a file type that is not a regular file, or "" for one.
func kindOf(m iofs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "a directory"
	case m&iofs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&iofs.ModeSocket != 0:
		return "a socket"
	case m&iofs.ModeCharDevice != 0:
		return "a character device"
	case m&iofs.ModeDevice != 0:
		return "a device"
	case m&iofs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}

func notRegular(p string, m iofs.FileMode) error {
	k := kindOf(m)
	if k == "" {
		return nil
	}
	if m.IsDir() {
		return fmt.Errorf("%q is a directory, not a file; use list_dir to see what it holds", p)
	}
	return fmt.Errorf("%q is %s, not a regular file; the file tools only read and write regular files", p, k)
}

// openRegular opens a regular file for reading without ever blocking: the
// type is checked before opening (opening some devices has effects), the
// open does not wait (O_NONBLOCK), and the type is checked again on the
// open file in case it was swapped in between.
func (ts *Toolset) openRegular(rel string) (*os.File, iofs.FileInfo, error) {
	fi, err := ts.root.Stat(rel)
	if err != nil {
		return nil, nil, pathErr(rel, err)
	}
	if err := notRegular(rel, fi.Mode()); err != nil {
		return nil, nil, err
	}
	f, err := ts.root.OpenFile(rel, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, nil, pathErr(rel, err)
	}
	fi, err = f.Stat()
	if err == nil {
		err = notRegular(rel, fi.Mode())
	}
	if err == nil && ts.openedHidden(f) {
		err = errHiddenOpened
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// sniffLen is how much of a file decides whether it is binary (as git).
const sniffLen = 8000

// isBinary reports whether b, the start of a file, looks binary: a NUL
// byte, or more than a tenth of control bytes and invalid UTF-8. A
// multi-byte rune cut at the end of b does not count.
func isBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	bad := 0
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			if len(b)-i < utf8.UTFMax && !utf8.FullRune(b[i:]) {
				break
			}
			bad++
		} else if r < 0x20 && r != '\t' && r != '\n' && r != '\r' && r != '\f' && r != '\v' && r != 0x1b {
			bad++
		}
		i += n
	}
	return bad*10 > len(b)
}

func (ts *Toolset) readFile() tool.Tool {
	schema, err := jsonschema.For[readArgs](nil)
	if err != nil {
		panic(err)
	}
	schema.Properties["offset"].Minimum = jsonschema.Ptr(0.0)
	schema.Properties["limit"].Minimum = jsonschema.Ptr(0.0)
	return tool.Func("read_file",
		"Read a text file of the workspace. Returns its lines numbered like cat -n (number, tab, line). "+
			"Reads at most 2000 lines by default; use offset (1-based line) and limit to read other parts of a long file. "+
			"Says \"binary file\" for binary content, and refuses directories (use list_dir) and special files.",
		func(ctx context.Context, in readArgs) (string, error) {
			ts.started()
			return ts.read(ctx, in)
		}, &tool.FuncOptions[readArgs]{
			Effect:      llm.EffectReadOnly,
			MaxResult:   ts.opts.MaxResult,
			Schema:      schema,
			ApprovalFor: func(in readArgs) bool { return ts.envRead(in.Path) },
		})
}

func (ts *Toolset) read(ctx context.Context, in readArgs) (string, error) {
	rel, err := ts.rel(in.Path, false)
	if err != nil {
		return "", err
	}
	if in.Offset < 0 || in.Limit < 0 {
		return "", fmt.Errorf("offset and limit must not be negative (got offset %d, limit %d)", in.Offset, in.Limit)
	}
	offset, limit := in.Offset, in.Limit
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = ts.opts.MaxLines
	}
	if err := ts.refuseHidden(in.Path, rel); err != nil {
		return "", err
	}
	f, fi, err := ts.openRegular(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if opened, ok := ts.openedRel(f); ok && isEnvName(path.Base(opened)) && !ts.envRead(in.Path) {
		// Approval was not asked for this file: a link changed meanwhile.
		return "", fmt.Errorf("%q changed while it was opened and is now the environment file %s, whose reading needs approval; nothing was read", rel, opened)
	}
	capped := io.LimitReader(f, ts.opts.MaxFileSize)
	br := bufio.NewReaderSize(capped, int(min(max(fi.Size()+1, sniffLen+192), 64<<10)))
	head, _ := br.Peek(sniffLen)
	if isBinary(head) {
		return fmt.Sprintf("%s is a binary file (%d bytes); its content is not shown.", rel, fi.Size()), nil
	}

	budget := resultBudget(ts.opts.MaxResult)
	out := make([]byte, 0, min(int64(budget), fi.Size()+1024))
	line := make([]byte, 0, 256)
	n := 0 // lines read
	shown := 0
	note := ""
	hitEnd := false
	for {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("read_file stopped: %w", context.Cause(ctx))
			}
		}
		var cut, eof bool
		line, cut, eof, err = readLine(br, line[:0], ts.opts.MaxLineLength)
		if err != nil {
			return "", pathErr(rel, err)
		}
		if eof && len(line) == 0 {
			hitEnd = true
			break
		}
		n++
		if n >= offset {
			if shown == limit {
				note = fmt.Sprintf("\n[%s continues after line %d; read on with offset=%d]", rel, n-1, n)
				break
			}
			before := len(out)
			out = appendLine(out, n, line, cut)
			if len(out) > budget && shown > 0 {
				out = out[:before]
				note = fmt.Sprintf("\n[output limit reached; %s continues after line %d; read on with offset=%d]", rel, n-1, n)
				break
			}
			shown++
		}
		if eof {
			hitEnd = true
			break
		}
	}
	if shown == 0 {
		if n == 0 {
			return fmt.Sprintf("(%s is empty)", rel), nil
		}
		if hitEnd && fi.Size() > ts.opts.MaxFileSize {
			return "", fmt.Errorf("offset %d is past the %d lines in the first %d bytes of %s, which is %d bytes long; the file tools read no further. Use grep to search it", offset, n, ts.opts.MaxFileSize, rel, fi.Size())
		}
		return "", fmt.Errorf("offset %d is past the end of %s, which has %d lines", offset, rel, n)
	}
	if hitEnd && fi.Size() > ts.opts.MaxFileSize {
		note = fmt.Sprintf("\n[stopped at the read limit: %s is %d bytes long and only its first %d bytes were read]", rel, fi.Size(), ts.opts.MaxFileSize)
	}
	return string(out) + note, nil
}

// resultBudget is how much of a result of at most max bytes a tool fills
// before it stops to leave room for its closing note.
func resultBudget(max int) int {
	return max - min(300, max/2)
}

// readLine appends the next line of br to line (without its newline), cut
// to max bytes at a rune boundary; the rest of a long line is skipped.
// eof reports that the input ended with this line.
func readLine(br *bufio.Reader, line []byte, maxLen int) (_ []byte, cut, eof bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		body := chunk
		if err == nil {
			body = chunk[:len(chunk)-1] // the newline
		}
		if room := maxLen - len(line); len(body) > room {
			body = body[:max(room, 0)]
			cut = true
		}
		line = append(line, body...)
		switch {
		case err == nil:
			if cut {
				line = trimPartialRune(line)
			}
			return line, cut, false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if cut {
				line = trimPartialRune(line)
			}
			return line, cut, true, nil
		default:
			return line, cut, false, err
		}
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence from the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

func appendLine(b []byte, n int, line []byte, cut bool) []byte {
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(n), 10)
	for i := len(digits); i < 6; i++ {
		b = append(b, ' ')
	}
	b = append(b, digits...)
	b = append(b, '\t')
	b = append(b, line...)
	if cut {
		b = append(b, " [line cut]"...)
	}
	return append(b, '\n')
}
