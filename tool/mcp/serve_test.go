package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loomkit/loom/internal/testimage"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

// serveTools is a set exercising every kind of result.
func serveTools(gotArgs chan<- string) []tool.Tool {
	return []tool.Tool{
		echoTool("echo"),
		newTool("fail", llm.EffectIdempotent, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Content: "no such file", IsError: true}, nil
		}),
		newTool("machinery", llm.EffectDestructive, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{}, errors.New("disk on fire")
		}),
		newTool("panics", llm.EffectDestructive, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			panic("oops")
		}),
		newTool("args", llm.EffectReadOnly, func(_ context.Context, args json.RawMessage) (llm.ToolResult, error) {
			gotArgs <- string(args)
			return llm.ToolResult{Content: "ok"}, nil
		}),
	}
}

// sdkClientIO connects a go-sdk client to s over pipes (as over stdio).
func sdkClientIO(t *testing.T, s *Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeIO(ctx, sr, sw) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, &sdk.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// sdkClientHTTP connects a go-sdk client to s over streamable HTTP.
func sdkClientHTTP(t *testing.T, s *Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	_, url := loopbackServer(t, s.Handler(nil))
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var transports = []struct {
	name    string
	connect func(*testing.T, *Server, *sdk.ClientOptions) *sdk.ClientSession
}{
	{"stdio", sdkClientIO},
	{"http", sdkClientHTTP},
}

func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d content blocks, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("got %T, want text", res.Content[0])
	}
	return tc.Text
}

func TestServe(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			gotArgs := make(chan string, 1)
			tools := serveTools(gotArgs)
			s, err := NewServer(tools, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs := tr.connect(t, s, nil)
			ctx := context.Background()

			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tools) != len(tools) {
				t.Fatalf("listed %d tools, want %d", len(list.Tools), len(tools))
			}
			// The go-sdk lists tools by name.
			specs := map[string]llm.ToolSpec{}
			for _, tl := range tools {
				specs[tl.Spec().Name] = tl.Spec()
			}
			for _, mt := range list.Tools {
				spec, ok := specs[mt.Name]
				if !ok || mt.Description != spec.Description {
					t.Errorf("tool %q %q, want one of %v with its description", mt.Name, mt.Description, specs)
				}
				var got, want any
				b, _ := json.Marshal(mt.InputSchema)
				json.Unmarshal(b, &got)
				json.Unmarshal(spec.Schema, &want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: schema %s, want %s", mt.Name, b, spec.Schema)
				}
				if eff := effectOf(mt.Annotations); eff != spec.Effect {
					t.Errorf("%s: annotations %+v read back as %v, want %v", mt.Name, mt.Annotations, eff, spec.Effect)
				}
			}

			callTool := func(name string, args any) *sdk.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return res
			}
			if res := callTool("echo", map[string]any{"text": "hi"}); res.IsError || text(t, res) != "echo: hi" {
				t.Errorf("echo: %+v %q", res.IsError, text(t, res))
			}
			if res := callTool("fail", nil); !res.IsError || text(t, res) != "no such file" {
				t.Errorf("fail: isError %v %q", res.IsError, text(t, res))
			}
			if res := callTool("machinery", nil); !res.IsError || !strings.Contains(text(t, res), "disk on fire") {
				t.Errorf("machinery: isError %v %q", res.IsError, text(t, res))
			}
			if res := callTool("panics", nil); !res.IsError || !strings.Contains(text(t, res), "panicked: oops") {
				t.Errorf("panics: isError %v %q", res.IsError, text(t, res))
			}
			callTool("args", nil)
			if got := <-gotArgs; got != "{}" {
				t.Errorf("a call without arguments reached the tool as %q, want {}", got)
			}
			callTool("args", map[string]any{"n": 1})
			if got := <-gotArgs; got != `{"n":1}` {
				t.Errorf("arguments reached the tool as %q", got)
			}
			if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "nope"}); err == nil {
				t.Error("calling an unknown tool succeeded")
			}
		})
	}
}

