package fs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomkit/loom/internal/sensitive"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/fs"
)

const key = "-----BEGIN OPENSSH PRIVATE KEY----- KEY-MATERIAL"

// homeEnv is a workspace at a home directory holding credentials, with the
// file tools hiding the credential stores of that home (as the CLI does
// with the user's own).
func homeEnv(t *testing.T) *env {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	base := t.TempDir()
	home := filepath.Join(base, "home")
	e := newEnvAt(t, home, &fs.Options{Hidden: sensitive.Credentials(home)})
	e.file(".ssh/id_rsa", key+"\n")
	e.file(".aws/credentials", "aws_secret_access_key = KEY-MATERIAL\n")
	e.file(".netrc", "machine example.com password KEY-MATERIAL\n")
	e.file("notes.txt", "plain notes\n")
	e.symlink(".ssh", "keys")                // a link to a credential directory
	e.symlink(".ssh/id_rsa", "key.txt")      // a link to a credential file
	e.symlink("../../.aws", "sub/dir/cloud") // through ..
	return e
}

// newEnvAt is newEnv with the workspace at dir.
func newEnvAt(t *testing.T, dir string, opts *fs.Options) *env {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ts, err := fs.New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	e := &env{t: t, ws: dir, outside: t.TempDir(), ts: ts}
	e.set, err = tool.NewSet(ts.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// noKey fails the test when a result shows credential material.
func (e *env) noKey(what, content string) {
	e.t.Helper()
	if strings.Contains(content, "KEY-MATERIAL") {
		e.t.Errorf("%s shows a credential: %q", what, content)
	}
}

// The file tools refuse the paths the shell sandbox hides from commands,
// however they are named: directly, by an absolute path, through a
// symbolic link, in another case; walks skip them.
func TestCredentialPathsRefused(t *testing.T) {
	e := homeEnv(t)
	abs := filepath.Join(e.ws, ".ssh", "id_rsa")
	for _, p := range []string{".ssh/id_rsa", "./.ssh/../.ssh/id_rsa", abs, "keys/id_rsa", "key.txt", ".aws/credentials", "sub/dir/cloud/credentials", ".netrc"} {
		e.noKey("read_file "+p, e.fails("read_file", map[string]any{"path": p}, "credential"))
	}
	for _, p := range []string{".ssh", "keys", "sub/dir/cloud", ".aws"} {
		e.noKey("list_dir "+p, e.fails("list_dir", map[string]any{"path": p}, "credential"))
		e.noKey("grep in "+p, e.fails("grep", map[string]any{"pattern": "KEY", "path": p}, "credential"))
	}
	for _, p := range []string{".ssh/id_rsa", "key.txt", ".netrc"} {
		e.noKey("grep "+p, e.fails("grep", map[string]any{"pattern": "KEY", "path": p}, "credential"))
	}
	// Walks pass them by and say so.
	out := e.ok("grep", map[string]any{"pattern": "KEY|plain"})
	e.noKey("grep .", out)
	if !strings.Contains(out, "notes.txt") || !strings.Contains(out, "credential") {
		t.Errorf("grep . = %q, want the notes and a word on what was skipped", out)
	}
	for _, pat := range []string{"**", "**/*", ".ssh/*", "keys/*", "**/id_rsa", "**/credentials"} {
		got := e.call("glob", map[string]any{"pattern": pat}).Content
		if strings.Contains(got, ".ssh/id_rsa") || strings.Contains(got, ".aws/credentials") || strings.Contains(got, "keys/id_rsa") {
			t.Errorf("glob %s = %q lists what a credential store holds", pat, got)
		}
	}
	// The names in the home directory itself are no secret.
	if got := e.ok("list_dir", map[string]any{"path": "."}); !strings.Contains(got, ".ssh/") || !strings.Contains(got, "notes.txt") {
		t.Errorf("list_dir . = %q", got)
	}
	// Nothing is written into them either.
	before := snapshot(t, e.ws)
	e.fails("write_file", map[string]any{"path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}, "credential")
	e.fails("write_file", map[string]any{"path": "keys/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}, "credential")
	e.fails("edit_file", map[string]any{"path": ".netrc", "old_string": "password", "new_string": "login"}, "credential")
	if after := snapshot(t, e.ws); after != before {
		t.Errorf("the workspace changed:\n%s\nwas\n%s", after, before)
	}
	// Other files read as before.
	if got := e.ok("read_file", map[string]any{"path": "notes.txt"}); !strings.Contains(got, "plain notes") {
		t.Errorf("read_file notes.txt = %q", got)
	}
}

// A workspace inside a credential store reads nothing of it; an empty,
// non-nil Hidden list hides nothing.
func TestHiddenWorkspaceAndOptOut(t *testing.T) {
	e := homeEnv(t)
	inside := newEnvAt(t, filepath.Join(e.ws, ".ssh"), &fs.Options{Hidden: sensitive.Credentials(e.ws)})
	inside.noKey("read_file in ~/.ssh", inside.fails("read_file", map[string]any{"path": "id_rsa"}, "credential"))
	inside.fails("list_dir", map[string]any{}, "credential")
	inside.fails("grep", map[string]any{"pattern": "KEY"}, "credential")
	inside.fails("glob", map[string]any{"pattern": "*"}, "credential")

	open := newEnvAt(t, e.ws, &fs.Options{Hidden: []string{}})
	if got := open.ok("read_file", map[string]any{"path": ".ssh/id_rsa"}); !strings.Contains(got, "KEY-MATERIAL") {
		t.Errorf("with nothing hidden, read_file .ssh/id_rsa = %q", got)
	}
}

// A link swapped between a plain directory and a credential directory
// while read_file and grep run never lets a credential through: what was
// opened is checked, not only the path.
func TestCredentialSwapRace(t *testing.T) {
	e := homeEnv(t)
	e.file("plain/id_rsa", "harmless\n")
	iterations := 2000
	if testing.Short() {
		iterations = 200
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	link := filepath.Join(e.ws, "k")
	wg.Go(func() {
		tmp := filepath.Join(e.ws, "k.swap")
		for i := 0; !stop.Load(); i++ {
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink(".ssh", tmp)
			} else {
				os.Symlink("plain", tmp)
			}
			os.Rename(tmp, link)
		}
	})
	read := 0
	for range iterations {
		res := e.call("read_file", map[string]any{"path": "k/id_rsa"})
		e.noKey("read_file k/id_rsa", res.Content)
		if !res.IsError {
			read++
		}
		e.noKey("grep k/id_rsa", e.call("grep", map[string]any{"pattern": "KEY|harmless", "path": "k/id_rsa"}).Content)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d of %d reads got the plain file; the rest were refused", read, iterations)
}

// read_file and grep ask before they read an environment file (.env,
// .env.local, ...), as bash asks before cat .env: by name, through a
// link, or as the files a search names with include. A search that does
// not name them passes them by.
func TestEnvReadsNeedApproval(t *testing.T) {
	e := newEnv(t, nil)
	e.file(".env", "API_KEY=KEY-MATERIAL\n")
	e.file("web/.env.local", "TOKEN=KEY-MATERIAL\n")
	e.file("main.go", "package main // KEY\n")
	e.symlink(".env", "settings.txt")
	e.symlink(filepath.Join(e.outside, "secret.txt"), "out.txt") // refused by os.Root: nothing to approve
	tools := map[string]tool.Tool{}
	for _, tl := range e.ts.Tools() {
		tools[tl.Spec().Name] = tl
	}
	for _, c := range []struct {
		tool, args string
		want       bool
	}{
		{"read_file", `{"path":".env"}`, true},
		{"read_file", `{"path":"web/.env.local"}`, true},
		{"read_file", `{"path":"WEB/.ENV.LOCAL"}`, true},
		{"read_file", `{"path":"settings.txt"}`, true},
		{"read_file", `{"path":"missing/.envrc"}`, true},
		{"read_file", `{"path":"main.go"}`, false},
		{"read_file", `{"path":"out.txt"}`, false},
		{"read_file", `{"path":"environment.go"}`, false},
		{"grep", `{"pattern":"KEY"}`, false},
		{"grep", `{"pattern":"KEY","path":"web"}`, false},
		{"grep", `{"pattern":"KEY","include":"*.go"}`, false},
		{"grep", `{"pattern":"KEY","path":".env"}`, true},
		{"grep", `{"pattern":"KEY","path":"settings.txt"}`, true},
		{"grep", `{"pattern":"KEY","include":".env*"}`, true},
		{"grep", `{"pattern":"KEY","include":"**/.env.local"}`, true},
		{"grep", `{"pattern":"KEY","include":"web/.ENV*"}`, true},
		{"glob", `{"pattern":"**/.env*"}`, false},
		{"list_dir", `{"path":"web"}`, false},
	} {
		if got := tool.NeedsApproval(tools[c.tool], json.RawMessage(c.args)); got != c.want {
			t.Errorf("%s %s: needs approval %v, want %v", c.tool, c.args, got, c.want)
		}
	}
	out := e.ok("grep", map[string]any{"pattern": "KEY"})
	if strings.Contains(out, "KEY-MATERIAL") || !strings.Contains(out, "main.go") || !strings.Contains(out, ".env") {
		t.Errorf("grep without approval = %q: want main.go, and a note on the .env files passed by", out)
	}
	// Named (and so approved), they are searched.
	if out := e.ok("grep", map[string]any{"pattern": "KEY", "include": ".env*"}); !strings.Contains(out, "KEY-MATERIAL") {
		t.Errorf("grep include .env* = %q", out)
	}
}
