package loomotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/modeltest"
	"github.com/loomkit/loom/tool"
)

// secretRun runs an agent whose system prompt, prompt, tool arguments,
// tool results (one an error) and answer all hold "SECRET".
func secretRun(t *testing.T, h *harness, stream bool, opts ...Option) {
	t.Helper()
	refuse := tool.Func("refuse", "", func(context.Context, whoArgs) (string, error) {
		return "", errors.New("SECRET-REFUSAL")
	}, nil)
	m := modeltest.NewScript(
		modeltest.ToolCalls(
			modeltest.Call("c1", "meet", `{"who":"SECRET-ARG"}`),
			modeltest.Call("c2", "refuse", `{"who":"SECRET-ARG2"}`),
		),
		modeltest.Text("SECRET-ANSWER"),
	)
	set, err := tool.NewSet(meetTool(1), refuse)
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{Model: m, Tools: set, ModelName: "gpt-test", System: "SECRET-SYS"}
	a := agent.New(Instrument(cfg, opts...))
	in := agent.Prompt("SECRET-PROMPT")
	if stream {
		for _, err := range Stream(context.Background(), a, in, opts...) {
			if err != nil {
				t.Fatal(err)
			}
		}
	} else if _, err := Run(context.Background(), a, in, opts...); err != nil {
		t.Fatal(err)
	}
	if n := len(h.ended()); n != 5 {
		t.Fatalf("%d spans %v, want 5", n, names(h.ended()))
	}
}

// texts returns every string a span carries: name, attribute values,
// event names and attributes, status description.
func texts(span sdktrace.ReadOnlySpan) []string {
	out := []string{span.Name(), span.Status().Description}
	add := func(v any) { out = append(out, fmt.Sprint(v)) }
	for _, kv := range span.Attributes() {
		add(kv.Value.AsInterface())
	}
	for _, e := range span.Events() {
		out = append(out, e.Name)
		for _, kv := range e.Attributes {
			add(kv.Value.AsInterface())
		}
	}
	return out
}

func TestNoContentByDefault(t *testing.T) {
	for _, stream := range []bool{false, true} {
		h := newHarness(t)
		secretRun(t, h, stream, h.opt)
		for _, s := range h.ended() {
			for _, text := range texts(s) {
				if strings.Contains(text, "SECRET") {
					t.Errorf("stream %v: span %s carries content: %q", stream, s.Name(), text)
				}
			}
		}
	}
}

// The same run with WithContentCapture(false) after true is also clean:
// the last option wins.
func TestContentCaptureOffWins(t *testing.T) {
	h := newHarness(t)
	secretRun(t, h, false, h.opt, WithContentCapture(true), WithContentCapture(false))
	for _, s := range h.ended() {
		for _, text := range texts(s) {
			if strings.Contains(text, "SECRET") {
				t.Errorf("span %s carries content: %q", s.Name(), text)
			}
		}
	}
}

