package shell

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCover(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	for _, d := range []string{"a/.ssh", "a/src", "b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/.ssh/id_rsa", "a/.netrc", "a/notes", "b/x"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"a/keys": "a/.ssh", "a/key": "a/.ssh/id_rsa", "a/up": "a", // to hidden, or holding it: dropped
		"a/tob": "b", "a/tonotes": "a/notes", "a/dangling": "nowhere", // elsewhere: their targets
	}
	for l, target := range links {
		if err := os.Symlink(filepath.Join(root, target), filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	hidden := realPaths([]string{filepath.Join(root, "a/.ssh"), filepath.Join(root, "a/.netrc"), filepath.Join(root, "not/there")})
	var c coverage
	c.cover(root, hidden)
	rel := func(ps []string) []string {
		out := []string{}
		for _, p := range ps {
			r, _ := filepath.Rel(root, p)
			out = append(out, r)
		}
		slices.Sort(out)
		return out
	}
	if got, want := rel(c.dirs), []string{"a/src", "b", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("dirs %v, want %v", got, want)
	}
	if got, want := rel(c.files), []string{"a/notes", "a/notes"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	if got, want := rel(c.walked), []string{".", "a"}; !slices.Equal(got, want) {
		t.Errorf("walked %v, want %v", got, want)
	}

	// A root that is hidden, or below a hidden path, grants nothing.
	var none coverage
	none.cover(filepath.Join(root, "a/.ssh"), hidden)
	if len(none.dirs)+len(none.files)+len(none.walked) != 0 {
		t.Errorf("a hidden root was covered: %+v", none)
	}
}

func TestDefaultHidden(t *testing.T) {
	h := DefaultHidden("/home/u")
	for _, want := range []string{"/home/u/.ssh", "/home/u/.aws", "/home/u/.netrc", "/etc/shadow"} {
		if !slices.Contains(h, want) {
			t.Errorf("DefaultHidden lacks %s", want)
		}
	}
	for _, p := range DefaultHidden("") {
		if !strings.HasPrefix(p, "/etc/") {
			t.Errorf("DefaultHidden(\"\") has %s, which is not a system file", p)
		}
	}
}

// Without Landlock, a sandbox that is required refuses to run the command
// (and says why); one that is not runs it unconfined.
func TestSandboxUnavailable(t *testing.T) {
	saved := landlockABI
	t.Cleanup(func() { landlockABI = saved })
	marker := filepath.Join(t.TempDir(), "ran")
	for _, abi := range []int{0, 3} {
		landlockABI = func() int { return abi }
		tl := newTestTool(t, &Config{Sandbox: &Sandbox{Require: true}})
		res := call(t, tl, t.Context(), Args{Command: "touch " + marker})
		if !res.IsError || !strings.Contains(res.Content, "sandbox could not confine it") {
			t.Errorf("ABI %d, required: %s", abi, res.Content)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ABI %d: the command ran although the sandbox was required", abi)
		}
		if d, ok := SandboxLevel(); abi == 0 && (ok || !strings.HasPrefix(d, "none")) {
			t.Errorf("SandboxLevel() = %q, %v without Landlock", d, ok)
		}
		if desc := tl.Spec().Description; abi == 0 && strings.Contains(desc, "sandbox") {
			t.Errorf("the description promises a sandbox the kernel lacks: %s", desc)
		}
	}
	landlockABI = func() int { return 0 }
	tl := newTestTool(t, &Config{Sandbox: &Sandbox{}})
	res := call(t, tl, t.Context(), Args{Command: "touch " + marker + " && echo ran"})
	if res.IsError || !strings.Contains(res.Content, "ran") {
		t.Errorf("a sandbox that is not required, without Landlock: %s", res.Content)
	}
}