func TestServeCancellation(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			started, cancelled := make(chan struct{}), make(chan error, 1)
			block := newTool("block", llm.EffectReadOnly, func(ctx context.Context, _ json.RawMessage) (llm.ToolResult, error) {
				close(started)
				select {
				case <-ctx.Done():
					cancelled <- ctx.Err()
				case <-time.After(time.Minute):
					cancelled <- nil
				}
				return llm.ToolResult{Content: "done"}, nil
			})
			s, err := NewServer([]tool.Tool{block}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs := tr.connect(t, s, nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "block"})
				errc <- err
			}()
			<-started
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call returned %v", err)
			}
			// The client sent notifications/cancelled; the tool's context
			// must end because of it.
			if err := <-cancelled; err == nil {
				t.Error("the tool's context was not cancelled")
			}
		})
	}
}

func TestServeApproveSkipsToolsWithoutApproval(t *testing.T) {
	var asked []string
	s, err := NewServer([]tool.Tool{echoTool("look")}, &ServeOptions{Approve: func(_ context.Context, spec llm.ToolSpec, _ json.RawMessage) (bool, string) {
		asked = append(asked, spec.Name)
		return false, "the user said no"
	}})
	if err != nil {
		t.Fatal(err)
	}
	cs := sdkClientIO(t, s, nil)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "look", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("look: %v %+v", err, res)
	}
	if len(asked) != 0 {
		t.Errorf("asked about %v; a tool that needs no approval must not be asked about", asked)
	}
}

func TestServeApproveRefuses(t *testing.T) {
	rm := newTool("rm", llm.EffectDestructive, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{Content: "removed"}, nil
	})
	rm.spec.NeedsApproval = true
	var asked []string
	approve := func(_ context.Context, spec llm.ToolSpec, args json.RawMessage) (bool, string) {
		asked = append(asked, spec.Name+" "+string(args))
		return string(args) == `{"text":"ok"}`, "the user said no"
	}
	s, err := NewServer([]tool.Tool{rm}, &ServeOptions{Approve: approve})
	if err != nil {
		t.Fatal(err)
	}
	cs := sdkClientIO(t, s, nil)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "rm", Arguments: map[string]any{"text": "no"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(t, res), "the user said no") {
		t.Errorf("refused call: isError %v %q", res.IsError, text(t, res))
	}
	res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "rm", Arguments: map[string]any{"text": "ok"}})
	if err != nil || res.IsError || text(t, res) != "removed" {
		t.Errorf("approved call: %v %+v", err, res)
	}
	if want := []string{`rm {"text":"no"}`, `rm {"text":"ok"}`}; !reflect.DeepEqual(asked, want) {
		t.Errorf("asked %q, want %q", asked, want)
	}
}

