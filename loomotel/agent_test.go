package loomotel

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
	"github.com/loomkit/loom/tool"
)

type whoArgs struct {
	Who string `json:"who"`
}

// meetTool is a read-only tool whose calls return only once n of them are
// running at the same time; a call that waits in vain fails. A run whose
// calls all succeed ran them in parallel.
func meetTool(n int) tool.Tool {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return tool.Func("meet", "Waits for the others.", func(ctx context.Context, in whoArgs) (string, error) {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return "met " + in.Who, nil
		case <-time.After(10 * time.Second):
			return "", errors.New("the other calls never ran alongside this one")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, &tool.FuncOptions[whoArgs]{Effect: llm.EffectReadOnly})
}

func newAgent(t *testing.T, h *harness, m model.Model, cfg agent.Config, tools ...tool.Tool) *agent.Agent {
	t.Helper()
	set, err := tool.NewSet(tools...)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Tools, cfg.ModelName = m, set, "gpt-test"
	cfg.Retry = model.RetryPolicy{MaxRetries: -1}
	return agent.New(Instrument(cfg, h.opt, WithProvider("openai")))
}

func twoCalls() *modeltest.Script {
	return modeltest.NewScript(
		modeltest.ToolCalls(
			modeltest.Call("c1", "meet", `{"who":"ann"}`),
			modeltest.Call("c2", "meet", `{"who":"bob"}`),
		).WithUsage(llm.Usage{InputTokens: 10, OutputTokens: 5}),
		modeltest.Text("both met").WithUsage(llm.Usage{InputTokens: 20, OutputTokens: 3}),
	)
}

// A run with two tool calls in parallel: the agent span is the parent of
// both model spans and both tool spans, which overlap in time.
func TestRunSpanTree(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, twoCalls(), agent.Config{}, meetTool(2))

	res, err := Run(context.Background(), a, agent.Input{Prompt: llm.UserText("meet"), RunID: "team/run-1"},
		h.opt, WithProvider("openai"), WithAgentName("coder"))
	if err != nil || res.Output != "both met" {
		t.Fatalf("Run = %q, %v", res.Output, err)
	}
	spans := h.ended()
	if len(spans) != 5 {
		t.Fatalf("spans %v, want 5", names(spans))
	}
	root := byName(spans, "invoke_agent coder")
	chats := byName(spans, "chat gpt-test")
	tools := byName(spans, "execute_tool meet")
	if len(root) != 1 || len(chats) != 2 || len(tools) != 2 {
		t.Fatalf("spans %v, want one invoke_agent coder, two chat gpt-test, two execute_tool meet", names(spans))
	}
	ag := root[0]
	if ag.Parent().IsValid() || ag.SpanKind() != trace.SpanKindInternal {
		t.Errorf("agent span: parent %v kind %v, want a root of kind internal", ag.Parent(), ag.SpanKind())
	}
	for _, s := range append(chats, tools...) {
		if s.Parent().SpanID() != ag.SpanContext().SpanID() || s.SpanContext().TraceID() != ag.SpanContext().TraceID() {
			t.Errorf("%s is not a child of the agent span", s.Name())
		}
	}
	checkStatus(t, ag, codes.Unset, "")
	checkAttrs(t, ag, map[string]any{
		"gen_ai.operation.name":      "invoke_agent",
		"gen_ai.provider.name":       "openai",
		"gen_ai.agent.name":          "coder",
		"loom.run.id":                "team/run-1",
		"loom.run.turns":             int64(2),
		"gen_ai.usage.input_tokens":  int64(30),
		"gen_ai.usage.output_tokens": int64(8),
	})

	slices.SortFunc(chats, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for i, reason := range []string{"tool_calls", "stop"} {
		got := attrMap(chats[i].Attributes())
		if got["gen_ai.request.stream"] != false || !slices.Equal(got["gen_ai.response.finish_reasons"].([]string), []string{reason}) {
			t.Errorf("chat %d: stream %v, finish reasons %v; want false, [%s]", i, got["gen_ai.request.stream"], got["gen_ai.response.finish_reasons"], reason)
		}
	}

	a0, a1 := tools[0], tools[1]
	if !a0.StartTime().Before(a1.EndTime()) || !a1.StartTime().Before(a0.EndTime()) {
		t.Error("the tool spans do not overlap: the calls did not run in parallel")
	}
	var ids []string
	for _, s := range tools {
		checkStatus(t, s, codes.Unset, "")
		got := attrMap(s.Attributes())
		id, _ := got["gen_ai.tool.call.id"].(string)
		ids = append(ids, id)
		checkAttrs(t, s, map[string]any{
			"gen_ai.operation.name":     "execute_tool",
			"gen_ai.tool.name":          "meet",
			"gen_ai.tool.description":   "Waits for the others.",
			"gen_ai.tool.type":          "function",
			"gen_ai.tool.call.id":       id,
			"loom.tool.effect":          "read_only",
			"loom.tool.idempotency_key": "team/run-1/1/" + id,
		})
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"c1", "c2"}) {
		t.Errorf("call ids %v, want [c1 c2]", ids)
	}
}

