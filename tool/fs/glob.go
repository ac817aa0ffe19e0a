package fs

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type globArgs struct {
	Pattern string `json:"pattern" jsonschema:"a glob relative to the workspace root: * and ? match within a name, [abc] a set, ** any number of directories; e.g. **/*.go or src/**/test_*.py"`
}

func (ts *Toolset) glob() tool.Tool {
	return tool.Func("glob",
		"Find files and directories of the workspace whose paths match a glob pattern (** matches any number of directories). "+
			"Returns matching paths in lexical order, directories ending in /. Skips .git unless the pattern names it; does not follow symbolic links.",
		func(ctx context.Context, in globArgs) (string, error) {
			ts.started()
			return ts.globFiles(ctx, in)
		}, &tool.FuncOptions[globArgs]{Effect: llm.EffectReadOnly, MaxResult: ts.opts.MaxResult})
}

// pattern checks a glob pattern as a path and compiles it.
func (ts *Toolset) pattern(p string) (*globPattern, error) {
	if p == "" {
		return nil, fmt.Errorf("pattern is empty; e.g. **/*.go")
	}
	rel, err := ts.rel(p, false)
	if err != nil {
		return nil, err
	}
	g, err := compileGlob(rel)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", p, err)
	}
	return g, nil
}

func (ts *Toolset) globFiles(ctx context.Context, in globArgs) (string, error) {
	g, err := ts.pattern(in.Pattern)
	if err != nil {
		return "", err
	}
	start := g.literalPrefix()
	var matches []string
	total := 0
	w := &walker{
		ts:      ts,
		ctx:     ctx,
		keepGit: g.namesGit(),
		descend: g.mayMatchUnder,
		visit: func(rel string, d os.DirEntry) error {
			if !g.match(rel) {
				return nil
			}
			total++
			if len(matches) < ts.opts.MaxEntries {
				if d.IsDir() {
					rel += "/"
				}
				matches = append(matches, display(rel))
			}
			return nil
		},
	}
	if err := ts.refuseHidden(in.Pattern, start); err != nil {
		return "", err
	}
	if start != "." {
		fi, err := ts.root.Stat(start)
		if err != nil {
			return "", fmt.Errorf("no match: %v", pathErr(start, err))
		}
		if !fi.IsDir() {
			if g.match(start) {
				return start, nil
			}
			return "", fmt.Errorf("no match: %q is not a directory", start)
		}
	}
	if err := w.walk(start); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("glob stopped: %w", context.Cause(ctx))
		}
		return "", pathErr(start, err)
	}
	hiddenNote := ""
	if w.hidden > 0 {
		hiddenNote = fmt.Sprintf("[%d credential stores not searched: the file tools do not look inside them]", w.hidden)
	}
	if total == 0 {
		msg := fmt.Sprintf("No path matches %q.", in.Pattern)
		if w.limitHit {
			msg += fmt.Sprintf(" The search stopped after visiting %d entries; narrow the pattern.", ts.opts.MaxVisit)
		}
		if hiddenNote != "" {
			msg += " " + hiddenNote
		}
		return msg, nil
	}
	out := strings.Join(matches, "\n")
	if total > len(matches) {
		out += fmt.Sprintf("\n[... %d more matches not shown; narrow the pattern]", total-len(matches))
	}
	if w.limitHit {
		out += fmt.Sprintf("\n[the search stopped after visiting %d entries; there may be more matches; narrow the pattern]", ts.opts.MaxVisit)
	}
	if hiddenNote != "" {
		out += "\n" + hiddenNote
	}
	return out, nil
}
