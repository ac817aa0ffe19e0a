package fs_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The escapes of ADVERSARIAL 41-46, 49 and 53, tried with every tool that
// takes a path: each is refused with a clear message and nothing outside
// the workspace is read or written.
func TestEscapesRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.file("inside/ok.txt", "fine\n")
	e.symlink(e.outside, "etc")                                 // 41: ws/etc -> outside dir
	e.symlink("/", "rootlink")                                  // 42: link -> /
	e.symlink(filepath.Join(e.outside, "pwn"), "new")           // 45: dangling, absolute
	e.symlink("../outside/pwn2", "newrel")                      // 45: dangling, relative
	e.symlink("../outside", "rel")                              // relative link out
	e.symlink(filepath.Join(e.outside, "secret.txt"), "id_rsa") // 46/53: link to a secret
	e.symlink("loop2", "loop1")                                 // loops
	e.symlink("loop1", "loop2")
	outsideBefore := snapshot(t, e.outside)

	type attempt struct {
		path string
		want string // in the message
	}
	escapes := "outside the workspace"
	attempts := []attempt{
		{"etc/secret.txt", escapes},
		{"etc/", escapes},
		{"rootlink/", escapes},
		{"rootlink/etc/passwd", escapes},
		{"rootlink", escapes},
		{"../outside/secret.txt", escapes},
		{"../../etc/passwd", escapes},
		{"/etc/passwd", escapes},
		{"a/../../b", escapes},
		{"inside/../../outside/secret.txt", escapes},
		{filepath.Join(e.outside, "secret.txt"), escapes},
		{`C:\Windows\win.ini`, "Windows drive path"},
		{`\\?\C:\x`, "Windows device or network path"},
		{`inside\ok.txt`, "backslash"},
		{"~/.ssh/id_rsa", "~"},
		{"a\x00b", "NUL"},
		{"a\nb", "line break"},
		{strings.Repeat("a/", 2500), "longest accepted"},
		{"rel/secret.txt", escapes},
		{"id_rsa", escapes},
		{"new", escapes},
		{"newrel", escapes},
		{"loop1", "symbolic links"},
		{"", "empty"},
	}
	for _, a := range attempts {
		e.fails("read_file", map[string]any{"path": a.path}, a.want)
		if a.path != "" {
			e.fails("write_file", map[string]any{"path": a.path, "content": "pwned"}, a.want)
			e.fails("edit_file", map[string]any{"path": a.path, "old_string": secret, "new_string": "pwned"}, a.want)
		}
		if !strings.HasSuffix(a.path, "/") && a.path != "" && !strings.HasPrefix(a.path, "loop") && !strings.HasPrefix(a.path, "new") && a.path != "id_rsa" {
			e.fails("list_dir", map[string]any{"path": a.path}, a.want)
		}
		res := e.call("grep", map[string]any{"pattern": "SECRET", "path": a.path})
		if !res.IsError && a.path != "" {
			t.Errorf("grep in %q: %q, want an error", a.path, res.Content)
		}
		if strings.Contains(res.Content, secret) {
			t.Errorf("grep in %q leaked the secret", a.path)
		}
	}
	for _, pattern := range []string{"../outside/*", "/etc/*", "etc/*", "rel/**", "**/secret.txt", "rootlink/**"} {
		res := e.call("glob", map[string]any{"pattern": pattern})
		if !strings.HasPrefix(res.Content, "No path matches") && strings.Contains(res.Content, "secret") {
			t.Errorf("glob %q reached outside: %q", pattern, res.Content)
		}
	}
	for _, args := range []map[string]any{{"pattern": "SECRET"}, {"pattern": "SECRET", "path": "."}} {
		if got := e.ok("grep", args); strings.Contains(got, secret) {
			t.Errorf("grep %v followed a link out: %q", args, got)
		}
	}
	if got := snapshot(t, e.outside); got != outsideBefore {
		t.Errorf("outside changed:\nbefore %s\nafter  %s", outsideBefore, got)
	}
	if _, err := os.Stat(filepath.Join(e.outside, "pwn")); err == nil {
		t.Error("the dangling link's target was created outside")
	}
}

func TestInsidePathsAccepted(t *testing.T) {
	e := newEnv(t, nil)
	e.file("a/b.txt", "B\n")
	e.symlink("a", "alias")
	e.symlink("../a/b.txt", "up") // relative to ws, so it leaves it
	for _, p := range []string{"a/b.txt", "a/../a/b.txt", "./a/b.txt", "a//b.txt", "alias/b.txt", filepath.Join(e.ts.Dir(), "a", "b.txt")} {
		if got := e.ok("read_file", map[string]any{"path": p}); got != "     1\tB\n" {
			t.Errorf("read_file(%q) = %q", p, got)
		}
	}
	e.fails("read_file", map[string]any{"path": "up"}, "outside the workspace")
}

// ADVERSARIAL 44: a directory swapped for a symbolic link to the outside
// while write_file writes into it: nothing ever appears outside.
func TestSwapRace(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	e := newEnv(t, nil)
	d := filepath.Join(e.ws, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		tmp := filepath.Join(e.ws, "d.swap")
		for i := 0; !stop.Load(); i++ {
			os.RemoveAll(tmp)
			if i%2 == 0 {
				os.Symlink(e.outside, tmp)
			} else {
				os.Mkdir(tmp, 0o755)
			}
			os.RemoveAll(d)
			os.Rename(tmp, d)
		}
	})
	wrote := 0
	for range iterations {
		res := e.call("write_file", map[string]any{"path": "d/x", "content": "pwned"})
		if !res.IsError {
			wrote++
		}
		e.call("edit_file", map[string]any{"path": "d/secret.txt", "old_string": secret, "new_string": "pwned"})
	}
	stop.Store(true)
	wg.Wait()
	entries, _ := os.ReadDir(e.outside)
	for _, en := range entries {
		if en.Name() != "secret.txt" {
			t.Errorf("%s appeared outside the workspace", en.Name())
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.outside, "secret.txt")); string(b) != secret+"\n" {
		t.Errorf("outside secret changed: %q", b)
	}
	t.Logf("%d of %d writes landed inside; the rest were refused", wrote, iterations)
}