// Under Run the call id is exact even when it holds a "/"; without Run it
// is left out rather than guessed.
func TestCallIDWithSlash(t *testing.T) {
	script := func() *modeltest.Script {
		return modeltest.NewScript(
			modeltest.ToolCalls(modeltest.Call("call/7", "add", `{"a":1,"b":2}`)),
			modeltest.Text("3"),
		)
	}
	for _, traced := range []bool{true, false} {
		h := newHarness(t)
		a := newAgent(t, h, script(), agent.Config{}, addTool())
		in := agent.Input{Prompt: llm.UserText("add"), RunID: "r1"}
		var err error
		if traced {
			_, err = Run(context.Background(), a, in, h.opt)
		} else {
			_, err = a.Run(context.Background(), in)
		}
		if err != nil {
			t.Fatal(err)
		}
		span := byName(h.ended(), "execute_tool add")[0]
		id, ok := attrMap(span.Attributes())["gen_ai.tool.call.id"]
		if traced && id != "call/7" {
			t.Errorf("under Run: call id %v, want call/7", id)
		}
		if !traced && ok {
			t.Errorf("without Run: call id %v, want none", id)
		}
	}
}

func TestStreamRun(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, twoCalls(), agent.Config{}, meetTool(2))

	var done bool
	for e, err := range Stream(context.Background(), a, agent.Prompt("meet"), h.opt, WithProvider("openai")) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.(agent.Done); ok {
			done = true
		}
		if _, ok := e.(agent.RunStarted); ok && len(h.sr.Ended()) != 0 {
			t.Fatal("a span ended before the run started")
		}
	}
	if !done {
		t.Fatal("no Done event")
	}
	spans := h.ended()
	ag := byName(spans, "invoke_agent")
	if len(ag) != 1 || len(spans) != 5 {
		t.Fatalf("spans %v, want invoke_agent and four children", names(spans))
	}
	got := attrMap(ag[0].Attributes())
	runID, _ := got["loom.run.id"].(string)
	if len(runID) != len("run_")+32 {
		t.Errorf("loom.run.id %q, want the agent's new run id", runID)
	}
	checkAttrs(t, ag[0], map[string]any{
		"gen_ai.operation.name":      "invoke_agent",
		"gen_ai.provider.name":       "openai",
		"loom.run.id":                runID,
		"loom.run.turns":             int64(2),
		"gen_ai.usage.input_tokens":  int64(30),
		"gen_ai.usage.output_tokens": int64(8),
	})
	for _, s := range byName(spans, "chat gpt-test") {
		if attrMap(s.Attributes())["gen_ai.request.stream"] != true {
			t.Errorf("a streamed run's model span has gen_ai.request.stream %v", attrMap(s.Attributes())["gen_ai.request.stream"])
		}
		if s.Parent().SpanID() != ag[0].SpanContext().SpanID() {
			t.Error("a model span is not a child of the agent span")
		}
	}
}

