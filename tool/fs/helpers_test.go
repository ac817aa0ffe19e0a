package fs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/fs"
)

// env is a workspace next to an outside directory holding a secret.
type env struct {
	t       *testing.T
	ws      string // the workspace
	outside string // a sibling directory the tools must not reach
	ts      *fs.Toolset
	set     *tool.Set
}

const secret = "TOP-SECRET-OUTSIDE"

func newEnv(t *testing.T, opts *fs.Options) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, ws: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.ws, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.outside, "secret.txt"), []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := fs.New(e.ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	e.ts = ts
	e.set, err = tool.NewSet(ts.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// file writes a file in the workspace.
func (e *env) file(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// symlink makes ws/rel point to target.
func (e *env) symlink(target, rel string) {
	e.t.Helper()
	p := filepath.Join(e.ws, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		e.t.Fatal(err)
	}
}

// read returns the content of ws/rel, or "<missing>".
func (e *env) read(rel string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.ws, filepath.FromSlash(rel)))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

// call calls a tool with args (a JSON string, or a value to encode).
func (e *env) call(name string, args any) llm.ToolResult {
	e.t.Helper()
	var raw string
	switch a := args.(type) {
	case string:
		raw = a
	default:
		b, err := json.Marshal(a)
		if err != nil {
			e.t.Fatal(err)
		}
		raw = string(b)
	}
	res, err := e.set.Call(context.Background(), llm.ToolCall{ID: "t", Name: name, Arguments: raw})
	if err != nil {
		e.t.Fatalf("%s(%s): Go error %v", name, raw, err)
	}
	return res
}

func (e *env) ok(name string, args any) string {
	e.t.Helper()
	res := e.call(name, args)
	if res.IsError {
		e.t.Fatalf("%s(%v) failed: %s", name, args, res.Content)
	}
	return res.Content
}

func (e *env) fails(name string, args any, want ...string) string {
	e.t.Helper()
	res := e.call(name, args)
	if !res.IsError {
		e.t.Fatalf("%s(%v) = %q, want an error result", name, args, res.Content)
	}
	for _, w := range want {
		if !strings.Contains(res.Content, w) {
			e.t.Errorf("%s(%v): message %q lacks %q", name, args, res.Content, w)
		}
	}
	return res.Content
}

// snapshot lists every path under dir with its content or link target, to
// check that nothing changed.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, rel+" -> "+target)
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			lines = append(lines, rel+" = "+string(b))
		default:
			lines = append(lines, rel+" "+fi.Mode().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
