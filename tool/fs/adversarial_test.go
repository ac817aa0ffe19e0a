package fs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomkit/loom/tool/shell"
)

// ADVERSARIAL 44 as written: ws/d is swapped, 10,000 times, between a
// directory and a symbolic link to / while write_file writes d/<name>.
// Nothing named <name>, nor a temporary file for it, ever appears in /.
func TestSwapRaceWithRootLink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	iterations := 10000
	if testing.Short() {
		iterations = 500
	}
	e := newEnv(t, nil)
	d := filepath.Join(e.ws, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	token := fmt.Sprintf("loom-swap-race-%d-%d", os.Getpid(), iterations)
	escaped := func() []string {
		entries, err := os.ReadDir("/")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, en := range entries {
			if strings.Contains(en.Name(), token) {
				out = append(out, en.Name())
			}
		}
		return out
	}
	t.Cleanup(func() {
		for _, name := range escaped() {
			os.Remove("/" + name) // never leave a trace, even when the test fails
		}
	})
	if got := escaped(); len(got) != 0 {
		t.Fatalf("/ already holds %v", got)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		// Only this goroutine replaces d, so what Lstat saw is what is
		// removed: a link is unlinked, never followed.
		tmp := filepath.Join(e.ws, "d.swap")
		for i := 0; !stop.Load(); i++ {
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink("/", tmp)
			} else {
				os.Mkdir(tmp, 0o755)
			}
			if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				os.RemoveAll(d)
			} else {
				os.Remove(d)
			}
			os.Rename(tmp, d)
		}
	})
	wrote := 0
	for i := range iterations {
		name := fmt.Sprintf("d/%s-%d", token, i%8)
		if res := e.call("write_file", map[string]any{"path": name, "content": "pwned"}); !res.IsError {
			wrote++
		}
	}
	stop.Store(true)
	wg.Wait()
	if got := escaped(); len(got) != 0 {
		t.Errorf("files appeared in /: %v", got)
	}
	t.Logf("%d of %d writes landed inside the workspace; the rest were refused", wrote, iterations)
}

// ADVERSARIAL 46, first half: links the model makes with the shell tool
// (ln -s) to the outside are not followed by the file tools. (The second
// half, a sandbox stopping bash itself from following them, needs an OS
// sandbox loom does not have.)
func TestShellMadeLinksNotFollowed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("bash is not installed")
	}
	e := newEnv(t, nil)
	bash := shell.New(&shell.Config{Dir: e.ws})
	script := fmt.Sprintf("ln -s %q pw && ln -s %q out && ln -s ../outside rel && ls -l", filepath.Join(e.outside, "secret.txt"), e.outside)
	args, _ := json.Marshal(map[string]any{"command": script})
	res, err := bash.Call(context.Background(), args)
	if err != nil || res.IsError {
		t.Fatalf("bash: %+v, %v", res, err)
	}
	outsideBefore := snapshot(t, e.outside)
	for _, p := range []string{"pw", "out/secret.txt", "rel/secret.txt"} {
		e.fails("read_file", map[string]any{"path": p}, "outside the workspace")
		e.fails("edit_file", map[string]any{"path": p, "old_string": secret, "new_string": "pwned"}, "outside the workspace")
		e.fails("write_file", map[string]any{"path": p, "content": "pwned"}, "outside the workspace")
	}
	for _, args := range []map[string]any{{"pattern": "SECRET"}, {"pattern": "SECRET", "path": "out"}} {
		if res := e.call("grep", args); strings.Contains(res.Content, secret) {
			t.Errorf("grep %v followed a link out: %q", args, res.Content)
		}
	}
	if got := snapshot(t, e.outside); got != outsideBefore {
		t.Errorf("outside changed:\nbefore %s\nafter  %s", outsideBefore, got)
	}
}