// A consumer that leaves a streamed run in the middle of a model stream:
// the agent span and the model span both end, once, abandoned.
func TestStreamRunAbandoned(t *testing.T) {
	h := newHarness(t)
	m := modeltest.NewScript(modeltest.Turn{Events: streamEvents()})
	a := newAgent(t, h, m, agent.Config{})
	for e, err := range Stream(context.Background(), a, agent.Prompt("hi"), h.opt) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.(agent.TextDelta); ok {
			break
		}
	}
	spans := h.ended()
	if len(spans) != 2 {
		t.Fatalf("spans %v, want invoke_agent and chat", names(spans))
	}
	for _, s := range spans {
		checkStatus(t, s, codes.Unset, "")
		if attrMap(s.Attributes())["loom.stream.abandoned"] != true {
			t.Errorf("%s: loom.stream.abandoned %v, want true", s.Name(), attrMap(s.Attributes())["loom.stream.abandoned"])
		}
	}
}

// A run stopped by the model's failure carries its model.Kind on both
// spans; a run stopped by a tool's Go error carries the agent's error type.
func TestRunErrors(t *testing.T) {
	t.Run("model", func(t *testing.T) {
		h := newHarness(t)
		a := newAgent(t, h, modeltest.NewScript(modeltest.Fail(model.KindAuth)), agent.Config{})
		_, err := Run(context.Background(), a, agent.Prompt("hi"), h.opt)
		if model.KindOf(err) != model.KindAuth {
			t.Fatalf("err = %v, want an auth failure", err)
		}
		for _, s := range h.ended() {
			if got := attrMap(s.Attributes())["error.type"]; got != "auth" || s.Status().Code != codes.Error {
				t.Errorf("%s: error.type %v status %v, want auth, Error", s.Name(), got, s.Status().Code)
			}
		}
	})
	t.Run("tool", func(t *testing.T) {
		h := newHarness(t)
		broken := rawTool{name: "broken", fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) {
			return llm.ToolResult{}, errors.New("disk on fire")
		}}
		m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "broken", `{}`)))
		a := newAgent(t, h, m, agent.Config{}, broken)
		_, err := Run(context.Background(), a, agent.Prompt("hi"), h.opt)
		if !errors.Is(err, agent.ErrTool) {
			t.Fatalf("err = %v, want a tool machinery failure", err)
		}
		spans := h.ended()
		want := map[string]string{"invoke_agent": "*agent.ToolError", "execute_tool broken": "*errors.errorString", "chat gpt-test": ""}
		if len(spans) != len(want) {
			t.Fatalf("spans %v", names(spans))
		}
		for _, s := range spans {
			w, ok := want[s.Name()]
			if got, _ := attrMap(s.Attributes())["error.type"].(string); !ok || got != w {
				t.Errorf("%s: error.type %q, want %q", s.Name(), got, w)
			}
		}
	})
}

// A panicking tool in a run: the agent answers the call with an error
// result and the run goes on; the tool span is a panic.
func TestRunToolPanics(t *testing.T) {
	h := newHarness(t)
	bad := rawTool{name: "bad", fn: func(context.Context, json.RawMessage) (llm.ToolResult, error) { panic("nil map") }}
	m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "bad", `{}`)), modeltest.Text("sorry"))
	a := newAgent(t, h, m, agent.Config{}, bad)
	res, err := Run(context.Background(), a, agent.Prompt("hi"), h.opt)
	if err != nil || res.Output != "sorry" {
		t.Fatalf("Run = %q, %v", res.Output, err)
	}
	spans := h.ended()
	ts := byName(spans, "execute_tool bad")
	if len(ts) != 1 {
		t.Fatalf("spans %v", names(spans))
	}
	checkStatus(t, ts[0], codes.Error, "panic: nil map")
	checkStatus(t, byName(spans, "invoke_agent")[0], codes.Unset, "")
	if got := attrMap(ts[0].Attributes())["gen_ai.tool.call.id"]; got != "c1" {
		t.Errorf("call id %v, want c1", got)
	}
}

