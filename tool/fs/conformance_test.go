package fs_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool/fs"
	"github.com/loomkit/loom/tool/tooltest"
)

func TestConformance(t *testing.T) {
	e := newEnv(t, nil)
	var ran atomic.Int32
	fs.SetRunHook(e.ts, func() { ran.Add(1) })
	e.file("a.txt", "hello\nworld\n")
	e.file("dir/b.go", "package b\n")
	cases := map[string][]tooltest.Case{
		"read_file": {
			{Name: "ok", Args: `{"path":"a.txt"}`, Contains: "     1\thello"},
			{Name: "missing", Args: `{"path":"nope"}`, WantError: true, Contains: "does not exist"},
		},
		"write_file": {
			{Name: "ok", Args: `{"path":"new/c.txt","content":"c"}`, Contains: "c.txt"},
			{Name: "escape", Args: `{"path":"../x","content":"c"}`, WantError: true, Contains: "outside the workspace"},
		},
		"edit_file": {
			{Name: "ok", Args: `{"path":"a.txt","old_string":"world","new_string":"there"}`, Contains: "Edited a.txt"},
			{Name: "no match", Args: `{"path":"a.txt","old_string":"absent","new_string":"x"}`, WantError: true, Contains: "not found"},
		},
		"list_dir": {
			{Name: "root", Args: `{}`, Contains: "a.txt"},
			{Name: "file", Args: `{"path":"a.txt"}`, WantError: true},
		},
		"glob": {
			{Name: "ok", Args: `{"pattern":"**/*.go"}`, Contains: "dir/b.go"},
		},
		"grep": {
			{Name: "ok", Args: `{"pattern":"package"}`, Contains: "dir/b.go:1: package b"},
			{Name: "bad regexp", Args: `{"pattern":"("}`, WantError: true},
		},
	}
	for _, tl := range e.ts.Tools() {
		name := tl.Spec().Name
		t.Run(name, func(t *testing.T) {
			(&tooltest.Suite{Tool: tl, Cases: cases[name], Ran: func() int { return int(ran.Load()) }}).Run(t)
		})
	}
	if ran.Load() == 0 {
		t.Error("the hook never saw a call")
	}
}

func TestCheckGoVersion(t *testing.T) {
	unsafe := []string{"go1.26.0", "go1.26.4", "go1.25.11", "go1.25", "go1.24.9", "go1.26rc1"}
	safe := []string{"go1.26.5", "go1.26.8", "go1.25.12", "go1.27", "go1.27rc1", "devel go1.27-abcdef", "go1.30.1"}
	for _, v := range unsafe {
		if err := fs.CheckGoVersion(v); !errors.Is(err, fs.ErrUnsafeGo) {
			t.Errorf("%s: err = %v, want ErrUnsafeGo", v, err)
		}
	}
	for _, v := range safe {
		if err := fs.CheckGoVersion(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestNew(t *testing.T) {
	if _, err := fs.New(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := fs.New(f, nil); err == nil {
		t.Error("a file accepted as workspace")
	}
	ts, err := fs.New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if real, _ := filepath.EvalSymlinks(wd); ts.Dir() != real {
		t.Errorf("Dir() = %q, want %q", ts.Dir(), real)
	}
	ts.Close()
	res, err := ts.Tools()[0].Call(t.Context(), []byte(`{"path":"fs.go"}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "closed") {
		t.Errorf("after Close: %+v %v", res, err)
	}
	_ = llm.ToolResult{}
}
