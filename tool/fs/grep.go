package fs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type grepArgs struct {
	Pattern string `json:"pattern" jsonschema:"a Go (RE2) regular expression, matched line by line (^ and $ match at line starts and ends), e.g. func \\w+Handler or (?i)todo; no lookaround or backreferences"`
	Path    string `json:"path,omitempty" jsonschema:"the file or directory to search, relative to the workspace root; default the root"`
	Include string `json:"include,omitempty" jsonschema:"only search files matching this glob: a name pattern like *.go, or a path pattern like src/**/*.ts"`
}

func (ts *Toolset) grep() tool.Tool {
	return tool.Func("grep",
		"Search the workspace's text files for a Go regular expression (RE2 syntax). Returns matching lines as path:line: text, "+
			"files in lexical order. Skips .git, binary files, files too large to search, and symbolic links.",
		func(ctx context.Context, in grepArgs) (string, error) {
			ts.started()
			return ts.search(ctx, in)
		}, &tool.FuncOptions[grepArgs]{
			Effect:      llm.EffectReadOnly,
			MaxResult:   ts.opts.MaxResult,
			ApprovalFor: ts.envSearch,
		})
}

// grepMaxLine is how much of a matching line grep shows.
const grepMaxLine = 300

type grepState struct {
	ts       *Toolset
	ctx      context.Context
	re       *regexp.Regexp
	pre      *prefilter
	out      []byte
	buf      []byte
	matches  int
	files    int
	full     bool // MaxMatches reached or output budget spent
	skipBig  int
	skipBin  int
	searched int
	envOK    bool // environment files may be searched (the call named them)
	named    bool // the call names the one file searched
	skipEnv  int  // environment files passed by
	hidden   int  // credential stores passed by
}

func (ts *Toolset) search(ctx context.Context, in grepArgs) (string, error) {
	if in.Pattern == "" {
		return "", fmt.Errorf("pattern is empty; give a regular expression")
	}
	full := "(?m)" + in.Pattern // ^ and $ match at line breaks, as in grep
	re, err := regexp.Compile(full)
	if err != nil {
		return "", fmt.Errorf("pattern is not a valid Go regular expression: %v. Go uses RE2 syntax: no lookaround, no backreferences", err)
	}
	rel, err := ts.rel(in.Path, true)
	if err != nil {
		return "", err
	}
	var include *globPattern
	if in.Include != "" {
		if include, err = ts.pattern(in.Include); err != nil {
			return "", fmt.Errorf("include: %v", err)
		}
	}
	if err := ts.refuseHidden(in.Path, rel); err != nil {
		return "", err
	}
	fi, err := ts.root.Stat(rel)
	if err != nil {
		return "", pathErr(rel, err)
	}
	st := &grepState{ts: ts, ctx: ctx, re: re, pre: newPrefilter(full), envOK: ts.envSearch(in)}
	if fi.Mode().IsRegular() {
		st.named = true
		st.file(rel)
	} else if !fi.IsDir() {
		return "", notRegular(rel, fi.Mode())
	} else {
		nameOnly := include != nil && !strings.Contains(strings.Trim(in.Include, "/"), "/")
		w := &walker{ts: ts, ctx: ctx, visit: func(p string, d os.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			if !st.envOK && isEnvName(d.Name()) {
				st.skipEnv++
				return nil
			}
			if include != nil {
				subject := p
				if nameOnly {
					subject = path.Base(p)
				}
				if !include.match(subject) {
					return nil
				}
			}
			st.file(p)
			if st.full {
				return errStopWalk
			}
			return nil
		}}
		if err := w.walk(rel); err != nil {
			if ctx.Err() != nil {
				return "", fmt.Errorf("grep stopped: %w", context.Cause(ctx))
			}
			return "", pathErr(rel, err)
		}
		if w.limitHit {
			st.out = fmt.Appendf(st.out, "[the search stopped after visiting %d entries; narrow path or include]\n", ts.opts.MaxVisit)
		}
		st.hidden += w.hidden
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("grep stopped: %w", context.Cause(ctx))
	}
	return st.summary(in.Pattern), nil
}

