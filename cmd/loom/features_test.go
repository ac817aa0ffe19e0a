package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
)

func TestFlags(t *testing.T) {
	t.Run("--no-stream", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("whole")}})
		h.run("run", "--no-stream", "x").want(t, 0)
		h.run("run", "x").want(t, 0)
		reqs := h.srv.Requests()
		if reqs[0].Stream || !reqs[1].Stream {
			t.Errorf("stream flags = %v, %v; want false with --no-stream, true without", reqs[0].Stream, reqs[1].Stream)
		}
	})
	t.Run("--system", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("ok")}})
		h.writeFile("AGENTS.md", "Use tabs.\n")
		h.run("run", "--system", "You are a terse reviewer.", "x").want(t, 0)
		sys := h.srv.Requests()[0].Decoded.System
		if !strings.HasPrefix(sys, "You are a terse reviewer.") || !strings.Contains(sys, "Use tabs.") || strings.Contains(sys, "You are loom") {
			t.Errorf("system = %q, want the flag's text followed by AGENTS.md", sys)
		}
	})
	t.Run("--workspace", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{
			call("c1", "read_file", `{"path":"elsewhere.txt"}`), bash("c2", "pwd"), loomtest.Text("ok"),
		}})
		other := t.TempDir()
		os.WriteFile(filepath.Join(other, "elsewhere.txt"), []byte("from the other workspace\n"), 0o644)
		r := h.run("run", "--workspace", other, "--output", "jsonl", "read").want(t, 0)
		res := ofType(lines(t, r.stdout), "tool_result")
		real, _ := filepath.EvalSymlinks(other)
		if len(res) != 2 || !strings.Contains(fmt.Sprint(res[0]["content"]), "from the other workspace") || !strings.Contains(fmt.Sprint(res[1]["content"]), real) {
			t.Errorf("the tools did not work in --workspace: %v", res)
		}
		if sys := h.srv.Requests()[0].Decoded.System; !strings.Contains(sys, real) {
			t.Errorf("the system prompt does not name the workspace:\n%s", sys)
		}
	})
	t.Run("--base-url wins over OPENAI_BASE_URL", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("unused")}})
		other := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("from the flag's server")}})
		defer other.Close()
		r := h.run("run", "--base-url", other.OpenAIURL(), "x").want(t, 0)
		if r.stdout != "from the flag's server\n" || len(h.srv.Requests()) != 0 {
			t.Errorf("stdout %q; env server got %d requests", r.stdout, len(h.srv.Requests()))
		}
	})
	t.Run("no key needed for a local server", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("keyless")}})
		delete(h.env, "OPENAI_API_KEY")
		r := h.run("run", "x").want(t, 0)
		if r.stdout != "keyless\n" {
			t.Errorf("stdout = %q", r.stdout)
		}
		if auth := h.srv.Requests()[0].Header.Get("Authorization"); auth != "" {
			t.Errorf("sent Authorization %q without a key", auth)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{APIKey: "sk-ant-test", Anthropic: []loomtest.Turn{
			call("toolu_1", "list_dir", `{}`), loomtest.Text("Anthropic answered."),
		}})
		h.env["ANTHROPIC_API_KEY"] = "sk-ant-test"
		h.env["ANTHROPIC_BASE_URL"] = h.srv.AnthropicURL()
		r := h.run("run", "--model", "anthropic:claude-test", "x").want(t, 0)
		reqs := h.srv.Requests()
		if r.stdout != "Anthropic answered.\n" || len(reqs) != 2 || reqs[0].Format != loomtest.Anthropic {
			t.Fatalf("%d requests\n%s", len(reqs), r)
		}
		if sys := reqs[1].Decoded.System; !strings.Contains(sys, "You are loom") {
			t.Errorf("the system prompt did not reach the second Anthropic request: %q", sys)
		}
		if !strings.Contains(r.stderr, "anthropic:claude-test") {
			t.Errorf("stderr does not name the model\n%s", r)
		}
	})
	t.Run("prompt from stdin", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("ok")}})
		h.runIn("a prompt\nover two lines\n", "run", "-").want(t, 0)
		if got := h.srv.Requests()[0].Decoded.Messages[0].Text(); got != "a prompt\nover two lines" {
			t.Errorf("prompt = %q", got)
		}
	})
	t.Run("flags after the prompt", func(t *testing.T) {
		h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("ok")}})
		r := h.run("run", "fix", "it", "--output", "jsonl").want(t, 0)
		if !strings.HasPrefix(r.stdout, `{"type":"run_started"`) {
			t.Errorf("--output after the prompt was not honoured:\n%s", r)
		}
		if got := h.srv.Requests()[0].Decoded.Messages[0].Text(); got != "fix it" {
			t.Errorf("prompt = %q", got)
		}
	})
}

