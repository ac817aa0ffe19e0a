package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/modeltest"
)

func start(t *testing.T, turns ...loomtest.Turn) *loomtest.Server {
	t.Helper()
	srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: turns})
	t.Cleanup(srv.Close)
	return srv
}

func newModel(srv *loomtest.Server, cfg anthropic.Config) *anthropic.Model {
	cfg.BaseURL = srv.AnthropicURL()
	if cfg.Model == "" {
		cfg.Model = "claude-test"
	}
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-ant-test"
	}
	return anthropic.New(cfg)
}

// body decodes the last request's body as generic JSON.
func body(t *testing.T, srv *loomtest.Server) map[string]any {
	t.Helper()
	r := srv.LastRequest()
	if r == nil {
		t.Fatal("no request reached the server")
	}
	if r.Err != nil {
		t.Fatalf("the server refused the request as the API would: %v\n%s", r.Err, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// both makes the call blocking and streaming.
func both(t *testing.T, m model.Model, req llm.Request, check func(mode string, resp llm.Response, err error)) {
	t.Helper()
	resp, err := m.Generate(context.Background(), req)
	check("blocking", resp, err)
	resp, _, err = modeltest.StreamCall(context.Background(), m, req)
	check("stream", resp, err)
}

func TestSystemPromptIsTopLevel(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	const prompt = "You are loom. Never drop me.\nSecond line with \"quotes\"."
	both(t, m, llm.Request{System: prompt, Messages: []llm.Message{llm.UserText("hi")}}, func(mode string, _ llm.Response, err error) {
		if err != nil {
			t.Fatal(err)
		}
		b := body(t, srv)
		if got, ok := b["system"].(string); !ok || got != prompt {
			t.Fatalf("%s: system = %#v, want the configured prompt %q", mode, b["system"], prompt)
		}
		for i, msg := range b["messages"].([]any) {
			if role := msg.(map[string]any)["role"]; role != "user" && role != "assistant" {
				t.Fatalf("%s: message %d has role %v", mode, i, role)
			}
		}
		if srv.LastRequest().Decoded.System != prompt {
			t.Fatalf("%s: the server read system %q", mode, srv.LastRequest().Decoded.System)
		}
	})
	// No prompt, no field.
	if _, err := m.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := body(t, srv)["system"]; ok {
		t.Fatal("an empty system prompt was sent")
	}
}

func TestHeaders(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{APIKey: "sk-ant-secret", Headers: http.Header{"anthropic-beta": {"tools-2024"}}})
	both(t, m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, func(mode string, _ llm.Response, err error) {
		if err != nil {
			t.Fatal(err)
		}
		h := srv.LastRequest().Header
		want := map[string]string{
			"X-Api-Key":               "sk-ant-secret",
			"Anthropic-Version":       anthropic.DefaultVersion,
			"Anthropic-Beta":          "tools-2024",
			"Content-Type":            "application/json",
			"X-Stainless-Retry-Count": "0",
		}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s: header %s = %q, want %q", mode, k, got, v)
			}
		}
		if h.Get("Authorization") != "" {
			t.Errorf("%s: an Authorization header was sent", mode)
		}
	})
	m = newModel(srv, anthropic.Config{Version: "2099-01-01"})
	if _, err := m.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if v := srv.LastRequest().Header.Get("anthropic-version"); v != "2099-01-01" {
		t.Fatalf("anthropic-version %q", v)
	}
}

