package fs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomkit/loom/tool/fs"
)

func TestListDir(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxEntries: 4})
	e.file("b.txt", "12345")
	e.file("a/x.go", "")
	e.symlink("b.txt", "c-link")
	got := e.ok("list_dir", map[string]any{})
	want := ". (3 entries):\na/\nb.txt (5 bytes)\nc-link -> b.txt"
	if got != want {
		t.Errorf("list_dir = %q, want %q", got, want)
	}
	if got := e.ok("list_dir", map[string]any{"path": "a"}); got != "a (1 entries):\nx.go (0 bytes)" {
		t.Errorf("list_dir a = %q", got)
	}
	e.file("empty/.keep", "")
	e.fails("list_dir", map[string]any{"path": "b.txt"}, "not a directory", "read_file")
	e.fails("list_dir", map[string]any{"path": "zzz"}, "does not exist")
	for i := range 10 {
		e.file(fmt.Sprintf("many/f%02d", i), "")
	}
	if got := e.ok("list_dir", map[string]any{"path": "many"}); !strings.Contains(got, "f03") || strings.Contains(got, "f04") || !strings.Contains(got, "6 more entries") {
		t.Errorf("capped list: %q", got)
	}
}

func TestGlob(t *testing.T) {
	e := newEnv(t, nil)
	for _, f := range []string{"main.go", "cmd/loom/main.go", "cmd/loom/flags.go", "pkg/a/a_test.go", "pkg/a/a.go", "README.md", ".git/config", ".git/hooks/pre-commit.go", "node/x.js"} {
		e.file(f, "x")
	}
	cases := map[string]string{
		"*.go":             "main.go",
		"**/*.go":          "cmd/loom/flags.go\ncmd/loom/main.go\nmain.go\npkg/a/a.go\npkg/a/a_test.go",
		"cmd/**/main.go":   "cmd/loom/main.go",
		"pkg/**":           "pkg/a/\npkg/a/a.go\npkg/a/a_test.go",
		"**/*_test.go":     "pkg/a/a_test.go",
		"cmd/*":            "cmd/loom/",
		"**/[Rr]EADME.*":   "README.md",
		".git/*":           ".git/config\n.git/hooks/",
		"cmd/loom/main.go": "cmd/loom/main.go",
	}
	for pattern, want := range cases {
		if got := e.ok("glob", map[string]any{"pattern": pattern}); got != want {
			t.Errorf("glob(%q) = %q, want %q", pattern, got, want)
		}
	}
	if got := e.ok("glob", map[string]any{"pattern": "**/*.rs"}); !strings.HasPrefix(got, "No path matches") {
		t.Errorf("no match: %q", got)
	}
	e.fails("glob", map[string]any{"pattern": "[a-"}, "bad pattern")
	e.fails("glob", map[string]any{"pattern": ""}, "empty")
	e.fails("glob", map[string]any{"pattern": "nope/*.go"}, "no match", "does not exist")
}

func TestGlobBounded(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxEntries: 3, MaxVisit: 50})
	for i := range 30 {
		e.file(fmt.Sprintf("d%02d/f.txt", i), "")
	}
	got := e.ok("glob", map[string]any{"pattern": "**/f.txt"})
	if strings.Count(got, "f.txt") != 3 || !strings.Contains(got, "more matches not shown") || !strings.Contains(got, "stopped after visiting 50") {
		t.Errorf("bounded glob: %q", got)
	}
}

func TestGrep(t *testing.T) {
	e := newEnv(t, nil)
	e.file("a.go", "package a\n\nfunc Handler() {}\n// TODO: fix\n")
	e.file("sub/b.go", "package sub\nfunc otherHandler() {}\n")
	e.file("sub/c.txt", "todo later\nfunc in text\n")
	e.file("bin.dat", "func \x00 binary")
	e.file(".git/x.go", "func hidden()")
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"pattern": `func \w*Handler`}, "a.go:3: func Handler() {}\nsub/b.go:2: func otherHandler() {}\n[1 binary files skipped]"},
		{map[string]any{"pattern": `(?i)todo`, "include": "*.txt"}, "sub/c.txt:1: todo later\n"},
		{map[string]any{"pattern": `^func`, "path": "sub", "include": "*.go"}, "sub/b.go:2: func otherHandler() {}\n"},
		{map[string]any{"pattern": `^package`, "path": "a.go"}, "a.go:1: package a\n"},
		{map[string]any{"pattern": `func`, "include": "sub/**/*.txt"}, "sub/c.txt:2: func in text\n"},
		{map[string]any{"pattern": `nothing here`}, `No matches for "nothing here" in 4 files searched. [1 binary files skipped]`},
	}
	for _, c := range cases {
		if got := e.ok("grep", c.args); got != c.want {
			t.Errorf("grep(%v) = %q, want %q", c.args, got, c.want)
		}
	}
	e.fails("grep", map[string]any{"pattern": `(?<=a)b`}, "not a valid Go regular expression", "RE2")
	e.fails("grep", map[string]any{"pattern": `x`, "path": "nope"}, "does not exist")
	e.fails("grep", map[string]any{"pattern": `x`, "include": "[a-"}, "include", "bad pattern")
}

func TestGrepBounded(t *testing.T) {
	e := newEnv(t, &fs.Options{MaxMatches: 5, MaxGrepFileSize: 1000})
	e.file("many.txt", strings.Repeat("hit\n", 100))
	e.file("big.txt", strings.Repeat("hit\n", 1000))
	e.file("long.txt", "hit "+strings.Repeat("é", 400)+"\n")
	got := e.ok("grep", map[string]any{"pattern": "hit"})
	if strings.Count(got, "\n") != 5 || !strings.Contains(got, "stopped after 5 matching lines") {
		t.Errorf("max matches: %q", got)
	}
	got = e.ok("grep", map[string]any{"pattern": "hit", "path": "long.txt"})
	if !strings.Contains(got, "[line cut]") || len(got) > 400 {
		t.Errorf("long line: %d bytes %q", len(got), got)
	}
	got = e.ok("grep", map[string]any{"pattern": "nomatch"})
	if !strings.Contains(got, "1 files larger than 1000 bytes skipped") {
		t.Errorf("big file: %q", got)
	}
}

// ADVERSARIAL 49: odd names in the workspace do not corrupt output.
func TestOddNamesShownQuoted(t *testing.T) {
	e := newEnv(t, nil)
	e.file("bad\xffname.txt", "hit\n")
	e.file("two\nlines.txt", "hit\n")
	for _, c := range []struct{ name, args string }{
		{"list_dir", `{}`},
		{"glob", `{"pattern":"*.txt"}`},
		{"grep", `{"pattern":"hit"}`},
	} {
		got := e.ok(c.name, c.args)
		if !strings.Contains(got, `"two\nlines.txt"`) || !strings.Contains(got, `"bad\xffname.txt"`) {
			t.Errorf("%s: %q", c.name, got)
		}
	}
}
