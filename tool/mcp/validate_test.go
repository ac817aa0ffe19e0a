package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordingServer is a go-sdk server whose tools record the arguments of
// every call that reaches it. Its raw handlers validate nothing, so what
// they record is exactly what the client sent.
type recordingServer struct {
	srv  *sdk.Server
	url  string
	mu   sync.Mutex
	got  map[string][]string // tool -> arguments received
	tool func(name string, schema string)
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	r := &recordingServer{got: map[string][]string{}}
	r.tool = func(name, schema string) {
		var m map[string]any
		if err := json.Unmarshal([]byte(schema), &m); err != nil {
			t.Fatalf("schema of %s: %v", name, err)
		}
		r.srv.AddTool(&sdk.Tool{Name: name, InputSchema: m}, func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			r.mu.Lock()
			r.got[name] = append(r.got[name], string(req.Params.Arguments))
			r.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ran " + name}}}, nil
		})
	}
	r.url = rawServer(t, func(s *sdk.Server) { r.srv = s })
	return r
}

func (r *recordingServer) received(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got[name]...)
}

const strictSchema = `{
	"type": "object",
	"properties": {
		"path": {"type": "string"},
		"count": {"type": "integer", "minimum": 1},
		"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}}
	},
	"required": ["path"],
	"additionalProperties": false
}`