// A run suspended for approval is not an error.
func TestRunSuspended(t *testing.T) {
	h := newHarness(t)
	guarded := tool.Func("guarded", "", func(context.Context, addArgs) (int, error) { return 0, nil },
		&tool.FuncOptions[addArgs]{NeedsApproval: true})
	m := modeltest.NewScript(modeltest.ToolCalls(modeltest.Call("c1", "guarded", `{"a":1,"b":2}`)))
	suspend := agent.ApproverFunc(func(context.Context, agent.ApprovalRequest) ([]run.Decision, error) {
		return nil, agent.ErrSuspend
	})
	a := newAgent(t, h, m, agent.Config{Approver: suspend}, guarded)
	_, err := Run(context.Background(), a, agent.Input{Prompt: llm.UserText("hi"), RunID: "r1"}, h.opt)
	var se *agent.SuspendedError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a suspension", err)
	}
	ag := byName(h.ended(), "invoke_agent")[0]
	checkStatus(t, ag, codes.Unset, "")
	checkAttrs(t, ag, map[string]any{
		"gen_ai.operation.name": "invoke_agent",
		"loom.run.id":           "r1",
		"loom.run.turns":        int64(1),
		"loom.run.suspended":    true,
	})
}

// The conversation id goes on the agent span and on the model spans of
// its run.
func TestConversationID(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, modeltest.NewScript(modeltest.Text("hello")), agent.Config{Store: store.NewMemory()})
	in := agent.Input{Prompt: llm.UserText("hi"), ConversationID: "conv-1"}
	if _, err := Run(context.Background(), a, in, h.opt); err != nil {
		t.Fatal(err)
	}
	spans := h.ended()
	if len(spans) != 2 {
		t.Fatalf("spans %v", names(spans))
	}
	for _, s := range spans {
		if got := attrMap(s.Attributes())["gen_ai.conversation.id"]; got != "conv-1" {
			t.Errorf("%s: gen_ai.conversation.id %v, want conv-1", s.Name(), got)
		}
	}
}

// OnEvent still gets every event under Run.
func TestRunKeepsOnEvent(t *testing.T) {
	h := newHarness(t)
	a := newAgent(t, h, modeltest.NewScript(modeltest.Text("hello")), agent.Config{})
	var types []string
	in := agent.Input{Prompt: llm.UserText("hi"), OnEvent: func(e agent.Event) { types = append(types, agent.EventType(e)) }}
	if _, err := Run(context.Background(), a, in, h.opt); err != nil {
		t.Fatal(err)
	}
	want := []string{"run_started", "text_delta", "usage", "done"}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}

// Instrument appends and never writes into the caller's slices.
func TestInstrumentCopies(t *testing.T) {
	mws := make([]model.Middleware, 1, 4)
	mws[0] = func(m model.Model) model.Model { return m }
	cfg := agent.Config{ModelMiddleware: mws}
	a := Instrument(cfg)
	b := Instrument(cfg)
	if len(a.ModelMiddleware) != 2 || len(a.ToolMiddleware) != 1 || len(cfg.ModelMiddleware) != 1 {
		t.Fatalf("lengths %d, %d, %d", len(a.ModelMiddleware), len(a.ToolMiddleware), len(cfg.ModelMiddleware))
	}
	if &a.ModelMiddleware[0] == &mws[0] || &a.ModelMiddleware[1] == &b.ModelMiddleware[1] {
		t.Error("Instrument shares the caller's backing array")
	}
}
