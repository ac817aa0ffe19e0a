package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/loomtest"
)

// With the workspace at the home directory, the file tools refuse the
// credential stores bash's sandbox hides (directly and through links), and
// reading a .env file needs approval as cat .env does: without --yes
// nothing of them reaches the model.
func TestFileToolsKeepCredentials(t *testing.T) {
	const material = "KEY-MATERIAL-7f3a"
	args := func(v map[string]string) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
		loomtest.ToolCalls(
			loomtest.Call("c1", "read_file", args(map[string]string{"path": ".ssh/id_rsa"})),
			loomtest.Call("c2", "read_file", args(map[string]string{"path": "project/deploy_key"})),
			loomtest.Call("c3", "grep", args(map[string]string{"pattern": "KEY-MATERIAL"})),
			loomtest.Call("c4", "list_dir", args(map[string]string{"path": ".ssh"})),
			loomtest.Call("c5", "read_file", args(map[string]string{"path": "project/.env"})),
			loomtest.Call("c6", "grep", args(map[string]string{"pattern": "KEY", "include": ".env*"})),
		),
		loomtest.Text("Nothing to see."),
	}})
	write := func(rel, content string) {
		p := filepath.Join(h.home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(".ssh/id_rsa", "-----BEGIN OPENSSH PRIVATE KEY----- "+material+"\n")
	write("project/.env", "OPENAI_API_KEY="+material+"\n")
	write("project/main.go", "package main\n")
	if err := os.Symlink("../.ssh/id_rsa", filepath.Join(h.home, "project", "deploy_key")); err != nil {
		t.Fatal(err)
	}
	r := h.run("run", "--output", "jsonl", "--workspace", h.home, "look around").want(t, 0)
	results := map[string]map[string]any{}
	for _, l := range ofType(lines(t, r.stdout), "tool_result") {
		results[l["id"].(string)] = l
	}
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		res, ok := results[id]
		if !ok {
			t.Fatalf("no result for %s\n%s", id, r.stdout)
		}
		content := res["content"].(string)
		if strings.Contains(content, material) {
			t.Errorf("%s shows a credential: %q", id, content)
		}
		switch id {
		case "c1", "c2", "c4":
			if res["is_error"] != true || !strings.Contains(content, "credential") {
				t.Errorf("%s: %v", id, res)
			}
		case "c5", "c6":
			if res["is_error"] != true || !strings.Contains(content, "approv") {
				t.Errorf("%s was not held for approval: %v", id, res)
			}
		}
	}
	for i := range h.srv.Requests() {
		if strings.Contains(h.requestText(i), material) {
			t.Fatalf("request %d sent a credential to the model", i)
		}
	}
}