// TestInstructionFiles: AGENTS.md and LOOM.md are added to the system
// prompt, with their @imports, read through the workspace sandbox: links
// out of the workspace are not followed (ADVERSARIAL 53).
func TestInstructionFiles(t *testing.T) {
	h := newHarness(t, loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("ok")}})
	secret := filepath.Join(h.home, ".ssh", "id_rsa")
	os.MkdirAll(filepath.Dir(secret), 0o700)
	os.WriteFile(secret, []byte("-----BEGIN OPENSSH PRIVATE KEY----- very secret\n"), 0o600)
	h.writeFile("AGENTS.md", "Run go test before you finish.\n@docs/style.md\n@key\n@../outside.md\n")
	h.writeFile("docs/style.md", "Wrap lines at 100 columns.\n")
	h.writeFile("LOOM.md", "Answer in English.\n")
	os.WriteFile(filepath.Join(filepath.Dir(h.ws), "outside.md"), []byte("outside the workspace\n"), 0o644)
	if err := os.Symlink(secret, filepath.Join(h.ws, "key")); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	r := h.run("run", "x").want(t, 0)
	sys := h.srv.Requests()[0].Decoded.System
	for _, want := range []string{"Run go test before you finish.", "Wrap lines at 100 columns.", "Answer in English.", "(AGENTS.md)", "(LOOM.md)"} {
		if !strings.Contains(sys, want) {
			t.Errorf("the system prompt lacks %q:\n%s", want, sys)
		}
	}
	body := string(h.srv.Requests()[0].Body)
	for _, leak := range []string{"very secret", "outside the workspace"} {
		if strings.Contains(body, leak) {
			t.Errorf("%q reached the model server", leak)
		}
	}
	if !strings.Contains(r.stderr, "@key not imported") || !strings.Contains(r.stderr, "@../outside.md not imported") {
		t.Errorf("stderr does not say what was left out\n%s", r)
	}

	// AGENTS.md itself a link out of the workspace: not read at all.
	os.Remove(filepath.Join(h.ws, "AGENTS.md"))
	os.Symlink(secret, filepath.Join(h.ws, "AGENTS.md"))
	r = h.run("run", "x").want(t, 0)
	if strings.Contains(string(h.srv.Requests()[1].Body), "very secret") {
		t.Error("a linked AGENTS.md pointing outside the workspace was sent to the model")
	}
	if !strings.Contains(r.stderr, "AGENTS.md not added") {
		t.Errorf("stderr does not say AGENTS.md was left out\n%s", r)
	}
}

func TestInstructionFileFIFO(t *testing.T) {
	// ADVERSARIAL 47: a FIFO named AGENTS.md must not block loom.
	h := newHarness(t, loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("ok")}})
	if err := mkfifo(filepath.Join(h.ws, "AGENTS.md")); err != nil {
		t.Skip("cannot make a FIFO here:", err)
	}
	r := h.run("run", "x").want(t, 0)
	if !strings.Contains(r.stderr, "not a regular file") {
		t.Errorf("stderr does not say AGENTS.md was refused\n%s", r)
	}
}

func TestVersionAndHelp(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	v := h.run("version").want(t, 0)
	if !strings.HasPrefix(v.stdout, "loom ") || !strings.Contains(v.stdout, "go1.") {
		t.Errorf("version printed %q", v.stdout)
	}
	help := h.run("help").want(t, 0)
	for _, want := range []string{"loom run", "loom resume", "loom runs", "loom demo", "loom mcp serve", "--model", "--max-turns", "--yes", "--output", "--no-stream", "--store", "--system", "--workspace", "--base-url", "--mcp", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "130"} {
		if !strings.Contains(help.stdout, want) {
			t.Errorf("loom help lacks %q", want)
		}
	}
	for _, args := range [][]string{{"run", "--help"}, {"resume", "-h"}, {"runs", "--help"}, {"help", "mcp"}, {"mcp", "--help"}, {"demo", "--help"}, {"--help"}} {
		r := h.run(args...).want(t, 0)
		if !strings.Contains(r.stdout, "Usage") && !strings.Contains(r.stdout, "loom run") {
			t.Errorf("loom %v printed no usage:\n%s", args, r)
		}
	}
}

func TestDemo(t *testing.T) {
	h := newHarness(t, loomtest.Config{})
	// The demo needs nothing from the environment: no key, no network.
	h.env = map[string]string{"PATH": h.env["PATH"], "HOME": h.home}
	r := h.run("demo").want(t, 0)
	if !strings.Contains(r.stdout, "All 8 scenarios behaved") || strings.Contains(r.stdout, "FAILED") {
		t.Errorf("demo output:\n%s", r)
	}
	for _, want := range []string{"[request 2] system = ", "retrying in", "401", "outside the workspace", "turn budget of 3", "Refused", "hello, world"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the demo does not show %q", want)
		}
	}
}

var _ = llm.Usage{}
