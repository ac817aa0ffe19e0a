package loomotel

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/tool"
)

type addArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

func addTool() tool.Tool {
	return tool.Func("add", "Adds a and b.", func(_ context.Context, in addArgs) (int, error) {
		return in.A + in.B, nil
	}, &tool.FuncOptions[addArgs]{Effect: llm.EffectReadOnly})
}

// rawTool is a hand-written tool whose Call is fn (no recovery, no
// validation: what a tool.Func does for itself, it does not).
type rawTool struct {
	name string
	fn   func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)
}

func (t rawTool) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: t.name, Effect: llm.EffectIdempotent, Schema: json.RawMessage(`{"type":"object"}`)}
}

func (t rawTool) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	return t.fn(ctx, args)
}

func TestToolSpan(t *testing.T) {
	h := newHarness(t)
	add := Tool(h.opt)(addTool())
	res, err := add.Call(context.Background(), json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.Content != "5" || res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	span := h.only()
	if span.Name() != "execute_tool add" || span.SpanKind() != trace.SpanKindInternal {
		t.Errorf("span %q kind %v, want \"execute_tool add\" internal", span.Name(), span.SpanKind())
	}
	checkStatus(t, span, codes.Unset, "")
	// Called outside an agent: no idempotency key, so no call id.
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":   "execute_tool",
		"gen_ai.tool.name":        "add",
		"gen_ai.tool.description": "Adds a and b.",
		"gen_ai.tool.type":        "function",
		"loom.tool.effect":        "read_only",
	})
}

// A tool's failure is an error result: the span is an error of type
// tool_error, and says nothing of the result's content.
func TestToolErrorResult(t *testing.T) {
	h := newHarness(t)
	div := tool.Func("div", "", func(_ context.Context, in addArgs) (int, error) {
		if in.B == 0 {
			return 0, errors.New("division by zero, secret=42")
		}
		return in.A / in.B, nil
	}, nil)
	res, err := Tool(h.opt)(div).Call(context.Background(), json.RawMessage(`{"a":1,"b":0}`))
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v; want an error result", res, err)
	}
	span := h.only()
	checkStatus(t, span, codes.Error, "the tool returned an error result")
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "div",
		"gen_ai.tool.type":      "function",
		"loom.tool.effect":      "destructive",
		"error.type":            "tool_error",
	})
	if len(span.Events()) != 0 {
		t.Errorf("events %v, want none", eventNames(span))
	}
}

// A Go error from the tool is recorded.
func TestToolGoError(t *testing.T) {
	h := newHarness(t)
	broken := rawTool{name: "broken", fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		return llm.ToolResult{}, errors.New("disk on fire")
	}}
	_, err := Tool(h.opt)(broken).Call(context.Background(), json.RawMessage(`{}`))
	if err == nil || err.Error() != "disk on fire" {
		t.Fatalf("err = %v, want the tool's", err)
	}
	span := h.only()
	checkStatus(t, span, codes.Error, "disk on fire")
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name": "execute_tool",
		"gen_ai.tool.name":      "broken",
		"gen_ai.tool.type":      "function",
		"loom.tool.effect":      "idempotent",
		"error.type":            "*errors.errorString",
	})
	if got := exceptionMessage(t, span); got != "disk on fire" {
		t.Errorf("exception message %q", got)
	}
}

// A panicking tool: the span records the panic, and the panic goes on to
// tool.Recover (as in an agent), which makes it an error result.
func TestToolPanics(t *testing.T) {
	h := newHarness(t)
	bad := rawTool{name: "bad", fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) {
		panic("index out of range")
	}}
	res, err := tool.Recover(Tool(h.opt)(bad)).Call(context.Background(), json.RawMessage(`{}`))
	if err != nil || !res.IsError || !strings.Contains(res.Content, "panic: index out of range") {
		t.Fatalf("Call = %+v, %v; want tool.Recover's error result", res, err)
	}
	span := h.only()
	checkStatus(t, span, codes.Error, "panic: index out of range")
	if got := attrMap(span.Attributes())["error.type"]; got != "panic" {
		t.Errorf("error.type %v, want panic", got)
	}
	if got := exceptionMessage(t, span); got != "panic: index out of range" {
		t.Errorf("exception message %q", got)
	}
}

// A tool.Func recovers its own function's panics into an error result, so
// the span sees a tool_error.
func TestFuncToolPanics(t *testing.T) {
	h := newHarness(t)
	bad := tool.Func("bad", "", func(context.Context, addArgs) (int, error) { panic("oops") }, nil)
	res, err := Tool(h.opt)(bad).Call(context.Background(), json.RawMessage(`{"a":1,"b":2}`))
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if got := attrMap(h.only().Attributes())["error.type"]; got != "tool_error" {
		t.Errorf("error.type %v, want tool_error", got)
	}
}

// The middleware keeps the tool's per-call approval.
func TestToolKeepsApproval(t *testing.T) {
	h := newHarness(t)
	write := tool.Func("write", "", func(context.Context, addArgs) (int, error) { return 0, nil },
		&tool.FuncOptions[addArgs]{ApprovalFor: func(in addArgs) bool { return in.A > 10 }})
	wrapped := Tool(h.opt)(write)
	if !tool.NeedsApproval(wrapped, json.RawMessage(`{"a":11,"b":0}`)) || tool.NeedsApproval(wrapped, json.RawMessage(`{"a":1,"b":0}`)) {
		t.Error("the traced tool lost the tool's approval decisions")
	}
}

func TestCallID(t *testing.T) {
	withRun := func(id string) context.Context {
		info := &runInfo{}
		info.id.Store(&id)
		return context.WithValue(context.Background(), runKey{}, info)
	}
	for _, tc := range []struct {
		ctx  context.Context
		key  string
		want string
	}{
		{context.Background(), "run_ab/3/call_1", "call_1"},
		{context.Background(), "team/run/12/toolu_9", "toolu_9"}, // a run id with "/"
		{context.Background(), "run/1/call/x", ""},               // ambiguous without the run id
		{context.Background(), "run/turn/call", ""},              // no turn number
		{context.Background(), "call", ""},
		{withRun("run"), "run/1/call/x", "call/x"},
		{withRun("team/run"), "team/run/12/toolu_9", "toolu_9"},
		{withRun("other"), "run_ab/3/call_1", "call_1"}, // another run's key: the general rule
	} {
		if got := callID(tc.ctx, tc.key); got != tc.want {
			t.Errorf("callID(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}