// ADVERSARIAL 31: arguments an MCP server's schema refuses are refused
// before the call, with a message naming the field and the rule, and the
// server never sees them.
func TestClientInvalidArgumentsNeverReachTheServer(t *testing.T) {
	r := newRecordingServer(t)
	r.tool("strict", strictSchema)
	// A schema as zod-to-json-schema writes it (draft-07), as most npm
	// servers send.
	r.tool("draft7", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"n":{"type":"number"}},"required":["n"],"additionalProperties":false}`)
	r.tool("big", `{"type":"object","properties":{"q":{"type":"string","description":"`+strings.Repeat("long words ", 1000)+`"}},"required":["q"]}`)
	c := connect(t, ServerConfig{Name: "srv", URL: r.url}, nil)
	tools := c.Tools()
	ctx := context.Background()

	for _, tc := range []struct {
		args string
		want []string // in the message, besides the common parts
	}{
		{``, []string{`missing required field "path"`}},
		{`{}`, []string{`missing required field "path"`}},
		{`{"path": 5}`, []string{"at path:", "type"}},
		{`{"path": "a", "count": "2"}`, []string{"at count:", "type"}},
		{`{"path": "a", "count": 1.5}`, []string{"at count:", "type"}},
		{`{"path": "a", "count": 0}`, []string{"at count:", "minimum"}},
		{`{"path": "a", "opts": {"depth": "deep"}}`, []string{"at opts.depth:", "type"}},
		{`{"path": "a", "extra": true}`, []string{`unknown field "extra"`, "the fields are: count, opts, path"}},
		{`{"pth": "a"}`, []string{`unknown field "pth"`, `missing required field "path"`}},
	} {
		res := call(t, ctx, tools, "srv_strict", tc.args)
		if !res.IsError {
			t.Errorf("arguments %s: not an error: %+v", tc.args, res)
			continue
		}
		want := append([]string{"Invalid arguments for srv_strict: ", "The tool was not run.", `"additionalProperties":false`}, tc.want...)
		for _, w := range want {
			if !strings.Contains(res.Content, w) {
				t.Errorf("arguments %s: message lacks %q:\n%s", tc.args, w, res.Content)
			}
		}
	}
	if res := call(t, ctx, tools, "srv_draft7", `{"n": "1", "m": 2}`); !res.IsError || !strings.Contains(res.Content, `unknown field "m"`) {
		t.Errorf("draft-07 schema, unknown field: %+v", res)
	}
	if res := call(t, ctx, tools, "srv_draft7", `{"n": "1"}`); !res.IsError || !strings.Contains(res.Content, "at n:") {
		t.Errorf("draft-07 schema, wrong type: %+v", res)
	}
	res := call(t, ctx, tools, "srv_big", `{}`)
	if !res.IsError || !strings.Contains(res.Content, `missing required field "q"`) || !strings.HasSuffix(res.Content, "...") || len(res.Content) > maxSchemaInMessage+300 {
		t.Errorf("big schema: %d bytes, %.200q...", len(res.Content), res.Content)
	}
	for _, name := range []string{"strict", "draft7", "big"} {
		if got := r.received(name); len(got) != 0 {
			t.Errorf("the server received calls of %s with invalid arguments: %q", name, got)
		}
	}

	// Valid arguments still reach the server, exactly as sent.
	valid := `{"path":"a","count":2,"opts":{"depth":3}}`
	if res := call(t, ctx, tools, "srv_strict", valid); res.IsError || res.Content != "ran strict" {
		t.Errorf("valid arguments: %+v", res)
	}
	if res := call(t, ctx, tools, "srv_draft7", `{"n": 1.5}`); res.IsError || res.Content != "ran draft7" {
		t.Errorf("valid draft-07 arguments: %+v", res)
	}
	if got := r.received("strict"); len(got) != 1 || got[0] != valid {
		t.Errorf("the server received %q, want exactly [%s]", got, valid)
	}
}

// A schema jsonschema-go cannot resolve does not block the tool: its
// arguments go to the server unvalidated, and the logger hears about it
// once, not on every listing.
func TestClientUnresolvableSchemaPassesThrough(t *testing.T) {
	r := newRecordingServer(t)
	r.tool("remote_ref", `{"type":"object","properties":{"x":{"$ref":"https://schemas.example.com/x.json"}},"required":["x"]}`)
	r.tool("lookahead", `{"type":"object","properties":{"id":{"type":"string","pattern":"^(?!tmp)"}},"required":["id"],"additionalProperties":false}`)
	r.tool("strict", strictSchema)
	log := &syncWriter{w: &strings.Builder{}}
	c := connect(t, ServerConfig{Name: "srv", URL: r.url}, &Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	ctx := context.Background()

	// Arguments these schemas would refuse reach the server.
	for _, tc := range []struct{ tool, args string }{
		{"remote_ref", `{}`},
		{"lookahead", `{"id":5,"other":true}`},
	} {
		if res := call(t, ctx, c.Tools(), "srv_"+tc.tool, tc.args); res.IsError || res.Content != "ran "+tc.tool {
			t.Errorf("%s %s: %+v", tc.tool, tc.args, res)
		}
		if got := r.received(tc.tool); len(got) != 1 || got[0] != tc.args {
			t.Errorf("%s: the server received %q, want [%s]", tc.tool, got, tc.args)
		}
	}
	// The other tools of the server are still checked.
	if res := call(t, ctx, c.Tools(), "srv_strict", `{}`); !res.IsError || !strings.Contains(res.Content, `missing required field "path"`) {
		t.Errorf("strict beside unresolvable schemas: %+v", res)
	}

	// A new listing (a tool added, then an unchanged refresh) resolves and
	// logs only what is new.
	r.tool("later", `{"type":"object","properties":{"y":{"$ref":"https://schemas.example.com/y.json"}}}`)
	for range 2 {
		if err := c.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if res := call(t, ctx, c.Tools(), "srv_later", `{"y":1}`); res.IsError {
		t.Errorf("later: %+v", res)
	}
	logged := log.String()
	for _, name := range []string{"remote_ref", "lookahead", "later"} {
		if n := strings.Count(logged, "tool="+name+" "); n != 1 {
			t.Errorf("tool %s: logged %d times, want once:\n%s", name, n, logged)
		}
	}
	if strings.Contains(logged, "tool=strict ") {
		t.Errorf("the resolvable schema was logged about:\n%s", logged)
	}
	if !strings.Contains(logged, "cannot resolve remote schemas") || !strings.Contains(logged, "pattern") {
		t.Errorf("the log does not say why:\n%s", logged)
	}
}

// Over stdio too, against loom's own test server: a wrong type is refused
// by the client (the server's echo would have answered with a decoding
// error of its own).
func TestClientStdioInvalidArguments(t *testing.T) {
	c := connect(t, stdioConfig(t, "t", nil), nil)
	res := call(t, context.Background(), c.Tools(), "t_echo", `{"text": 5}`)
	if !res.IsError || !strings.HasPrefix(res.Content, "Invalid arguments for t_echo: at text: ") || !strings.Contains(res.Content, "The tool was not run.") {
		t.Errorf("echo with a number: %+v", res)
	}
	if res := call(t, context.Background(), c.Tools(), "t_echo", `{"text": "ok", "more": 1}`); res.IsError || res.Content != "echo: ok" {
		t.Errorf("an extra field where the schema allows it: %+v", res)
	}
}

func TestResolveArgSchema(t *testing.T) {
	for _, bad := range []string{
		`{"type":"object","properties":{"x":{"$ref":"https://example.com/x.json"}}}`,
		`{"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)b"}}}`,
		`{"type":"object","properties":{"x":{"type":5}}}`,
		`{"type":"object","$vocabulary":{"https://example.com/v":true}}`,
	} {
		if s, err := resolveArgSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: resolved (%+v), want an error", bad, s)
		}
	}
	s, err := resolveArgSchema(json.RawMessage(strictSchema))
	if err != nil {
		t.Fatal(err)
	}
	if !s.closed {
		t.Error("additionalProperties false not seen")
	}
	if msg := s.check(map[string]any{"path": "a", "count": float64(3)}); msg != "" {
		t.Errorf("valid arguments refused: %s", msg)
	}
	var nilSchema *argSchema
	if msg := nilSchema.check(map[string]any{"anything": 1}); msg != "" {
		t.Errorf("no schema refused arguments: %s", msg)
	}
	// patternProperties admit fields that are not properties.
	s, err = resolveArgSchema(json.RawMessage(`{"type":"object","properties":{"a":{}},"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if msg := s.check(map[string]any{"a": 1, "x-b": "c"}); msg != "" {
		t.Errorf("a pattern property refused: %s", msg)
	}
	if msg := s.check(map[string]any{"a": 1, "y": "c"}); msg == "" {
		t.Error("a field matching neither a property nor a pattern accepted")
	}
}