func (st *grepState) summary(pattern string) string {
	var notes []string
	if st.full {
		notes = append(notes, fmt.Sprintf("stopped after %d matching lines; narrow the pattern, path or include", st.matches))
	}
	if st.skipBig > 0 {
		notes = append(notes, fmt.Sprintf("%d files larger than %d bytes skipped", st.skipBig, st.ts.opts.MaxGrepFileSize))
	}
	if st.skipBin > 0 {
		notes = append(notes, fmt.Sprintf("%d binary files skipped", st.skipBin))
	}
	if st.skipEnv > 0 {
		notes = append(notes, fmt.Sprintf("%d environment files (.env*) skipped: they hold secrets; name them with path or include to search them, which needs approval", st.skipEnv))
	}
	if st.hidden > 0 {
		notes = append(notes, fmt.Sprintf("%d credential stores skipped: the file tools do not search them", st.hidden))
	}
	note := ""
	if len(notes) > 0 {
		note = "[" + strings.Join(notes, "; ") + "]"
	}
	if st.matches == 0 {
		msg := fmt.Sprintf("No matches for %q in %d files searched.", pattern, st.searched)
		if note != "" {
			msg += " " + note
		}
		return msg
	}
	return string(st.out) + note
}

// file searches one file, adding its matching lines. The file is opened
// without a look first (the walk saw a regular file; a file swapped in since
// cannot block the open, and is checked on the open file), which halves
// the cost of a search of many small files.
func (st *grepState) file(rel string) {
	if st.full || st.ctx.Err() != nil {
		return
	}
	f, err := st.ts.root.OpenFile(rel, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return // vanished or unreadable: not worth failing the search
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return
	}
	if st.ts.openedHidden(f) {
		f.Close()
		st.hidden++
		return
	}
	if !st.envOK && isEnvName(path.Base(rel)) {
		f.Close()
		st.skipEnv++
		return
	}
	if st.named && !st.envOK {
		// The file the call named: a link swapped in since the approval
		// was decided must not lead to an environment file. (Files a walk
		// finds are checked by name only: the check costs a system call
		// per file.)
		if opened, ok := st.ts.openedRel(f); ok && isEnvName(path.Base(opened)) {
			f.Close()
			st.skipEnv++
			return
		}
	}
	if fi.Size() > st.ts.opts.MaxGrepFileSize {
		f.Close()
		st.skipBig++
		return
	}
	n := int(min(fi.Size(), st.ts.opts.MaxGrepFileSize))
	if cap(st.buf) < n+1 {
		st.buf = make([]byte, 0, n+1)
	}
	data, err := readInto(f, st.buf[:0], n+1)
	f.Close()
	if err != nil {
		return
	}
	if len(data) > int(st.ts.opts.MaxGrepFileSize) {
		st.skipBig++ // grew since it was listed
		return
	}
	st.searched++
	if isBinary(data[:min(len(data), sniffLen)]) {
		st.skipBin++
		return
	}
	budget := resultBudget(st.ts.opts.MaxResult)
	line, counted := 1, 0 // data[:counted] has had its newlines counted
	found := false
	for from := 0; from <= len(data); {
		lineStart, lineEnd, ok := st.nextMatchLine(data, from)
		if !ok {
			break
		}
		if !found {
			found = true
			st.files++
		}
		line += bytes.Count(data[counted:lineStart], []byte{'\n'})
		counted = lineStart
		before := len(st.out)
		st.out = append(st.out, display(rel)...)
		st.out = append(st.out, ':')
		st.out = strconv.AppendInt(st.out, int64(line), 10)
		st.out = append(st.out, ": "...)
		text := bytes.TrimRight(data[lineStart:lineEnd], "\r")
		if len(text) > grepMaxLine {
			st.out = append(st.out, trimPartialRune(text[:grepMaxLine])...)
			st.out = append(st.out, " [line cut]"...)
		} else {
			st.out = append(st.out, text...)
		}
		st.out = append(st.out, '\n')
		if len(st.out) > budget {
			st.out = st.out[:before]
			st.full = true
			return
		}
		st.matches++
		if st.matches >= st.ts.opts.MaxMatches {
			st.full = true
			return
		}
		from = lineEnd + 1
	}
}

// nextMatchLine returns the bounds (without the newline) of the first line
// at or after from on which a match starts.
func (st *grepState) nextMatchLine(data []byte, from int) (start, end int, ok bool) {
	if st.pre != nil {
		for from <= len(data) {
			s, e := st.pre.nextCandidate(data, from)
			if s < 0 {
				return 0, 0, false
			}
			if st.re.Match(data[s:e]) {
				return s, e, true
			}
			from = e + 1
		}
		return 0, 0, false
	}
	loc := st.re.FindIndex(data[from:])
	if loc == nil {
		return 0, 0, false
	}
	m := from + loc[0]
	start = bytes.LastIndexByte(data[:m], '\n') + 1
	end = len(data)
	if i := bytes.IndexByte(data[m:], '\n'); i >= 0 {
		end = m + i
	}
	return start, end, true
}

// readInto reads at most max bytes of r into buf.
func readInto(r io.Reader, buf []byte, max int) ([]byte, error) {
	for len(buf) < max {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), max)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}
