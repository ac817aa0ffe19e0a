package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ServerConfig says how to reach one MCP server: either a command to run
// that speaks MCP over its stdin and stdout (Command, Args, Env, Dir), or
// the URL of a streamable HTTP endpoint (URL, Headers). Exactly one of
// Command and URL is set.
type ServerConfig struct {
	// Name identifies the server; its tools are exposed as Name_tool.
	Name string `json:"name"`

	// Command is the program to run (looked up in PATH when it has no
	// slash), with Args. Env adds to (or overrides) the environment the
	// process inherits (see [Options].BaseEnv). Dir is its working
	// directory; empty means the current one.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"`

	// URL is an http or https streamable HTTP endpoint; Headers are sent
	// with every request (for example Authorization).
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// IsHTTP reports whether c reaches its server over streamable HTTP.
func (c ServerConfig) IsHTTP() bool { return c.URL != "" }

// Validate returns a [*ConfigError] when c cannot be used: no name, both or
// neither of Command and URL, a URL that is not http(s), or an empty
// environment variable or header name.
func (c ServerConfig) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Server: c.Name, Field: field, Err: fmt.Errorf(format, args...)}
	}
	switch {
	case strings.TrimSpace(c.Name) == "":
		return bad("name", "a server needs a name")
	case c.Command != "" && c.URL != "":
		return bad("", "give either command (a local server) or url (a remote one), not both")
	case c.Command == "" && c.URL == "":
		return bad("", "give command (a local server run over stdio) or url (a streamable HTTP server)")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil {
			return bad("url", "%v", err)
		}
		if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return bad("url", "%q is not an http:// or https:// URL", c.URL)
		}
		if len(c.Args) > 0 || len(c.Env) > 0 || c.Dir != "" {
			return bad("", "args, env and dir belong to command servers; a url server takes headers")
		}
		for k := range c.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				return bad("headers", "%q is not a header name", k)
			}
		}
		return nil
	}
	if len(c.Headers) > 0 {
		return bad("headers", "headers belong to url servers; a command server takes env")
	}
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("env", "%q is not an environment variable name", k)
		}
	}
	return nil
}

// ErrConfig is wrapped by every [*ConfigError].
var ErrConfig = errors.New("invalid MCP server configuration")

