package fs

import (
	"path"
	"strings"
	"testing"
)

// FuzzRel checks that a path the tools accept is always a clean relative
// path inside the root, whatever the model sends.
func FuzzRel(f *testing.F) {
	for _, s := range []string{"a/b", "../x", "/etc/passwd", `C:\x`, `\\?\C:\x`, "a/../../b", "./a//b/", "a\x00b", "~", "..", "a/..", "x:y", "é/ü"} {
		f.Add(s)
	}
	ts, err := New(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	defer ts.Close()
	f.Fuzz(func(t *testing.T, p string) {
		rel, err := ts.rel(p, false)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty message")
			}
			return
		}
		if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) || path.Clean(rel) != rel {
			t.Fatalf("rel(%q) = %q, which is not clean and inside", p, rel)
		}
		if strings.ContainsAny(rel, "\x00\n\r\\") {
			t.Fatalf("rel(%q) = %q keeps a refused character", p, rel)
		}
	})
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"**/*.go", "a.go", true},
		{"**/*.go", "a/b/c.go", true},
		{"**", "a/b", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**", "a", true},
		{"*.go", "a/b.go", false},
		{"**/.git/**", ".git/config", true},
		{"**/.git/**", "x/.git/hooks/pre-commit", true},
		{"**/.env*", ".envrc", true},
		{"**/.env*", "env", false},
		{"a**b", "axxb", true},
		{"**/**/**/x", "a/b/x", true},
	}
	for _, c := range cases {
		g, err := compileGlob(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.match(c.name); got != c.want {
			t.Errorf("match(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	g, _ := compileGlob("src/**/*.go")
	for dir, want := range map[string]bool{".": true, "src": true, "src/a/b": true, "lib": false} {
		if got := g.mayMatchUnder(dir); got != want {
			t.Errorf("mayMatchUnder(%q) = %v, want %v", dir, got, want)
		}
	}
	if g.literalPrefix() != "src" {
		t.Errorf("literalPrefix = %q", g.literalPrefix())
	}
}

func TestRelInvalidUTF8(t *testing.T) {
	ts, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if _, err := ts.rel("a\xffb", false); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("invalid UTF-8 path: %v", err)
	}
}
