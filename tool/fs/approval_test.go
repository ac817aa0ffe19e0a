package fs_test

import (
	"encoding/json"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
	"github.com/loomkit/loom/tool/fs"
)

func needs(t *testing.T, e *env, name, path string) bool {
	t.Helper()
	tl, ok := e.set.Lookup(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	m := map[string]any{"path": path}
	switch name {
	case "write_file":
		m["content"] = "x"
	case "edit_file":
		m["old_string"], m["new_string"] = "a", "b"
	case "glob", "grep":
		m = map[string]any{"pattern": path}
	}
	args, _ := json.Marshal(m)
	return tool.NeedsApproval(tl, args)
}

// ADVERSARIAL 52: writes to git internals, env files and agent files need
// approval, also through a symbolic link, also to create them.
func TestProtectedWritesNeedApproval(t *testing.T) {
	e := newEnv(t, nil)
	e.file(".git/config", "[core]\n")
	e.file("docs/guide.md", "")
	e.symlink(".git/config", "innocent")
	e.symlink(".git", "g")
	protected := []string{
		".git/config", ".git/hooks/pre-commit", ".git", "sub/.git/config", ".GIT/config", "./.git/config",
		"docs/../.git/config", ".env", ".env.local", "svc/.env.production", ".envrc",
		"AGENTS.md", "pkg/AGENTS.md", "LOOM.md", ".loom/settings.json", ".loom", ".mcp.json", "agents.md",
		"innocent", "g/hooks/post-checkout",
		e.ts.Dir() + "/.git/config",
	}
	for _, p := range protected {
		for _, name := range []string{"write_file", "edit_file"} {
			if !needs(t, e, name, p) {
				t.Errorf("%s %q needs no approval; want it to", name, p)
			}
		}
	}
	free := []string{"main.go", "docs/guide.md", ".gitignore", ".github/workflows/ci.yml", "env.go", "docs/.environment.md/x", "AGENTS.md.bak/x", "my.loom/x"}
	for _, p := range free {
		for _, name := range []string{"write_file", "edit_file"} {
			if needs(t, e, name, p) {
				t.Errorf("%s %q needs approval; want none", name, p)
			}
		}
	}
	for _, name := range []string{"read_file", "list_dir", "grep", "glob"} {
		if needs(t, e, name, ".git/config") {
			t.Errorf("%s needs approval", name)
		}
	}
	// The spec default says no: approval is decided per call.
	tl, _ := e.set.Lookup("write_file")
	if tl.Spec().NeedsApproval {
		t.Error("write_file's spec needs approval for every call")
	}
	// Middleware made with tool.Wrap keeps the decision.
	if !tool.NeedsApproval(tool.Chain(tl, tool.Recover), json.RawMessage(`{"path":".env","content":""}`)) {
		t.Error("wrapped write_file lost its approval decision")
	}
	// Set.NeedsApproval sees it too.
	if !e.set.NeedsApproval(llm.ToolCall{Name: "write_file", Arguments: `{"path":".git/hooks/pre-push","content":"x"}`}) {
		t.Error("Set.NeedsApproval missed a protected write")
	}
}

func TestApprovalOptions(t *testing.T) {
	e := newEnv(t, &fs.Options{WritesNeedApproval: true})
	if !needs(t, e, "write_file", "main.go") || !needs(t, e, "edit_file", "main.go") {
		t.Error("WritesNeedApproval did not make every write need approval")
	}
	tl, _ := e.set.Lookup("edit_file")
	if !tl.Spec().NeedsApproval {
		t.Error("WritesNeedApproval not in the spec")
	}
	e = newEnv(t, &fs.Options{Protected: []string{"secrets/**"}})
	if !needs(t, e, "write_file", "secrets/k") || needs(t, e, "write_file", ".git/config") {
		t.Error("custom Protected not honoured")
	}
	e = newEnv(t, &fs.Options{Protected: []string{}})
	if needs(t, e, "write_file", ".git/config") {
		t.Error("empty Protected still protects")
	}
	if _, err := fs.New(t.TempDir(), &fs.Options{Protected: []string{"[a-"}}); err == nil {
		t.Error("bad protected pattern accepted")
	}
}

func TestEffects(t *testing.T) {
	e := newEnv(t, nil)
	want := map[string]llm.Effect{
		"read_file": llm.EffectReadOnly, "list_dir": llm.EffectReadOnly, "glob": llm.EffectReadOnly, "grep": llm.EffectReadOnly,
		"write_file": llm.EffectIdempotent, "edit_file": llm.EffectDestructive,
	}
	names := e.set.Names()
	if len(names) != 6 || names[0] != "read_file" || names[5] != "grep" {
		t.Errorf("tools %v", names)
	}
	for _, tl := range e.ts.Tools() {
		if got := tl.Spec().Effect; got != want[tl.Spec().Name] {
			t.Errorf("%s effect %v, want %v", tl.Spec().Name, got, want[tl.Spec().Name])
		}
	}
	for _, tl := range e.ts.ReadOnlyTools() {
		if tl.Spec().Effect != llm.EffectReadOnly {
			t.Errorf("ReadOnlyTools holds %s", tl.Spec().Name)
		}
	}
}