func TestMaxTokensAlwaysSent(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	cases := []struct {
		cfg, req, want int
	}{
		{0, 0, anthropic.DefaultMaxTokens},
		{1000, 0, 1000},
		{1000, 77, 77},
	}
	for _, c := range cases {
		m := newModel(srv, anthropic.Config{MaxTokens: c.cfg})
		if _, err := m.Generate(context.Background(), llm.Request{MaxTokens: c.req, Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
			t.Fatal(err)
		}
		if got := body(t, srv)["max_tokens"]; got != float64(c.want) {
			t.Errorf("config %d request %d: max_tokens %v, want %d", c.cfg, c.req, got, c.want)
		}
	}
}

var tools = []llm.ToolSpec{
	{Name: "read_file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	{Name: "list_dir"},
	{Name: "grep", Schema: json.RawMessage(`{"type":"object"}`)},
}

func TestToolChoice(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	cases := []struct {
		choice llm.ToolChoice
		want   string // JSON of tool_choice, "" for absent
		tools  int
	}{
		{llm.ToolChoice{}, "", 3},
		{llm.ToolChoice{Mode: llm.ToolRequired}, `{"type":"any"}`, 3},
		{llm.ToolChoice{Mode: llm.ToolNone}, `{"type":"none"}`, 3},
		{llm.ChooseTools("grep"), `{"name":"grep","type":"tool"}`, 3}, // keys sorted by the re-encoding
		{llm.ChooseTools("grep", "read_file"), `{"type":"any"}`, 2},
	}
	for _, c := range cases {
		_, err := m.Generate(context.Background(), llm.Request{Tools: tools, ToolChoice: c.choice, Messages: []llm.Message{llm.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		b := body(t, srv)
		got := ""
		if v, ok := b["tool_choice"]; ok {
			raw, _ := json.Marshal(v)
			got = string(raw)
		}
		if got != c.want || len(b["tools"].([]any)) != c.tools {
			t.Errorf("%+v: tool_choice %s with %d tools, want %s with %d", c.choice, got, len(b["tools"].([]any)), c.want, c.tools)
		}
	}
	// Every tool has an input_schema, even one that gave none.
	for _, tool := range body(t, srv)["tools"].([]any) {
		if _, ok := tool.(map[string]any)["input_schema"].(map[string]any); !ok {
			t.Errorf("tool without input_schema: %v", tool)
		}
	}
}

func TestRefusesBeforeSending(t *testing.T) {
	call := llm.ToolCall{ID: "toolu_1", Name: "read_file", Arguments: `{}`}
	result := llm.ToolResult{CallID: "toolu_1", Content: "x"}
	cases := []struct {
		name    string
		req     llm.Request
		history bool
	}{
		{"call without result at the end", llm.Request{Messages: []llm.Message{
			llm.UserText("go"), {Role: llm.RoleAssistant, Parts: []llm.Part{call}},
		}}, true},
		{"call answered after another message", llm.Request{Messages: []llm.Message{
			llm.UserText("go"), {Role: llm.RoleAssistant, Parts: []llm.Part{call}}, llm.UserText("wait"),
			{Role: llm.RoleUser, Parts: []llm.Part{result}},
		}}, true},
		{"orphan result", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{result}}}}, true},
		{"duplicate ids", llm.Request{Messages: []llm.Message{
			llm.UserText("go"), {Role: llm.RoleAssistant, Parts: []llm.Part{call, call}},
			{Role: llm.RoleUser, Parts: []llm.Part{result, result}},
		}}, true},
		{"tool choice names an unknown tool", llm.Request{Tools: tools, ToolChoice: llm.ChooseTools("rm_everything"), Messages: []llm.Message{llm.UserText("go")}}, false},
		{"tool choice required without tools", llm.Request{ToolChoice: llm.ToolChoice{Mode: llm.ToolRequired}, Messages: []llm.Message{llm.UserText("go")}}, false},
		{"tool name Anthropic refuses", llm.Request{Tools: []llm.ToolSpec{{Name: "fs.read/file"}}, Messages: []llm.Message{llm.UserText("go")}}, false},
		{"schema that is not an object", llm.Request{Tools: []llm.ToolSpec{{Name: "x", Schema: json.RawMessage(`[1,2`)}}, Messages: []llm.Message{llm.UserText("go")}}, false},
		{"image without data or URL", llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.Image{}}}}}, false},
	}
	srv := start(t, loomtest.Text("never"))
	m := newModel(srv, anthropic.Config{})
	for _, c := range cases {
		both(t, m, c.req, func(mode string, _ llm.Response, err error) {
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.KindBadRequest || me.Retryable() {
				t.Fatalf("%s/%s: err = %v, want a non-retryable bad request", c.name, mode, err)
			}
			if c.history && !errors.Is(err, llm.ErrHistory) {
				t.Errorf("%s/%s: err does not match llm.ErrHistory: %v", c.name, mode, err)
			}
			if !strings.Contains(err.Error(), "not sent") {
				t.Errorf("%s/%s: the message does not say the request was not sent: %v", c.name, mode, err)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the server", n)
	}
	m = anthropic.New(anthropic.Config{BaseURL: srv.AnthropicURL()})
	if _, err := m.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}); model.KindOf(err) != model.KindBadRequest || !strings.Contains(err.Error(), "no model") {
		t.Fatalf("no model: %v", err)
	}
}

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