func TestContentCapture(t *testing.T) {
	h := newHarness(t)
	secretRun(t, h, false, h.opt, WithContentCapture(true))
	spans := h.ended()
	chats := byName(spans, "chat gpt-test")
	slices.SortFunc(chats, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })

	want := []map[string]string{{
		"gen_ai.system_instructions": `[{"content":"SECRET-SYS","type":"text"}]`,
		"gen_ai.input.messages":      `[{"parts":[{"content":"SECRET-PROMPT","type":"text"}],"role":"user"}]`,
		"gen_ai.output.messages": `[{"finish_reason":"tool_call","parts":[` +
			`{"arguments":{"who":"SECRET-ARG"},"id":"c1","name":"meet","type":"tool_call"},` +
			`{"arguments":{"who":"SECRET-ARG2"},"id":"c2","name":"refuse","type":"tool_call"}],"role":"assistant"}]`,
	}, {
		"gen_ai.system_instructions": `[{"content":"SECRET-SYS","type":"text"}]`,
		"gen_ai.input.messages": `[{"parts":[{"content":"SECRET-PROMPT","type":"text"}],"role":"user"},` +
			`{"parts":[{"arguments":{"who":"SECRET-ARG"},"id":"c1","name":"meet","type":"tool_call"},` +
			`{"arguments":{"who":"SECRET-ARG2"},"id":"c2","name":"refuse","type":"tool_call"}],"role":"assistant"},` +
			`{"parts":[{"id":"c1","response":"met SECRET-ARG","type":"tool_call_response"},` +
			`{"id":"c2","response":"SECRET-REFUSAL","type":"tool_call_response"}],"role":"tool"}]`,
		"gen_ai.output.messages": `[{"finish_reason":"stop","parts":[{"content":"SECRET-ANSWER","type":"text"}],"role":"assistant"}]`,
	}}
	for i, w := range want {
		got := attrMap(chats[i].Attributes())
		for k, v := range w {
			if got[k] != v {
				t.Errorf("chat %d: %s =\n%v\nwant\n%s", i, k, got[k], v)
			}
		}
	}

	meet := attrMap(byName(spans, "execute_tool meet")[0].Attributes())
	if meet["gen_ai.tool.call.arguments"] != `{"who":"SECRET-ARG"}` || meet["gen_ai.tool.call.result"] != "met SECRET-ARG" {
		t.Errorf("meet: arguments %v, result %v", meet["gen_ai.tool.call.arguments"], meet["gen_ai.tool.call.result"])
	}
	refuse := byName(spans, "execute_tool refuse")[0]
	if got := attrMap(refuse.Attributes()); got["gen_ai.tool.call.arguments"] != `{"who":"SECRET-ARG2"}` || got["gen_ai.tool.call.result"] != nil {
		t.Errorf("refuse: arguments %v, result %v (want none for an error result)", got["gen_ai.tool.call.arguments"], got["gen_ai.tool.call.result"])
	}
	if d := refuse.Status().Description; d != "SECRET-REFUSAL" {
		t.Errorf("refuse: status description %q, want the error result", d)
	}

	ag := attrMap(byName(spans, "invoke_agent")[0].Attributes())
	if ag["gen_ai.input.messages"] != `[{"parts":[{"content":"SECRET-PROMPT","type":"text"}],"role":"user"}]` ||
		ag["gen_ai.output.messages"] != `[{"finish_reason":"stop","parts":[{"content":"SECRET-ANSWER","type":"text"}],"role":"assistant"}]` {
		t.Errorf("agent: input %v, output %v", ag["gen_ai.input.messages"], ag["gen_ai.output.messages"])
	}
}

// A streamed answer's content is folded from its events.
func TestContentCaptureStream(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt, WithContentCapture(true))(modeltest.NewScript(modeltest.Turn{Events: streamEvents()}))
	for _, err := range m.Stream(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := attrMap(h.only().Attributes())
	if got["gen_ai.output.messages"] != `[{"finish_reason":"stop","parts":[{"content":"hello","type":"text"}],"role":"assistant"}]` {
		t.Errorf("output %v", got["gen_ai.output.messages"])
	}
	if got["gen_ai.input.messages"] != `[{"parts":[{"content":"hi","type":"text"}],"role":"user"}]` {
		t.Errorf("input %v", got["gen_ai.input.messages"])
	}
	if _, ok := got["gen_ai.system_instructions"]; ok {
		t.Error("system instructions recorded for a request without a system prompt")
	}
}

func TestMessagesJSONParts(t *testing.T) {
	msgs := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.Text{Text: "look"},
			llm.Image{URL: "https://example.com/a.png", MediaType: "image/png"},
			llm.Image{Data: []byte("hi"), MediaType: "image/gif"},
		}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Thinking{Text: "hmm"},
			llm.Thinking{Redacted: "xxx"},
			llm.ToolCall{ID: "c1", Name: "f", Arguments: `not json`, Malformed: true},
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResult{CallID: "c1", Content: "bad args", IsError: true},
			llm.ToolResult{CallID: "c2", Content: "a chart", Images: []llm.Image{{URL: "https://example.com/c.png"}}},
			llm.Text{Text: "and then"},
		}},
	}
	a, ok := messagesAttr("k", messagesJSON(msgs))
	if !ok {
		t.Fatal("not encoded")
	}
	want := `[{"parts":[{"content":"look","type":"text"},` +
		`{"mime_type":"image/png","modality":"image","type":"uri","uri":"https://example.com/a.png"},` +
		`{"content":"aGk=","mime_type":"image/gif","modality":"image","type":"blob"}],"role":"user"},` +
		`{"parts":[{"content":"hmm","type":"reasoning"},{"arguments":"not json","id":"c1","name":"f","type":"tool_call"}],"role":"assistant"},` +
		`{"parts":[{"id":"c1","response":"bad args","type":"tool_call_response"},` +
		`{"id":"c2","response":"a chart","type":"tool_call_response"},` +
		`{"modality":"image","type":"uri","uri":"https://example.com/c.png"}],"role":"tool"},` +
		`{"parts":[{"content":"and then","type":"text"}],"role":"user"}]`
	if got := a.Value.AsString(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
