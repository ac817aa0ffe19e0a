package fs_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestWriteFile(t *testing.T) {
	e := newEnv(t, nil)
	got := e.ok("write_file", map[string]any{"path": "a/b/c.txt", "content": "one\ntwo\n"})
	if got != "Created a/b/c.txt: 8 bytes, 2 lines." {
		t.Errorf("result %q", got)
	}
	if e.read("a/b/c.txt") != "one\ntwo\n" {
		t.Errorf("content %q", e.read("a/b/c.txt"))
	}
	// Overwriting keeps the mode.
	p := filepath.Join(e.ws, "a/b/c.txt")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := e.ok("write_file", map[string]any{"path": "a/b/c.txt", "content": ""}); !strings.HasPrefix(got, "Wrote a/b/c.txt: 0 bytes") {
		t.Errorf("result %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want 1: %v", len(entries), entries)
	}
	e.fails("write_file", map[string]any{"path": "a/b", "content": "x"}, "is a directory")
	e.fails("write_file", map[string]any{"path": "a/b/c.txt/d", "content": "x"}, "not a directory")
	e.fails("write_file", map[string]any{"path": ".", "content": "x"}, "workspace root")
	e.fails("write_file", map[string]any{"path": "x"}, `missing required field "content"`)
}

func TestWriteFileThroughInsideLink(t *testing.T) {
	e := newEnv(t, nil)
	e.file("real/target.txt", "old")
	e.symlink("real/target.txt", "link.txt")
	got := e.ok("write_file", map[string]any{"path": "link.txt", "content": "new"})
	if !strings.Contains(got, "real/target.txt") {
		t.Errorf("result %q does not say where it wrote", got)
	}
	if e.read("real/target.txt") != "new" {
		t.Error("the link's target was not written")
	}
	if fi, err := os.Lstat(filepath.Join(e.ws, "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the link was replaced")
	}
}

// ADVERSARIAL 51: a reader never sees a torn file.
func TestWriteFileAtomic(t *testing.T) {
	e := newEnv(t, nil)
	a, b := strings.Repeat("A", 256<<10), strings.Repeat("B", 256<<10)
	e.file("f", a)
	var stop atomic.Bool
	var wg sync.WaitGroup
	var torn atomic.Int32
	wg.Go(func() {
		for !stop.Load() {
			got, err := os.ReadFile(filepath.Join(e.ws, "f"))
			if err != nil {
				torn.Add(1)
				continue
			}
			if s := string(got); s != a && s != b {
				torn.Add(1)
			}
		}
	})
	for i := range 30 {
		content := a
		if i%2 == 0 {
			content = b
		}
		e.ok("write_file", map[string]any{"path": "f", "content": content})
	}
	stop.Store(true)
	wg.Wait()
	if torn.Load() > 0 {
		t.Errorf("%d reads saw a missing or mixed file", torn.Load())
	}
}

// ADVERSARIAL 50: Windows device names are refused as new file names on
// every system (a repository holding them cannot be checked out on Windows).
func TestWriteFileDeviceNames(t *testing.T) {
	e := newEnv(t, nil)
	for _, name := range []string{"NUL", "nul.txt", "COM1", "sub/con", "CONOUT$", "lpt9.log", "AUX "} {
		e.fails("write_file", map[string]any{"path": name, "content": "x"}, "Windows device name")
	}
	e.ok("write_file", map[string]any{"path": "null.txt", "content": "x"})
	e.ok("write_file", map[string]any{"path": "com10", "content": "x"})
}