func TestSanitizeID(t *testing.T) {
	ids := []string{"toolu_01A", "call_abc-1", "call:abc.1/x", "call_abc_1_x", "call.abc:1/x", "a.b", "a/b", "a_b", "", "ü", "call abc", strings.Repeat("x", 300) + "."}
	seen := map[string]string{}
	for _, id := range ids {
		got := anthropic.SanitizeID(id)
		if !idPattern.MatchString(got) {
			t.Errorf("SanitizeID(%q) = %q, which the API refuses", id, got)
		}
		if idPattern.MatchString(id) && got != id {
			t.Errorf("SanitizeID(%q) = %q, want a valid id unchanged", id, got)
		}
		if again := anthropic.SanitizeID(id); again != got {
			t.Errorf("SanitizeID(%q) is not deterministic: %q then %q", id, got, again)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("SanitizeID maps both %q and %q to %q", prev, id, got)
		}
		seen[got] = id
	}
}

func TestForeignIDsKeepTheirPairing(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	ids := []string{"call:abc.1/x", "call.abc:1/x", "call_abc_1_x"}
	var calls, results []llm.Part
	for _, id := range ids {
		calls = append(calls, llm.ToolCall{ID: id, Name: "read_file", Arguments: `{"path":"a"}`})
		results = append(results, llm.ToolResult{CallID: id, Content: "content of " + id})
	}
	req := llm.Request{Tools: tools, Messages: []llm.Message{
		llm.UserText("go"), {Role: llm.RoleAssistant, Parts: calls}, {Role: llm.RoleUser, Parts: results},
	}}
	both(t, m, req, func(mode string, _ llm.Response, err error) {
		if err != nil {
			t.Fatal(err)
		}
		body(t, srv) // the server checks the ids and the pairing as the API does
		d := srv.LastRequest().Decoded.Messages
		sent, answered := d[1].ToolCalls(), d[2].ToolResults()
		for i := range ids {
			if sent[i].ID != answered[i].CallID || sent[i].ID != anthropic.SanitizeID(ids[i]) || answered[i].Content != "content of "+ids[i] {
				t.Errorf("%s: call %q went as %q, its result as %q (%q)", mode, ids[i], sent[i].ID, answered[i].CallID, answered[i].Content)
			}
		}
	})
}

func TestToolResultsComeFirstInOneMessage(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	var calls []llm.Part
	for i := range 5 {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprintf("toolu_%d", i), Name: "read_file", Arguments: `{"path":"a"}`})
	}
	// Five parallel calls: two succeeded, one failed, one panicked, one
	// timed out; the results and a note arrive in one message, the note
	// first.
	results := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		llm.Text{Text: "Some tools failed."},
		llm.ToolResult{CallID: "toolu_0", Content: "ok"},
		llm.ToolResult{CallID: "toolu_1", Content: "ok"},
		llm.ToolResult{CallID: "toolu_2", Content: "exit status 1", IsError: true},
		llm.Text{Text: ""},
		llm.ToolResult{CallID: "toolu_3", Content: "tool panicked: nil map", IsError: true},
		llm.ToolResult{CallID: "toolu_4", Content: "timed out after 30s", IsError: true},
	}}
	_, err := m.Generate(context.Background(), llm.Request{Tools: tools, Messages: []llm.Message{llm.UserText("go"), {Role: llm.RoleAssistant, Parts: calls}, results}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := body(t, srv)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	content := msgs[2].(map[string]any)["content"].([]any)
	var kinds []string
	for _, c := range content {
		b := c.(map[string]any)
		kinds = append(kinds, fmt.Sprint(b["type"], ":", b["tool_use_id"], ":", b["is_error"]))
	}
	want := "tool_result:toolu_0:<nil> tool_result:toolu_1:<nil> tool_result:toolu_2:true tool_result:toolu_3:true tool_result:toolu_4:true text:<nil>:<nil>"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("content\n%s\nwant\n%s", got, want)
	}
}

