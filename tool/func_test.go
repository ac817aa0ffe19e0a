package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type readArgs struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line to read, 1-based"`
	Tags   []struct {
		N int `json:"n"`
	} `json:"tags,omitempty"`
}

func newReader(t *testing.T, calls *atomic.Int32) *tool.FuncTool[readArgs, string] {
	t.Helper()
	tl, err := tool.NewFunc("read", "reads a file", func(ctx context.Context, in readArgs) (string, error) {
		calls.Add(1)
		return "read " + in.Path, nil
	}, &tool.FuncOptions[readArgs]{Effect: llm.EffectReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func TestFuncSchemaInferred(t *testing.T) {
	var calls atomic.Int32
	spec := newReader(t, &calls).Spec()
	if spec.Name != "read" || spec.Description != "reads a file" || spec.Effect != llm.EffectReadOnly {
		t.Fatalf("spec = %+v", spec)
	}
	var s struct {
		Type       string                    `json:"type"`
		Required   []string                  `json:"required"`
		Additional *bool                     `json:"additionalProperties"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(spec.Schema, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "object" || len(s.Required) != 1 || s.Required[0] != "path" {
		t.Errorf("type %q required %v, want object [path]", s.Type, s.Required)
	}
	if s.Additional == nil || *s.Additional {
		t.Errorf("additionalProperties = %v, want false", s.Additional)
	}
	if got := s.Properties["path"]["description"]; got != "the file to read, relative to the workspace" {
		t.Errorf("path description = %v", got)
	}
}

func TestFuncValidArguments(t *testing.T) {
	var calls atomic.Int32
	tl := newReader(t, &calls)
	res, err := tl.Call(context.Background(), json.RawMessage(`{"path":"a.go","offset":3}`))
	if err != nil || res.IsError || res.Content != "read a.go" {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("function ran %d times, want 1", calls.Load())
	}
}

func TestFuncInvalidArgumentsNeverRun(t *testing.T) {
	cases := []struct {
		name, args string
		want       []string // substrings of the message
	}{
		{"wrong type", `{"path":3}`, []string{"at path", `want "string"`}},
		{"missing required", `{}`, []string{"missing required field \"path\""}},
		{"misspelt", `{"paht":"a"}`, []string{`unknown field "paht" (the fields are: offset, path, tags)`, `missing required field "path"`}},
		{"unknown field", `{"path":"a","recursive":true}`, []string{`unknown field "recursive"`}},
		{"unknown nested field", `{"path":"a","tags":[{"n":1,"m":2}]}`, []string{"at tags[]", `additional properties ["m"]`}},
		{"not json", `{"path": "a.go",}`, []string{"not valid JSON"}},
		{"not an object", `["a.go"]`, []string{"JSON object", "an array"}},
		{"null", `null`, []string{"JSON object", "null"}},
		{"fraction for integer", `{"path":"a","offset":1.5}`, []string{"at offset", `want "integer"`}},
		{"nested", `{"path":"a","tags":[{"n":"x"}]}`, []string{"at tags[].n", `want "integer"`}},
		{"two objects", `{"path":"a"}{"path":"b"}`, []string{"not valid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			tl := newReader(t, &calls)
			res, err := tl.Call(context.Background(), json.RawMessage(c.args))
			if err != nil {
				t.Fatalf("Go error %v; want an error result", err)
			}
			if !res.IsError {
				t.Fatalf("result %q is not an error", res.Content)
			}
			for _, w := range append(c.want, "Invalid arguments for read", "JSON Schema") {
				if !strings.Contains(res.Content, w) {
					t.Errorf("message %q lacks %q", res.Content, w)
				}
			}
			if calls.Load() != 0 {
				t.Errorf("function ran on invalid arguments")
			}
		})
	}
}

func TestFuncEmptyArgumentsAreEmptyObject(t *testing.T) {
	ran := false
	tl := tool.Func("now", "", func(ctx context.Context, in struct{}) (string, error) {
		ran = true
		return "ok", nil
	}, nil)
	for _, args := range []string{"", "  ", "{}"} {
		ran = false
		res, err := tl.Call(context.Background(), json.RawMessage(args))
		if err != nil || res.IsError || !ran {
			t.Errorf("args %q: %+v %v ran=%v", args, res, err, ran)
		}
	}
}

func TestFuncErrorIsData(t *testing.T) {
	tl := tool.Func("fail", "", func(ctx context.Context, in struct{}) (string, error) {
		return "", errors.New("no such file: a.go")
	}, nil)
	res, err := tl.Call(context.Background(), json.RawMessage(`{}`))
	if err != nil || !res.IsError || res.Content != "no such file: a.go" {
		t.Fatalf("Call = %+v, %v", res, err)
	}
}

func TestFuncPanicIsData(t *testing.T) {
	tl := tool.Func("boom", "", func(ctx context.Context, in struct{}) (string, error) {
		var m map[string]int
		m["x"] = 1
		return "", nil
	}, nil)
	res, err := tl.Call(context.Background(), json.RawMessage(`{}`))
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if !strings.Contains(res.Content, "panic") || !strings.Contains(res.Content, "nil map") {
		t.Errorf("content %q does not carry the panic value", res.Content)
	}
	if strings.Contains(res.Content, "goroutine") || strings.Contains(res.Content, ".go:") {
		t.Errorf("content %q carries a stack trace", res.Content)
	}
}

func TestFuncOutput(t *testing.T) {
	type out struct {
		N     int      `json:"n"`
		Files []string `json:"files"`
	}
	tl := tool.Func("count", "", func(ctx context.Context, in struct{}) (out, error) {
		return out{N: 2, Files: []string{"a", "b"}}, nil
	}, nil)
	res, _ := tl.Call(context.Background(), nil)
	if res.Content != `{"n":2,"files":["a","b"]}` {
		t.Errorf("content %q", res.Content)
	}
	str := tool.Func("str", "", func(ctx context.Context, in struct{}) (string, error) {
		return "a \"quoted\"\n\xffline", nil
	}, nil)
	res, _ = str.Call(context.Background(), nil)
	if res.Content != "a \"quoted\"\n\uFFFDline" {
		t.Errorf("string content %q, want verbatim with invalid UTF-8 replaced", res.Content)
	}
}

func TestFuncTruncates(t *testing.T) {
	long := strings.Repeat("é", 10_000) // 20,000 bytes
	for _, c := range []struct {
		max int
		cut bool
	}{{0, false}, {1000, true}, {-1, false}, {20_000, false}, {19_999, true}} {
		tl := tool.Func("long", "", func(ctx context.Context, in struct{}) (string, error) {
			return long, nil
		}, &tool.FuncOptions[struct{}]{MaxResult: c.max})
		res, _ := tl.Call(context.Background(), nil)
		if got := strings.Contains(res.Content, "bytes cut"); got != c.cut {
			t.Errorf("max %d: cut = %v, want %v", c.max, got, c.cut)
		}
		if !utf8.ValidString(res.Content) {
			t.Errorf("max %d: content is not valid UTF-8", c.max)
		}
	}
}

// A function may return the result itself: its images pass whole, its
// text is cut and made valid like any other, and it may fail as data.
func TestFuncReturnsResult(t *testing.T) {
	img := llm.Image{Data: []byte("\x89PNG\r\n\x1a\n"), MediaType: "image/png"}
	tl := tool.Func("shot", "", func(ctx context.Context, in struct{ Fail bool }) (llm.ToolResult, error) {
		return llm.ToolResult{Content: strings.Repeat("é", 100) + "\xff", Images: []llm.Image{img}, IsError: in.Fail}, nil
	}, &tool.FuncOptions[struct{ Fail bool }]{MaxResult: 50})
	for _, args := range []string{`{"Fail":false}`, `{"Fail":true}`} {
		res, err := tl.Call(context.Background(), json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Images) != 1 || !bytes.Equal(res.Images[0].Data, img.Data) || res.Images[0].MediaType != "image/png" {
			t.Errorf("%s: images %+v", args, res.Images)
		}
		if !strings.Contains(res.Content, "bytes cut") || !utf8.ValidString(res.Content) || strings.Contains(res.Content, "{") {
			t.Errorf("%s: content %q, want the text cut, not the result as JSON", args, res.Content)
		}
		if res.IsError != strings.Contains(args, "true") {
			t.Errorf("%s: IsError %v", args, res.IsError)
		}
	}
}

func TestFuncCancelledContext(t *testing.T) {
	ran := false
	tl := tool.Func("slow", "", func(ctx context.Context, in struct{}) (string, error) {
		ran = true
		return "", nil
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := tl.Call(ctx, nil)
	if err != nil || !res.IsError || ran {
		t.Fatalf("Call = %+v, %v, ran=%v", res, err, ran)
	}
}

func TestFuncApproval(t *testing.T) {
	type writeArgs struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	tl := tool.Func("write", "", func(ctx context.Context, in writeArgs) (string, error) { return "", nil },
		&tool.FuncOptions[writeArgs]{ApprovalFor: func(in writeArgs) bool { return strings.HasPrefix(in.Path, ".git/") }})
	cases := map[string]bool{
		`{"path":".git/config","content":""}`: true,
		`{"path":"main.go","content":""}`:     false,
		`{"path":3}`:                          false, // never runs
	}
	for args, want := range cases {
		if got := tool.NeedsApproval(tl, json.RawMessage(args)); got != want {
			t.Errorf("NeedsApproval(%s) = %v, want %v", args, got, want)
		}
		// Middleware made with Wrap keeps the decision.
		wrapped := tool.Chain(tl, tool.Recover, tool.LimitResults(10))
		if got := tool.NeedsApproval(wrapped, json.RawMessage(args)); got != want {
			t.Errorf("wrapped NeedsApproval(%s) = %v, want %v", args, got, want)
		}
	}
	always := tool.Func("ask", "", func(ctx context.Context, in struct{}) (string, error) { return "", nil },
		&tool.FuncOptions[struct{}]{NeedsApproval: true})
	if !tool.NeedsApproval(always, json.RawMessage(`{}`)) || !always.Spec().NeedsApproval {
		t.Errorf("NeedsApproval option not honoured")
	}
}

func TestNewFuncRefuses(t *testing.T) {
	fn := func(ctx context.Context, in struct{}) (string, error) { return "", nil }
	for _, name := range []string{"", "fs.read/file", strings.Repeat("a", 65), "a b", "ünï"} {
		_, err := tool.NewFunc(name, "", fn, nil)
		if !errors.Is(err, tool.ErrInvalidName) {
			t.Errorf("name %q: err = %v, want ErrInvalidName", name, err)
		}
	}
	if _, err := tool.NewFunc("s", "", func(ctx context.Context, in string) (string, error) { return "", nil }, nil); err == nil {
		t.Error("string arguments accepted; want an error (arguments are objects)")
	}
	if _, err := tool.NewFunc("c", "", func(ctx context.Context, in struct{ C chan int }) (string, error) { return "", nil }, nil); err == nil {
		t.Error("channel field accepted; want a schema inference error")
	}
	defer func() {
		if recover() == nil {
			t.Error("Func with a bad name did not panic")
		}
	}()
	tool.Func("bad name", "", fn, nil)
}
