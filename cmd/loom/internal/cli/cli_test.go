package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseAllowsFlagsAfterArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		yes  bool
		out  string
	}{
		{[]string{"fix", "it"}, []string{"fix", "it"}, false, "text"},
		{[]string{"--yes", "fix", "it"}, []string{"fix", "it"}, true, "text"},
		{[]string{"fix", "--yes", "it", "--output", "jsonl"}, []string{"fix", "it"}, true, "jsonl"},
		{[]string{"--", "--yes", "-x"}, []string{"--yes", "-x"}, false, "text"},
		{[]string{"fix", "--", "--yes"}, []string{"fix", "--yes"}, false, "text"},
	} {
		o := &options{set: map[string]bool{}}
		fs := agentFlags("run", o, true)
		pos, err := parse(fs, c.args, o.set)
		if err != nil {
			t.Errorf("parse(%q): %v", c.args, err)
			continue
		}
		if !slices.Equal(pos, c.pos) || o.yes != c.yes || o.output != c.out {
			t.Errorf("parse(%q) = %q, yes %v, output %s; want %q, %v, %s", c.args, pos, o.yes, o.output, c.pos, c.yes, c.out)
		}
		if c.yes != o.set["yes"] {
			t.Errorf("parse(%q): set[yes] = %v", c.args, o.set["yes"])
		}
	}
}

func TestParseModel(t *testing.T) {
	for _, c := range []struct {
		spec, provider, name string
		ok                   bool
	}{
		{"openai:gpt-4o", "openai", "gpt-4o", true},
		{"Anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", true},
		{"ollama:qwen2.5-coder:14b", "ollama", "qwen2.5-coder:14b", true},
		{"openrouter:anthropic/claude-sonnet-4.5", "openrouter", "anthropic/claude-sonnet-4.5", true},
		{"gpt-4o", "", "", false},
		{"openai:", "", "", false},
		{"foo:bar", "", "", false},
		{"", "", "", false},
	} {
		ms, err := parseModel(c.spec)
		var ue *usageError
		if !c.ok {
			if !errors.As(err, &ue) {
				t.Errorf("parseModel(%q) = %v, want a usage error", c.spec, err)
			}
			continue
		}
		if err != nil || ms.provider != c.provider || ms.name != c.name {
			t.Errorf("parseModel(%q) = %+v, %v", c.spec, ms, err)
		}
	}
}

func TestEndpoint(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	openai, _ := parseModel("openai:m")
	ollama, _ := parseModel("ollama:m")
	anth, _ := parseModel("anthropic:m")
	for _, c := range []struct {
		name     string
		ms       modelSpec
		flag     string
		getenv   func(string) string
		base     string
		key      string
		errNames string
	}{
		{"vendor URL needs the key", openai, "", env(), "", "", "OPENAI_API_KEY"},
		{"vendor URL with the key", openai, "", env("OPENAI_API_KEY", "k"), "https://api.openai.com/v1", "k", ""},
		{"local URL needs no key", openai, "http://localhost:8000/v1/", env(), "http://localhost:8000/v1", "", ""},
		{"env URL", openai, "", env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1", "", ""},
		{"flag wins over env", openai, "http://a:1", env("OPENAI_BASE_URL", "http://b:2"), "http://a:1", "", ""},
		{"ollama needs no key", ollama, "", env(), "http://localhost:11434/v1", "", ""},
		{"anthropic key", anth, "", env(), "", "", "ANTHROPIC_API_KEY"},
		{"not http", openai, "file:///etc", env(), "", "", "http or https"},
	} {
		base, key, err := endpoint(c.ms, c.flag, c.getenv)
		if c.errNames != "" {
			if err == nil || !strings.Contains(err.Error()+fmt.Sprint(err.(*usageError).hint), c.errNames) {
				t.Errorf("%s: err = %v, want one naming %s", c.name, err, c.errNames)
			}
			continue
		}
		if err != nil || base != c.base || key != c.key {
			t.Errorf("%s: %q %q %v; want %q %q", c.name, base, key, err, c.base, c.key)
		}
	}
}

func TestReadInstructions(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	write := func(root, name, body string) {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(outside, "secret", "TOP SECRET\n")
	write(dir, "AGENTS.md", "Top.\n@a.md\n@loop.md\n@missing.md\n@link\n")
	write(dir, "a.md", "A.\n@b/c.md\n")
	write(dir, "b/c.md", "C.\n@d.md\n")
	write(dir, "b/d.md", "not reached: relative to the root, not to b/\n")
	write(dir, "d.md", "D.\n@e.md\n")
	write(dir, "e.md", "E is too deep.\n")
	write(dir, "loop.md", "Loop.\n@loop.md\n")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Skip(err)
	}
	text, warnings := readInstructions(dir)
	for _, want := range []string{"Top.", "A.", "C.", "D.", "Loop."} {
		if !strings.Contains(text, want) {
			t.Errorf("instructions lack %q:\n%s", want, text)
		}
	}
	for _, bad := range []string{"TOP SECRET", "E is too deep", "not reached"} {
		if strings.Contains(text, bad) {
			t.Errorf("instructions hold %q:\n%s", bad, text)
		}
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{"@missing.md not imported", "@link not imported", "imports itself", "more than 3 deep"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}

	big := t.TempDir()
	write(big, "LOOM.md", strings.Repeat("x", maxInstructionFile+1))
	if text, warnings := readInstructions(big); text != "" || len(warnings) != 1 || !strings.Contains(warnings[0], "larger than") {
		t.Errorf("a file over the limit: %q, %v", text, warnings)
	}
	if text, warnings := readInstructions(t.TempDir()); text != "" || warnings != nil {
		t.Errorf("no instruction files: %q, %v", text, warnings)
	}
}

func TestOwnerGone(t *testing.T) {
	host, _ := os.Hostname()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := cmd.Process.Pid
	for _, c := range []struct {
		owner string
		gone  bool
	}{
		{fmt.Sprintf("loom:%s:%d:abcd", host, os.Getpid()), false},
		{fmt.Sprintf("loom:%s:%d:abcd", host, dead), processGone(dead)},
		{fmt.Sprintf("loom:other-host:%d:abcd", dead), false},
		{fmt.Sprintf("%s:%d:abcd", host, dead), false}, // not a loom owner
		{"loom:x", false},
	} {
		if got := ownerGone(c.owner); got != c.gone {
			t.Errorf("ownerGone(%q) = %v, want %v", c.owner, got, c.gone)
		}
	}
	if newOwner() == newOwner() {
		t.Error("two owners of one process are equal")
	}
	if ownerGone(newOwner()) {
		t.Error("this process's own owner is gone")
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8765": true, "localhost:0": true, "[::1]:80": true, "127.1.2.3:1": true,
		"0.0.0.0:8765": false, ":8765": false, "192.168.1.2:80": false, "example.com:80": false, "nonsense": false,
	} {
		if err := loopbackOnly(addr); (err == nil) != ok {
			t.Errorf("loopbackOnly(%q) = %v", addr, err)
		}
	}
}

func TestMainWithoutBinary(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(Env{Args: []string{"version"}, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code != 0 || !strings.HasPrefix(out.String(), "loom ") {
		t.Errorf("version: %d %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	code = Main(Env{Args: []string{"run", "--max-turns", "x", "p"}, Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
	if code != ExitUsage || !strings.Contains(errb.String(), "--max-turns") {
		t.Errorf("bad flag: %d %q", code, errb.String())
	}
}