func TestAssistantBlocks(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	req := llm.Request{Tools: tools, Messages: []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Thinking{Text: "plan", Signature: "sig=="},
			llm.Thinking{Redacted: "ENCRYPTED"},
			llm.Thinking{Text: "reasoning from another provider"},
			llm.Text{Text: "Writing."},
			llm.ToolCall{ID: "toolu_1", Name: "read_file", Arguments: `{"path": "a.go",}`, Malformed: true},
			llm.ToolCall{ID: "toolu_2", Name: "list_dir"},
			llm.ToolCall{ID: "toolu_3", Name: "read_file", Arguments: `{"path":"b`, Incomplete: true, Malformed: true},
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResult{CallID: "toolu_1", Content: "arguments are not valid JSON", IsError: true},
			llm.ToolResult{CallID: "toolu_2", Content: "a.go"},
			llm.ToolResult{CallID: "toolu_3", Content: "tool call truncated", IsError: true},
		}},
		// Only thinking without a signature: nothing Anthropic accepts.
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Thinking{Text: "unsigned"}}},
		llm.UserText("continue"),
	}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	msgs := body(t, srv)["messages"].([]any)
	raw, _ := json.Marshal(msgs[1].(map[string]any)["content"])
	want := `[{"signature":"sig==","thinking":"plan","type":"thinking"},{"data":"ENCRYPTED","type":"redacted_thinking"},{"text":"Writing.","type":"text"},` +
		`{"id":"toolu_1","input":{},"name":"read_file","type":"tool_use"},{"id":"toolu_2","input":{},"name":"list_dir","type":"tool_use"},{"id":"toolu_3","input":{},"name":"read_file","type":"tool_use"}]`
	if string(raw) != want {
		t.Fatalf("assistant content\n%s\nwant\n%s", raw, want)
	}
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want the empty assistant message left out: %v", len(msgs), msgs)
	}
}

func TestImages(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{})
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
		llm.Text{Text: "what is this"},
		llm.Image{Data: []byte{0x89, 'P', 'N', 'G'}, MediaType: "image/png"},
		llm.Image{URL: "https://example.com/a.png"},
	}}}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	parts := srv.LastRequest().Decoded.Messages[0].Parts
	if len(parts) != 3 {
		t.Fatalf("parts %+v", parts)
	}
	if img := parts[1].(llm.Image); string(img.Data) != "\x89PNG" || img.MediaType != "image/png" {
		t.Errorf("image 1 arrived as %+v", img)
	}
	if img := parts[2].(llm.Image); img.URL != "https://example.com/a.png" {
		t.Errorf("image 2 arrived as %+v", img)
	}
}