func TestNewServerRejects(t *testing.T) {
	withSchema := func(name, schema string) tool.Tool {
		tl := echoTool(name)
		tl.spec.Schema = json.RawMessage(schema)
		return tl
	}
	tests := []struct {
		name  string
		tools []tool.Tool
		msg   string
	}{
		{"nil tool", []tool.Tool{echoTool("a"), nil}, "tool 2 of 2 is nil"},
		{"dotted name", []tool.Tool{echoTool("fs.read")}, "names are 1 to 64"},
		{"long name", []tool.Tool{echoTool(strings.Repeat("a", 65))}, "names are 1 to 64"},
		{"duplicate", []tool.Tool{echoTool("a"), echoTool("a")}, `two tools are named "a"`},
		{"schema not json", []tool.Tool{withSchema("a", `{`)}, "not a JSON object"},
		{"schema array", []tool.Tool{withSchema("a", `[]`)}, "not a JSON object"},
		{"schema of strings", []tool.Tool{withSchema("a", `{"type":"string"}`)}, `type is string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewServer(tt.tools, nil)
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want an error saying %q", err, tt.msg)
			}
		})
	}
	// No schema at all is served as an empty object schema.
	s, err := NewServer([]tool.Tool{withSchema("a", "")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := sdkClientIO(t, s, nil).ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(list.Tools[0].InputSchema); string(b) != `{"type":"object"}` {
		t.Errorf("schema %s", b)
	}
}

func TestServePagination(t *testing.T) {
	var tools []tool.Tool
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		tools = append(tools, echoTool(n))
	}
	s, err := NewServer(tools, &ServeOptions{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	cs := sdkClientIO(t, s, nil)
	first, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q; want 2 and a cursor", len(first.Tools), first.NextCursor)
	}
}

func TestServeSetToolsNotifies(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, err := NewServer([]tool.Tool{echoTool("a"), echoTool("b")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			notified := make(chan struct{}, 10)
			cs := tr.connect(t, s, &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
				notified <- struct{}{}
			}})
			if err := s.SetTools([]tool.Tool{echoTool("b"), echoTool("c")}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-notified:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/tools/list_changed")
			}
			list, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, mt := range list.Tools {
				got = append(got, mt.Name)
			}
			if want := []string{"b", "c"}; !reflect.DeepEqual(got, want) {
				t.Errorf("tools %v, want %v", got, want)
			}
			if err := s.SetTools([]tool.Tool{echoTool("x.y")}); err == nil {
				t.Error("SetTools took an invalid name")
			}
		})
	}
}

// A served tool's images become image blocks (bytes) and resource links
// (URLs), after its text; loom's own client reads the bytes back as the
// images of its result.
func TestServeImages(t *testing.T) {
	png := testimage.Make("png", 1, 1)
	result := llm.ToolResult{Content: "two pictures", Images: []llm.Image{
		{Data: png, MediaType: "image/png"},
		{URL: "https://example.com/chart.png", MediaType: "image/png"},
		{Data: []byte{1}},
	}}
	tools := []tool.Tool{
		newTool("pictures", llm.EffectReadOnly, func(context.Context, json.RawMessage) (llm.ToolResult, error) { return result, nil }),
		newTool("only-picture", llm.EffectReadOnly, func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{Images: result.Images[:1], IsError: true}, nil
		}),
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			s, err := NewServer(tools, nil)
			if err != nil {
				t.Fatal(err)
			}
			cs := tr.connect(t, s, nil)
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "pictures"})
			if err != nil {
				t.Fatal(err)
			}
			want := []sdk.Content{
				&sdk.TextContent{Text: "two pictures"},
				&sdk.ImageContent{Data: png, MIMEType: "image/png"},
				&sdk.ResourceLink{URI: "https://example.com/chart.png", Name: "image 2", MIMEType: "image/png"},
				&sdk.TextContent{Text: "[image 3 left out: it has data but no media type]"},
			}
			if res.IsError || !reflect.DeepEqual(res.Content, want) {
				got, _ := json.Marshal(res.Content)
				t.Errorf("content %s", got)
			}
			res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "only-picture"})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !reflect.DeepEqual(res.Content, want[1:2]) {
				got, _ := json.Marshal(res.Content)
				t.Errorf("only an image: error %v, content %s", res.IsError, got)
			}
		})
	}

	s, err := NewServer(tools, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, url := loopbackServer(t, s.Handler(nil))
	c := connect(t, ServerConfig{Name: "loom", URL: url}, nil)
	got := call(t, context.Background(), c.Tools(), "loom_pictures", `{}`)
	if !reflect.DeepEqual(got.Images, []llm.Image{{Data: png, MediaType: "image/png"}}) {
		t.Errorf("read back: %+v", got.Images)
	}
	if !strings.HasPrefix(got.Content, fmt.Sprintf("two pictures\n[image 1: image/png, %d bytes]\n[resource link", len(png))+": https://example.com/chart.png (image 2), image/png]") {
		t.Errorf("read back text %q", got.Content)
	}
}
