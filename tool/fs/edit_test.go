package fs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestEditFile(t *testing.T) {
	e := newEnv(t, nil)
	e.file("m.go", "package m\n\nfunc A() {}\n\nfunc B() {}\n")
	got := e.ok("edit_file", map[string]any{"path": "m.go", "old_string": "func B() {}", "new_string": "func B() int { return 1 }"})
	if got != "Edited m.go: replaced 1 occurrence of old_string (the first at line 5)." {
		t.Errorf("result %q", got)
	}
	if want := "package m\n\nfunc A() {}\n\nfunc B() int { return 1 }\n"; e.read("m.go") != want {
		t.Errorf("content %q", e.read("m.go"))
	}
}

// ADVERSARIAL 51: zero or several matches change nothing, not a byte.
func TestEditFileMustMatchOnce(t *testing.T) {
	e := newEnv(t, nil)
	orig := "x := 1\ny := 2\nx := 1\n"
	e.file("f.go", orig)
	p := filepath.Join(e.ws, "f.go")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(p, old, old)

	e.fails("edit_file", map[string]any{"path": "f.go", "old_string": "z := 3", "new_string": "w"}, "not found", "nothing was changed")
	e.fails("edit_file", map[string]any{"path": "f.go", "old_string": "x := 1", "new_string": "x := 9"}, "occurs 2 times", "lines 1, 3", "replace_all")
	e.fails("edit_file", map[string]any{"path": "f.go", "old_string": "X := 1", "new_string": "x"}, "not found")
	e.fails("edit_file", map[string]any{"path": "f.go", "old_string": "", "new_string": "x"}, "old_string is empty")
	e.fails("edit_file", map[string]any{"path": "f.go", "old_string": "y := 2", "new_string": "y := 2"}, "the same")
	e.fails("edit_file", map[string]any{"path": "nope.go", "old_string": "a", "new_string": "b"}, "does not exist")
	if e.read("f.go") != orig {
		t.Fatalf("file changed: %q", e.read("f.go"))
	}
	if fi, _ := os.Stat(p); !fi.ModTime().Equal(old) {
		t.Errorf("file was rewritten (mtime %v)", fi.ModTime())
	}

	got := e.ok("edit_file", map[string]any{"path": "f.go", "old_string": "x := 1", "new_string": "x := 9", "replace_all": true})
	if !strings.Contains(got, "replaced 2 occurrences") || e.read("f.go") != "x := 9\ny := 2\nx := 9\n" {
		t.Errorf("replace_all: %q, content %q", got, e.read("f.go"))
	}
}

func TestEditFileRefusesBinary(t *testing.T) {
	e := newEnv(t, nil)
	e.file("b.bin", "abc\x00def")
	e.fails("edit_file", map[string]any{"path": "b.bin", "old_string": "abc", "new_string": "x"}, "binary")
	if e.read("b.bin") != "abc\x00def" {
		t.Error("binary file changed")
	}
}

func TestEditFileThroughLinkKeepsLink(t *testing.T) {
	e := newEnv(t, nil)
	e.file("real.txt", "hello world")
	e.symlink("real.txt", "alias.txt")
	e.ok("edit_file", map[string]any{"path": "alias.txt", "old_string": "world", "new_string": "there"})
	if e.read("real.txt") != "hello there" {
		t.Errorf("target %q", e.read("real.txt"))
	}
	if fi, _ := os.Lstat(filepath.Join(e.ws, "alias.txt")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("link replaced by a file")
	}
}