func TestSamplingAndThinking(t *testing.T) {
	srv := start(t, loomtest.Text("ok"))
	m := newModel(srv, anthropic.Config{ThinkingBudget: 2048, MaxTokens: 8000})
	temp, topP := 0.5, 0.9
	if _, err := m.Generate(context.Background(), llm.Request{Temperature: &temp, TopP: &topP, Stop: []string{"END", "\n\n"}, Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	b := body(t, srv)
	raw, _ := json.Marshal([]any{b["temperature"], b["top_p"], b["stop_sequences"], b["thinking"]})
	if want := `[0.5,0.9,["END","\n\n"],{"budget_tokens":2048,"type":"enabled"}]`; string(raw) != want {
		t.Fatalf("got %s, want %s", raw, want)
	}
}

func TestResponseDetails(t *testing.T) {
	turn := loomtest.Turn{
		Parts: []llm.Part{llm.Thinking{Redacted: "ENC"}, llm.Text{Text: "hi"}},
		// 10 uncached input tokens: input_tokens is 10 on the wire.
		Usage: llm.Usage{InputTokens: 160, OutputTokens: 3, CacheReadTokens: 100, CacheWriteTokens: 50},
		ID:    "msg_42", Model: "claude-real",
	}
	srv := start(t, turn)
	m := newModel(srv, anthropic.Config{})
	both(t, m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, func(mode string, resp llm.Response, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if resp.ID != "msg_42" || resp.Model != "claude-real" || resp.RequestID != "req_loomtest_"+fmt.Sprint(srv.LastRequest().Seq) {
			t.Errorf("%s: ids %q %q %q", mode, resp.ID, resp.Model, resp.RequestID)
		}
		if resp.Usage != turn.Usage {
			t.Errorf("%s: usage %+v, want %+v", mode, resp.Usage, turn.Usage)
		}
		if th, ok := resp.Message.Parts[0].(llm.Thinking); !ok || th.Redacted != "ENC" {
			t.Errorf("%s: parts %+v", mode, resp.Message.Parts)
		}
	})
}

func TestStopReasons(t *testing.T) {
	cases := map[string]llm.FinishReason{
		"end_turn":                      llm.FinishStop,
		"stop_sequence":                 llm.FinishStop,
		"max_tokens":                    llm.FinishLength,
		"model_context_window_exceeded": llm.FinishLength,
		"tool_use":                      llm.FinishToolCalls,
		"refusal":                       llm.FinishContentFilter,
		"pause_turn":                    llm.FinishPause,
		"something_new":                 llm.FinishOther,
	}
	for reason, want := range cases {
		srv := start(t, loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, StopReason: reason})
		both(t, newModel(srv, anthropic.Config{}), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, func(mode string, resp llm.Response, err error) {
			if err != nil || resp.FinishReason != want {
				t.Errorf("%s %s: finish %q, err %v; want %q", reason, mode, resp.FinishReason, err, want)
			}
		})
	}
}

func TestErrorEventKeepsProviderFacts(t *testing.T) {
	srv := start(t, loomtest.ErrorEvent("overloaded_error", "Overloaded", 1))
	m := newModel(srv, anthropic.Config{})
	_, _, err := modeltest.StreamCall(context.Background(), m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	var e *model.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	// Classified by error.type, not by the 200 that carried it.
	if e.Kind != model.KindOverloaded || e.Status != 0 || e.Type != "overloaded_error" || e.Message != "Overloaded" || e.RequestID == "" || len(e.Raw) == 0 {
		t.Fatalf("error %+v", e)
	}
}

func ExampleNew() {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("Hello from the Messages API.")}})
	defer srv.Close()

	m := anthropic.New(anthropic.Config{
		APIKey:  "sk-ant-...",
		BaseURL: srv.AnthropicURL(), // the default is https://api.anthropic.com
		Model:   "claude-sonnet-4-5",
	})
	resp, err := m.Generate(context.Background(), llm.Request{
		System:   "You are terse.",
		Messages: []llm.Message{llm.UserText("Say hello.")},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Text(), resp.FinishReason)
	// Output: Hello from the Messages API. stop
}

func TestStreamRequestAnsweredWithJSON(t *testing.T) {
	// A proxy that ignores "stream": the blocking body of the same turn.
	msg := `{"id":"msg_9","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"whole"},{"type":"tool_use","id":"toolu_9","name":"list_dir","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":4,"output_tokens":2}}`
	srv2 := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
		{Body: msg, ContentType: "application/json"},
		{Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, ContentType: "application/json"},
	}})
	defer srv2.Close()
	m := newModel(srv2, anthropic.Config{})
	resp, evs, err := modeltest.StreamCall(context.Background(), m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	if err != nil || resp.Text() != "whole" || len(resp.ToolCalls()) != 1 || resp.FinishReason != llm.FinishToolCalls || resp.Usage.OutputTokens != 2 || resp.Truncated {
		t.Fatalf("resp %+v, events %v, err %v", resp, evs, err)
	}
	_, _, err = modeltest.StreamCall(context.Background(), m, llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
	if model.KindOf(err) != model.KindOverloaded {
		t.Fatalf("err = %v", err)
	}
}
