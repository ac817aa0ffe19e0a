package mcp

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func env(vars map[string]string) *LoadOptions {
	return &LoadOptions{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
}

func TestParseConfig(t *testing.T) {
	data := `{
	  "otherClientSetting": true,
	  "mcpServers": {
	    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"], "env": {"DEBUG": "${DEBUG:-0}"}},
	    "docs": {"type": "http", "url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
	    "plain": {"type": "stdio", "command": "srv", "env": {"PRICE": "$5"}}
	  }
	}`
	got, err := ParseConfig([]byte(data), env(map[string]string{"HOME": "/home/u", "HOST": "example.com", "TOKEN": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerConfig{
		{Name: "docs", URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"}},
		{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/u/src"}, Env: map[string]string{"DEBUG": "0"}},
		{Name: "plain", Command: "srv", Env: map[string]string{"PRICE": "$5"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, data string
		field      string // the ConfigError's Field
		msg        string // part of the message
	}{
		{"not json", `{"mcpServers": `, "", "not a JSON object"},
		{"array at top", `[]`, "", "not a JSON object"},
		{"no mcpServers", `{"servers": {}}`, "mcpServers", "missing"},
		{"mcpServers not object", `{"mcpServers": []}`, "mcpServers", "must be an object"},
		{"mcpServers null", `{"mcpServers": null}`, "mcpServers", "must be an object"},
		{"entry not object", `{"mcpServers": {"a": "npx srv"}}`, "", "must be an object like"},
		{"neither", `{"mcpServers": {"a": {}}}`, "", "give command"},
		{"both", `{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}`, "", "not both"},
		{"unknown key", `{"mcpServers": {"a": {"comand": "x"}}}`, "comand", "unknown key"},
		{"args not array", `{"mcpServers": {"a": {"command": "x", "args": "-v"}}}`, "args", "must be an array of strings"},
		{"args of numbers", `{"mcpServers": {"a": {"command": "x", "args": [1]}}}`, "args", "must be an array of strings"},
		{"env of numbers", `{"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}`, "env", "must be an object of strings"},
		{"bad url", `{"mcpServers": {"a": {"url": "ftp://h/x"}}}`, "url", "not an http"},
		{"headers on command", `{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}`, "headers", "belong to url servers"},
		{"args on url", `{"mcpServers": {"a": {"url": "http://h/", "args": ["x"]}}}`, "", "belong to command servers"},
		{"sse", `{"mcpServers": {"a": {"type": "sse", "url": "http://h/sse"}}}`, "type", "SSE transport is not supported"},
		{"unknown type", `{"mcpServers": {"a": {"type": "ws", "url": "http://h/"}}}`, "type", "not a transport"},
		{"stdio without command", `{"mcpServers": {"a": {"type": "stdio", "url": "http://h/"}}}`, "command", "needs a command"},
		{"unset variable", `{"mcpServers": {"a": {"command": "${NOPE}"}}}`, "command", "not set"},
		{"unclosed variable", `{"mcpServers": {"a": {"command": "x", "args": ["${HOME"]}}}`, "args[0]", "unclosed"},
		{"bad variable name", `{"mcpServers": {"a": {"url": "http://h/${1X}"}}}`, "url", "not a variable name"},
		{"bad env name", `{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`, "env", "not an environment variable name"},
		{"empty name", `{"mcpServers": {"": {"command": "x"}}}`, "name", "needs a name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.data), env(nil))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError", err)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("%v does not match ErrConfig", err)
			}
			if ce.Field != tt.field {
				t.Errorf("field %q, want %q (%v)", ce.Field, tt.field, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("%q does not say %q", err, tt.msg)
			}
		})
	}
}

func TestParseConfigUnsetVariableIsTyped(t *testing.T) {
	_, err := ParseConfig([]byte(`{"mcpServers": {"a": {"url": "http://h/", "headers": {"X": "${TOKEN}"}}}}`), env(nil))
	if !errors.Is(err, ErrUnsetVariable) {
		t.Fatalf("got %v, want ErrUnsetVariable", err)
	}
	if !strings.Contains(err.Error(), `MCP server "a"`) || !strings.Contains(err.Error(), "TOKEN") {
		t.Errorf("%q does not name the server and the variable", err)
	}
}

func TestLoadConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".mcp.json")
	if _, err := LoadConfigFile(path, nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: got %v, want fs.ErrNotExist", err)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "srv"}, "b": {"url": "http://127.0.0.1:1/mcp"}}}`), 0o644)
	got, err := LoadConfigFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Dir != dir || got[1].Dir != "" {
		t.Errorf("dirs %q, %q: want the command server to run in %q", got[0].Dir, got[1].Dir, dir)
	}
	os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": 1}}}`), 0o644)
	_, err = LoadConfigFile(path, nil)
	if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("got %v, want an error starting with the file name", err)
	}
}

func TestParseFlag(t *testing.T) {
	tests := []struct {
		in   string
		want ServerConfig
	}{
		{"fs=npx -y @modelcontextprotocol/server-filesystem .", ServerConfig{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "."}}},
		{"x=srv", ServerConfig{Name: "x", Command: "srv", Args: []string{}}},
		{`q=srv 'a b' "c \"d\" \\e" f\ g ''`, ServerConfig{Name: "q", Command: "srv", Args: []string{"a b", `c "d" \e`, "f g", ""}}},
		{"eq=srv --opt=1", ServerConfig{Name: "eq", Command: "srv", Args: []string{"--opt=1"}}},
		{"web=https://example.com/mcp", ServerConfig{Name: "web", URL: "https://example.com/mcp"}},
		{" sp = srv ", ServerConfig{Name: "sp", Command: "srv", Args: []string{}}},
	}
	for _, tt := range tests {
		got, err := ParseFlag(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

func TestParseFlagErrors(t *testing.T) {
	for _, in := range []string{"", "srv", "=srv", "x=", "x=   ", `x=srv 'a`, `x=srv "a`, `x=srv a\`} {
		_, err := ParseFlag(in)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: got %v, want a *ConfigError", in, err)
			continue
		}
		if !strings.Contains(err.Error(), "--mcp "+in) {
			t.Errorf("%q: %q does not quote the flag", in, err)
		}
	}
}

func FuzzParseFlag(f *testing.F) {
	f.Add(`fs=npx -y "@scope/pkg" 'a b' c\ d`)
	f.Add("w=https://h/mcp")
	f.Add(`x="unterminated`)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := ParseFlag(in)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%q: untyped error %v", in, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%q: parsed into an invalid config: %v", in, err)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"a": {"command": "x", "args": ["${A:-b}"]}}}`))
	f.Add([]byte(`{"mcpServers": {"a": {"url": "http://h/", "headers": {"k": "v"}}}}`))
	f.Add([]byte(`{"mcpServers": {"a": {"type": "sse"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, err := ParseConfig(data, env(map[string]string{"A": "1"}))
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for _, s := range servers {
			if err := s.Validate(); err != nil {
				t.Fatalf("parsed into an invalid config: %v", err)
			}
		}
	})
}

func TestEnviron(t *testing.T) {
	got := environ([]string{"PATH=/bin", "SECRET=x", "HOME=/h"}, map[string]string{"SECRET": "y", "B": "2", "A": "1"})
	want := []string{"PATH=/bin", "HOME=/h", "A=1", "B=2", "SECRET=y"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := environ([]string{}, nil); len(got) != 0 {
		t.Errorf("an empty base gave %q", got)
	}
}