// ConfigError reports an MCP server configuration that cannot be used.
// Source is the file or flag it came from (empty for a [ServerConfig] built
// in code), Server the server's name and Field the offending key, where
// known. It matches [ErrConfig] with errors.Is.
type ConfigError struct {
	Source string
	Server string
	Field  string
	Err    error
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	switch {
	case e.Server != "":
		fmt.Fprintf(&b, "MCP server %q: ", e.Server)
	case e.Source == "":
		b.WriteString("MCP servers: ")
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "%s: ", e.Field)
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause, and [ErrConfig].
func (e *ConfigError) Unwrap() []error { return []error{e.Err, ErrConfig} }

// LoadOptions configures [LoadConfigFile] and [ParseConfig]. The zero value
// reads the process environment.
type LoadOptions struct {
	// LookupEnv resolves ${VAR} references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// LoadConfigFile reads an .mcp.json file (see [ParseConfig]). Command
// servers run in the directory that holds the file, so that relative paths
// in their arguments mean what they mean to the project. A missing file is
// an error matching [fs.ErrNotExist].
func LoadConfigFile(path string, opts *LoadOptions) ([]ServerConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	servers, err := ParseConfig(data, opts)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Source == "" {
			ce.Source = path
		}
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	for i := range servers {
		if servers[i].Command != "" {
			servers[i].Dir = dir
		}
	}
	return servers, nil
}

// allowedKeys are the keys a server entry of .mcp.json may have.
var allowedKeys = []string{"type", "command", "args", "env", "url", "headers"}

// ParseConfig parses the .mcp.json format other MCP clients use:
//
//	{"mcpServers": {
//	    "fs":   {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {"DEBUG": "1"}},
//	    "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
//	}}
//
// An entry may also say "type": "stdio" or "type": "http" (also written
// "streamable-http"); "sse", the older HTTP transport, is refused. Other keys
// are refused too, so that a misspelt "comand" does not go unnoticed; other
// top-level keys are ignored, as other clients keep their own settings
// there.
//
// Environment variables are expanded in command, args, env values, url and
// header values: ${VAR} is the value of VAR and an error when VAR is not
// set; ${VAR:-default} falls back to default when VAR is unset or empty.
// A '$' not followed by '{' is kept as it is.
//
// Servers are returned sorted by name. Every problem is a [*ConfigError].
func ParseConfig(data []byte, opts *LoadOptions) ([]ServerConfig, error) {
	lookup := os.LookupEnv
	if opts != nil && opts.LookupEnv != nil {
		lookup = opts.LookupEnv
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, &ConfigError{Err: fmt.Errorf("not a JSON object: %v", err)}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, &ConfigError{Field: "mcpServers", Err: errors.New(`missing: the file must look like {"mcpServers": {"name": {"command": ...}}}`)}
	}
	var entries map[string]json.RawMessage
	if err := strictObject(raw, &entries); err != nil {
		return nil, &ConfigError{Field: "mcpServers", Err: fmt.Errorf("must be an object of servers by name: %v", err)}
	}
	var out []ServerConfig
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		c, err := parseEntry(name, entries[name], lookup)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func parseEntry(name string, raw json.RawMessage, lookup func(string) (string, bool)) (ServerConfig, error) {
	bad := func(field string, err error) error {
		return &ConfigError{Server: name, Field: field, Err: err}
	}
	var fields map[string]json.RawMessage
	if err := strictObject(raw, &fields); err != nil {
		return ServerConfig{}, bad("", fmt.Errorf(`must be an object like {"command": "...", "args": [...]} or {"url": "..."}: %v`, err))
	}
	for k := range fields {
		if !slices.Contains(allowedKeys, k) {
			return ServerConfig{}, bad(k, fmt.Errorf("unknown key (the keys are %s)", strings.Join(allowedKeys, ", ")))
		}
	}
	c := ServerConfig{Name: name}
	var typ string
	decode := func(key string, v any, want string) error {
		r, ok := fields[key]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(r, v); err != nil {
			return bad(key, fmt.Errorf("must be %s, not %s", want, abbreviate(r)))
		}
		return nil
	}
	if err := errors.Join(
		decode("type", &typ, "a string"),
		decode("command", &c.Command, "a string"),
		decode("args", &c.Args, "an array of strings"),
		decode("env", &c.Env, "an object of strings"),
		decode("url", &c.URL, "a string"),
		decode("headers", &c.Headers, "an object of strings"),
	); err != nil {
		return ServerConfig{}, err
	}
	switch typ {
	case "":
	case "stdio":
		if c.Command == "" {
			return ServerConfig{}, bad("command", errors.New(`a "stdio" server needs a command`))
		}
	case "http", "streamable-http", "streamableHttp":
		if c.URL == "" {
			return ServerConfig{}, bad("url", fmt.Errorf("a %q server needs a url", typ))
		}
	case "sse":
		return ServerConfig{}, bad("type", errors.New(`the SSE transport is not supported; use the server's streamable HTTP endpoint ("type": "http")`))
	default:
		return ServerConfig{}, bad("type", fmt.Errorf(`%q is not a transport (use "stdio" or "http")`, typ))
	}

	var err error
	expand := func(field, s string) string {
		if err != nil {
			return s
		}
		var e error
		s, e = expandEnv(s, lookup)
		if e != nil {
			err = bad(field, e)
		}
		return s
	}
	c.Command = expand("command", c.Command)
	for i := range c.Args {
		c.Args[i] = expand(fmt.Sprintf("args[%d]", i), c.Args[i])
	}
	for k, v := range c.Env {
		c.Env[k] = expand("env."+k, v)
	}
	c.URL = expand("url", c.URL)
	for k, v := range c.Headers {
		c.Headers[k] = expand("headers."+k, v)
	}
	if err != nil {
		return ServerConfig{}, err
	}
	if err := c.Validate(); err != nil {
		return ServerConfig{}, err
	}
	return c, nil
}

// strictObject decodes raw into *v, which must be a map, and fails unless
// raw is a JSON object (null is refused too).
func strictObject(raw json.RawMessage, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("got %s", abbreviate(raw))
	}
	return json.Unmarshal(raw, v)
}

func abbreviate(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// ErrUnsetVariable is wrapped by the error for a ${VAR} whose VAR is not set.
var ErrUnsetVariable = errors.New("environment variable not set")

// expandEnv replaces ${VAR} and ${VAR:-default} in s.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s)
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name", ref, name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("${%s}: %w (set it, or write ${%s:-default})", name, ErrUnsetVariable, name)
		}
		b.WriteString(v)
	}
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ParseFlag parses the value of a --mcp flag: NAME=COMMAND ARGS... runs
// COMMAND with ARGS over stdio, and NAME=URL (http:// or https://) connects
// to a streamable HTTP server. The command line is split into words at
// spaces; single quotes keep everything up to the next single quote, double
// quotes keep everything up to the next double quote except that \" and \\
// are escapes, and a backslash outside quotes keeps the next character. No
// variables are expanded and no globs matched. Errors are [*ConfigError]s.
func ParseFlag(value string) (ServerConfig, error) {
	bad := func(name string, err error) error {
		return &ConfigError{Source: "--mcp " + value, Server: name, Err: err}
	}
	name, cmdline, ok := strings.Cut(value, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return ServerConfig{}, bad("", errors.New("want NAME=COMMAND [ARGS...] or NAME=URL, for example fs=npx -y @modelcontextprotocol/server-filesystem ."))
	}
	words, err := splitWords(cmdline)
	if err != nil {
		return ServerConfig{}, bad(name, err)
	}
	if len(words) == 0 {
		return ServerConfig{}, bad(name, errors.New("no command after '='"))
	}
	c := ServerConfig{Name: name}
	if len(words) == 1 && (strings.HasPrefix(words[0], "http://") || strings.HasPrefix(words[0], "https://")) {
		c.URL = words[0]
	} else {
		c.Command, c.Args = words[0], words[1:]
	}
	if err := c.Validate(); err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Source = "--mcp " + value
		}
		return ServerConfig{}, err
	}
	return c, nil
}

// splitWords splits a command line as described at [ParseFlag].
func splitWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // inside a word
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			in = true
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
