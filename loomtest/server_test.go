package loomtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
	"github.com/loomkit/loom/model/openai"
)

// post sends body to the server's endpoint for format f and returns the
// response with its body read.
func post(t *testing.T, srv *loomtest.Server, f loomtest.Format, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := tryPost(context.Background(), srv, f, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func tryPost(ctx context.Context, srv *loomtest.Server, f loomtest.Format, body string, hdr ...string) (*http.Response, []byte, error) {
	url := srv.URL() + "/v1/messages"
	if f == loomtest.OpenAI {
		url = srv.URL() + "/v1/chat/completions"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if f == loomtest.Anthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("x-api-key", "test-key")
	} else {
		req.Header.Set("Authorization", "Bearer test-key")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

const (
	antBody       = `{"model":"claude-test","max_tokens":100,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`
	antStreamBody = `{"model":"claude-test","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	oaiBody       = `{"model":"gpt-test","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`
	oaiStreamBody = `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
)

// frame is one event of our own canonical SSE output (event and data
// lines, a blank line after each).
type frame struct {
	event, data string
}

func frames(t *testing.T, body []byte) []frame {
	t.Helper()
	var out []frame
	for _, block := range strings.Split(string(body), "\n\n") {
		if block == "" {
			continue
		}
		var f frame
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				f.data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, ":"):
				f.event = "comment"
				f.data = line
			default:
				t.Fatalf("unexpected line %q in %q", line, body)
			}
		}
		out = append(out, f)
	}
	return out
}

func eventNames(fs []frame) string {
	var names []string
	for _, f := range fs {
		names = append(names, f.event)
	}
	return strings.Join(names, " ")
}

func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

var toolTurn = loomtest.Turn{
	Parts: []llm.Part{
		llm.Thinking{Text: "let me think", Signature: "sig-1"},
		llm.Text{Text: "Reading."},
		loomtest.Call("toolu_1", "read_file", `{"path": "a.go"}`),
		loomtest.Call("toolu_2", "list_dir", ``),
	},
	// 50 input tokens, 10 of them cached: Anthropic's input_tokens is 40.
	Usage: llm.Usage{InputTokens: 50, OutputTokens: 20, CacheReadTokens: 7, CacheWriteTokens: 3},
	ID:    "msg_1",
	Model: "claude-test",
}

func TestAnthropicBlocking(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{toolTurn}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.Anthropic, antBody)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("request-id") == "" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	jsonEqual(t, body, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
		"content":[
			{"type":"thinking","thinking":"let me think","signature":"sig-1"},
			{"type":"text","text":"Reading."},
			{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.go"}},
			{"type":"tool_use","id":"toolu_2","name":"list_dir","input":{}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":40,"output_tokens":20,"cache_creation_input_tokens":3,"cache_read_input_tokens":7}}`)
}

func TestAnthropicStream(t *testing.T) {
	turn := toolTurn
	turn.Pings = 1
	turn.Chunk = 4
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	fs := frames(t, body)
	want := "message_start ping " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop " + // thinking: 3 pieces + signature
		"content_block_start content_block_delta content_block_delta content_block_stop " + // text: 2 pieces
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop " + // {"path": "a.go"}: 4 pieces
		"content_block_start content_block_delta content_block_stop " + // empty input: one empty delta
		"message_delta message_stop"
	if got := eventNames(fs); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	for _, f := range fs {
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(f.data), &v); err != nil || v.Type != f.event {
			t.Fatalf("event %s has data %s (type %q, %v)", f.event, f.data, v.Type, err)
		}
	}
	jsonEqual(t, []byte(fs[0].data), `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,
		"usage":{"input_tokens":40,"output_tokens":1,"cache_creation_input_tokens":3,"cache_read_input_tokens":7}}}`)
	jsonEqual(t, []byte(fs[2].data), `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
	jsonEqual(t, []byte(fs[6].data), `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig-1"}}`)
	jsonEqual(t, []byte(fs[12].data), `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"read_file","input":{}}}`)
	jsonEqual(t, []byte(fs[13].data), `{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}`)
	jsonEqual(t, []byte(fs[len(fs)-2].data), `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)

	var args strings.Builder
	for _, f := range fs[13:17] {
		var d struct {
			Delta struct {
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(f.data), &d)
		args.WriteString(d.Delta.PartialJSON)
	}
	if args.String() != `{"path": "a.go"}` {
		t.Fatalf("arguments reassemble to %q", args.String())
	}
}

func TestOpenAIBlocking(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{toolTurn}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.OpenAI, oaiBody)
	if resp.StatusCode != 200 || resp.Header.Get("x-request-id") == "" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	jsonEqual(t, body, `{"id":"msg_1","object":"chat.completion","created":1767225600,"model":"claude-test",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Reading.","reasoning_content":"let me think","refusal":null,
			"tool_calls":[
				{"id":"toolu_1","type":"function","function":{"name":"read_file","arguments":"{\"path\": \"a.go\"}"}},
				{"id":"toolu_2","type":"function","function":{"name":"list_dir","arguments":""}}]},
			"finish_reason":"tool_calls","logprobs":null}],
		"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":7},"completion_tokens_details":{"reasoning_tokens":0}}}`)
}

func TestOpenAIStream(t *testing.T) {
	turn := toolTurn
	turn.Chunk = 8
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn, turn}})
	defer srv.Close()

	_, body := post(t, srv, loomtest.OpenAI, oaiStreamBody)
	fs := frames(t, body)
	if last := fs[len(fs)-1]; last.data != "[DONE]" {
		t.Fatalf("last frame %q, want [DONE]", last.data)
	}
	jsonEqual(t, []byte(fs[len(fs)-2].data), `{"id":"msg_1","object":"chat.completion.chunk","created":1767225600,"model":"claude-test","choices":[],
		"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70,"prompt_tokens_details":{"cached_tokens":7},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	jsonEqual(t, []byte(fs[len(fs)-3].data), `{"id":"msg_1","object":"chat.completion.chunk","created":1767225600,"model":"claude-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)

	type chunk struct {
		Choices []struct {
			Delta struct {
				Content          *string `json:"content"`
				ReasoningContent *string `json:"reasoning_content"`
				ToolCalls        []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
	}
	var text, reasoning string
	args := map[int]string{}
	ids := map[int]string{}
	for _, f := range fs[:len(fs)-3] {
		var c chunk
		if err := json.Unmarshal([]byte(f.data), &c); err != nil {
			t.Fatal(err)
		}
		d := c.Choices[0].Delta
		if d.Content != nil {
			text += *d.Content
		}
		if d.ReasoningContent != nil {
			reasoning += *d.ReasoningContent
		}
		for _, tc := range d.ToolCalls {
			args[tc.Index] += tc.Function.Arguments
			if tc.ID != "" {
				ids[tc.Index] = tc.ID
			}
		}
	}
	if text != "Reading." || reasoning != "let me think" || args[0] != `{"path": "a.go"}` || args[1] != "" || ids[0] != "toolu_1" || ids[1] != "toolu_2" {
		t.Fatalf("text %q reasoning %q args %v ids %v", text, reasoning, args, ids)
	}

	// Without include_usage there is no usage chunk.
	_, body = post(t, srv, loomtest.OpenAI, `{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if bytes.Contains(body, []byte(`"usage"`)) {
		t.Fatalf("usage sent without include_usage:\n%s", body)
	}
}

func TestRecordsRequests(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("a"), loomtest.Text("b")}})
	defer srv.Close()
	post(t, srv, loomtest.Anthropic, antBody, "X-Custom", "1")
	post(t, srv, loomtest.OpenAI, oaiStreamBody)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	a, o := reqs[0], reqs[1]
	if a.Format != loomtest.Anthropic || a.Seq != 1 || a.Turn != 0 || a.Stream || a.Header.Get("X-Custom") != "1" || string(a.Body) != antBody || a.Err != nil {
		t.Fatalf("anthropic request %+v", a)
	}
	if a.Decoded.System != "be brief" || a.Decoded.MaxTokens != 100 || a.Decoded.Model != "claude-test" || a.Decoded.Messages[0].Text() != "hi" {
		t.Fatalf("decoded %+v", a.Decoded)
	}
	if o.Format != loomtest.OpenAI || !o.Stream || !o.IncludeUsage || o.Turn != 1 || o.Path != "/v1/chat/completions" {
		t.Fatalf("openai request %+v", o)
	}
	if srv.LastRequest() != o {
		t.Fatal("LastRequest is not the last request")
	}
}

func TestDecodesToolRoundTrip(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("a"), loomtest.Text("b")}})
	defer srv.Close()
	post(t, srv, loomtest.Anthropic, `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"sys"}],
		"tools":[{"name":"read","description":"reads","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},
		"messages":[
		{"role":"user","content":[{"type":"text","text":"go"}]},
		{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"a1","name":"read","input":{"p":1}},{"type":"tool_use","id":"a2","name":"read","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"a1","content":"one"},{"type":"tool_result","tool_use_id":"a2","is_error":true,"content":[{"type":"text","text":"two"}]},{"type":"text","text":"more"}]}]}`)
	post(t, srv, loomtest.OpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"read"}},
		"messages":[{"role":"developer","content":"sys"},{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}},{"id":"c2","type":"function","function":{"name":"read","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"one"},{"role":"tool","tool_call_id":"c2","content":"two"}]}`)
	reqs := srv.Requests()
	for _, r := range reqs {
		if r.Err != nil {
			t.Fatalf("%s refused: %v", r.Format, r.Err)
		}
	}
	a := reqs[0].Decoded
	wantA := []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Thinking{Text: "t", Signature: "s"}, llm.ToolCall{ID: "a1", Name: "read", Arguments: `{"p":1}`}, llm.ToolCall{ID: "a2", Name: "read", Arguments: `{}`}}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "a1", Content: "one"}, llm.ToolResult{CallID: "a2", Content: "two", IsError: true}, llm.Text{Text: "more"}}},
	}
	if !reflect.DeepEqual(a.Messages, wantA) || a.System != "sys" || a.ToolChoice.Mode != llm.ToolRequired || a.Tools[0].Name != "read" {
		t.Fatalf("anthropic decoded %+v", a)
	}
	o := reqs[1].Decoded
	wantO := []llm.Message{
		llm.UserText("go"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "read", Arguments: `{"p":1}`}, llm.ToolCall{ID: "c2", Name: "read", Arguments: `{}`}}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c1", Content: "one"}, llm.ToolResult{CallID: "c2", Content: "two"}}},
	}
	if !reflect.DeepEqual(o.Messages, wantO) || o.System != "sys" || o.ToolChoice.Mode != llm.ToolSpecific || o.ToolChoice.Names[0] != "read" {
		t.Fatalf("openai decoded %+v", o)
	}
	if err := llm.CheckHistory(a.Messages); err != nil {
		t.Fatal(err)
	}
}

// Images of tool results: inside Anthropic's tool_result content, and in
// the OpenAI user message that follows the tool messages.
func TestDecodesResultImages(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("a"), loomtest.Text("b")}})
	defer srv.Close()
	post(t, srv, loomtest.Anthropic, `{"model":"m","max_tokens":10,"messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":[{"type":"tool_use","id":"a1","name":"shot","input":{}},{"type":"tool_use","id":"a2","name":"shot","input":{}},{"type":"tool_use","id":"a3","name":"shot","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"a1","content":[{"type":"text","text":"one"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}}]},
			{"type":"tool_result","tool_use_id":"a2","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]},
			{"type":"tool_result","tool_use_id":"a3","is_error":true,"content":[{"type":"text","text":"failed"}]},
			{"type":"text","text":"Images from the result of call a3:"},
			{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}}]}]}`)
	post(t, srv, loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"shot","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"one"},
		{"role":"user","content":[{"type":"text","text":"Images from the result of call c1 (shot):"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]}]}`)
	reqs := srv.Requests()
	for _, r := range reqs {
		if r.Err != nil {
			t.Fatalf("%s refused: %v", r.Format, r.Err)
		}
	}
	wantA := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		llm.ToolResult{CallID: "a1", Content: "one", Images: []llm.Image{{Data: []byte("\x89PNG"), MediaType: "image/png"}}},
		llm.ToolResult{CallID: "a2", Images: []llm.Image{{URL: "https://x/y.png"}}},
		llm.ToolResult{CallID: "a3", Content: "failed", IsError: true},
		llm.Text{Text: "Images from the result of call a3:"},
		llm.Image{Data: []byte("GIF"), MediaType: "image/gif"},
	}}
	if got := reqs[0].Decoded.Messages[2]; !reflect.DeepEqual(got, wantA) {
		t.Fatalf("anthropic decoded\n%+v\nwant\n%+v", got, wantA)
	}
	wantO := []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c1", Content: "one"}}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.Text{Text: "Images from the result of call c1 (shot):"}, llm.Image{URL: "data:image/png;base64,iVBORw=="}}},
	}
	if got := reqs[1].Decoded.Messages[2:]; !reflect.DeepEqual(got, wantO) {
		t.Fatalf("openai decoded\n%+v\nwant\n%+v", got, wantO)
	}
}

// The output schema of structured output is read back in both formats,
// byte for byte: Anthropic's output_config.format (no name) and OpenAI's
// response_format; OpenAI's text and json_object formats ask for none.
func TestDecodesOutputSchema(t *testing.T) {
	const schema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("a")}, Repeat: true})
	defer srv.Close()
	post(t, srv, loomtest.Anthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":`+schema+`}}}`)
	post(t, srv, loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"weather","strict":true,"schema":`+schema+`}}}`)
	post(t, srv, loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`)
	post(t, srv, loomtest.Anthropic, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"output_config":{"effort":"low"}}`)
	post(t, srv, loomtest.Anthropic, antBody)
	reqs := srv.Requests()
	for _, r := range reqs {
		if r.Err != nil {
			t.Fatalf("request %d refused: %v", r.Seq, r.Err)
		}
	}
	a, o := reqs[0].Decoded.Schema, reqs[1].Decoded.Schema
	if a == nil || a.Name != "" || string(a.Schema) != schema {
		t.Fatalf("anthropic schema %+v", a)
	}
	if o == nil || o.Name != "weather" || string(o.Schema) != schema {
		t.Fatalf("openai schema %+v", o)
	}
	for _, r := range reqs[2:] {
		if r.Decoded.Schema != nil {
			t.Fatalf("request %d: schema %+v where none was asked for", r.Seq, r.Decoded.Schema)
		}
	}
}

func TestRefusesWhatTheVendorRefuses(t *testing.T) {
	cases := []struct {
		name   string
		format loomtest.Format
		body   string
		want   string
	}{
		{"no max_tokens", loomtest.Anthropic, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{"system as a message", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}]}`, "messages.0.role"},
		{"empty text block", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "text content blocks must be non-empty"},
		{"tool_use without result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":"next"}]}`,
			"messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1"},
		{"orphan tool_result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"x"}]}]}`,
			"unexpected `tool_use_id` found in `tool_result` blocks: t9"},
		{"text before results", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`,
			"tool_result blocks must come first"},
		{"bad id", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"call:abc.1/x","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call:abc.1/x","content":"x"}]}]}`,
			"String should match pattern '^[a-zA-Z0-9_-]+$'"},
		{"duplicate ids", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}},{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`,
			"`tool_use` ids must be unique"},
		{"input not an object", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":"{bad"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`,
			"Input should be a valid dictionary"},
		{"thinking without signature", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"x"}]}]}`,
			"signature: Field required"},
		{"tool name", loomtest.Anthropic, `{"model":"m","max_tokens":5,"tools":[{"name":"fs.read/file","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"hi"}]}`,
			"tools.0.custom.name"},
		{"image in a failed result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"failed"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}}]}]}]}`,
			"messages.2.content.0.tool_result: all content must be type 'text' if 'is_error' is true"},
		{"tool_use inside a result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"tool_use","id":"t2","name":"x","input":{}}]}]}]}`,
			"messages.2.content.0.tool_result.content.0.type: Input tag 'tool_use'"},
		{"empty text in a result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":""}]}]}]}`,
			"tool_result.content.0: text content blocks must be non-empty"},
		{"image media type", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/svg+xml","data":"PHN2Zz4="}}]}]}`,
			"messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"},
		{"empty image in a result", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""}}]}]}]}`,
			"messages.2.content.0.tool_result.content.0.image.source.base64: image cannot be empty"},
		{"image over 5 MB of base64", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + strings.Repeat("AAAA", 5<<20/4+1) + `"}}]}]}`,
			"image exceeds 5 MB maximum: 5242884 bytes"},
		{"image in a tool message", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"shot"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw=="}}]}]}`,
			"Invalid 'messages[2]'. Image URLs are only allowed for messages with role 'user', but this message with role 'tool' contains an image URL."},
		{"data URL of another type", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:application/pdf;base64,JVBERg=="}}]}]}`,
			"Invalid 'messages[0].content[0].image_url.url'. Expected a base64-encoded data URL with an image MIME type"},
		{"image part without url", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`,
			"Missing required parameter: 'messages[0].content[0].image_url.url'."},
		{"missing tool message", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},{"role":"user","content":"next"}]}`,
			"The following tool_call_ids did not have response messages: c1"},
		{"orphan tool message", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
			"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"arguments as an object", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":{}}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
			"could not parse the JSON body"},
		{"stream_options without stream", loomtest.OpenAI, `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			"only allowed when 'stream' is enabled"},
		{"output format of another type", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json","schema":{"type":"object"}}}}`,
			"output_config.format.type: Input tag 'json' found using 'type' does not match any of the expected tags: 'json_schema'"},
		{"output format without type", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"schema":{"type":"object"}}}}`,
			"output_config.format.type: Input tag '' found"},
		{"output format without schema", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema"}}}`,
			"output_config.format.json_schema.schema: Field required"},
		{"output schema not an object", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":"{\"type\":\"object\"}"}}}`,
			"output_config.format.json_schema.schema: Input should be a valid dictionary"},
		{"output schema an array", loomtest.Anthropic, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":[]}}}`,
			"output_config.format.json_schema.schema: Input should be a valid dictionary"},
		{"response_format of another type", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"schema"}}`,
			"Invalid value: 'schema'. Supported values are: 'text', 'json_object', and 'json_schema'."},
		{"response_format without json_schema", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema"}}`,
			"Missing required parameter: 'response_format.json_schema'."},
		{"json_schema without name", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object"}}}}`,
			"Missing required parameter: 'response_format.json_schema.name'."},
		{"json_schema name off the pattern", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"my schema","schema":{"type":"object"}}}}`,
			"Invalid 'response_format.json_schema.name': string does not match pattern."},
		{"json_schema schema a string", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":"{}"}}}`,
			"Invalid type for 'response_format.json_schema.schema': expected an object, but got a string instead."},
		{"json_schema schema an array", loomtest.OpenAI, `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":[]}}}`,
			"Invalid type for 'response_format.json_schema.schema': expected an object, but got an array instead."},
		{"not JSON", loomtest.OpenAI, `{"model":`, "could not parse the JSON body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("never")}})
			defer srv.Close()
			resp, body := post(t, srv, c.format, c.body)
			if resp.StatusCode != 400 || !strings.Contains(string(body), c.want) || !strings.Contains(string(body), "invalid_request_error") {
				t.Fatalf("status %d body %s, want 400 with %q", resp.StatusCode, body, c.want)
			}
			if resp.Header.Get("x-should-retry") != "false" {
				t.Fatal("a refusal must say it is not worth retrying")
			}
			rec := srv.LastRequest()
			if rec.Err == nil || rec.Turn != -1 {
				t.Fatalf("recorded %+v", rec)
			}
			// The refused request took no turn: the next good one gets it.
			good := antBody
			if c.format == loomtest.OpenAI {
				good = oaiBody
			}
			if resp, body := post(t, srv, c.format, good); resp.StatusCode != 200 || !strings.Contains(string(body), "never") {
				t.Fatalf("good request after a refusal: %d %s", resp.StatusCode, body)
			}
		})
	}
}

func TestLenientAcceptsAnything(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Lenient: true, Turns: []loomtest.Turn{loomtest.Text("ok")}})
	defer srv.Close()
	if resp, body := post(t, srv, loomtest.Anthropic, `{"model":"m","messages":[{"role":"system","content":"x"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestStatusFaults(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{
		Anthropic: []loomtest.Turn{
			loomtest.Status(429, "", "").WithHeader("retry-after", "2").WithHeader("retry-after-ms", "1500"),
			loomtest.Status(529, "overloaded_error", "Overloaded"),
			{Status: 429, Error: &loomtest.APIError{Type: "rate_limit_error", Message: "spend", Code: "enforced_spend_limit_reached"}},
		},
		OpenAI: []loomtest.Turn{
			{Status: 429, Error: &loomtest.APIError{Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota"}},
			loomtest.Status(500, "", "").WithHeader("x-should-retry", "false"),
		},
	})
	defer srv.Close()

	resp, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	if resp.StatusCode != 429 || resp.Header.Get("retry-after") != "2" || resp.Header.Get("retry-after-ms") != "1500" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	jsonEqual(t, body, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
	resp, body = post(t, srv, loomtest.Anthropic, antBody)
	if resp.StatusCode != 529 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	jsonEqual(t, body, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	_, body = post(t, srv, loomtest.Anthropic, antBody)
	jsonEqual(t, body, `{"type":"error","error":{"type":"rate_limit_error","message":"spend","details":{"error_code":"enforced_spend_limit_reached"}}}`)

	resp, body = post(t, srv, loomtest.OpenAI, oaiBody)
	if resp.StatusCode != 429 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	jsonEqual(t, body, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	resp, body = post(t, srv, loomtest.OpenAI, oaiStreamBody)
	if resp.StatusCode != 500 || resp.Header.Get("x-should-retry") != "false" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	jsonEqual(t, body, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
}

func TestHTMLPage(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.HTMLPage(0), loomtest.HTMLPage(502)}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.OpenAI, oaiStreamBody)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "<html>") {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, _ = post(t, srv, loomtest.Anthropic, antBody)
	if resp.StatusCode != 502 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestErrorEvent(t *testing.T) {
	turn := loomtest.Text("hello")
	turn.Error = &loomtest.APIError{Type: "overloaded_error", Message: "Overloaded"}
	turn.ErrorAfter = 3
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn, turn, turn}})
	defer srv.Close()

	resp, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	fs := frames(t, body)
	if resp.StatusCode != 200 || eventNames(fs) != "message_start content_block_start content_block_delta error" {
		t.Fatalf("%d events %q", resp.StatusCode, eventNames(fs))
	}
	jsonEqual(t, []byte(fs[3].data), `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)

	_, body = post(t, srv, loomtest.OpenAI, oaiStreamBody)
	fs = frames(t, body)
	if len(fs) != 4 || fs[3].data == "[DONE]" {
		t.Fatalf("frames %v", fs)
	}
	jsonEqual(t, []byte(fs[3].data), `{"error":{"message":"Overloaded","type":"overloaded_error","param":null,"code":null}}`)

	// The blocking form of an overloaded error event is a 529.
	resp, body = post(t, srv, loomtest.Anthropic, antBody)
	if resp.StatusCode != 529 {
		t.Fatalf("blocking: %d %s", resp.StatusCode, body)
	}
}

func TestCutEnd(t *testing.T) {
	turn := loomtest.ToolCalls(loomtest.Call("t1", "read", `{"path":"a.go"}`)).CutAt(3, loomtest.CutEnd)
	turn.Chunk = 5
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn, turn, turn}})
	defer srv.Close()
	_, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	if got := eventNames(frames(t, body)); got != "message_start content_block_start content_block_delta" {
		t.Fatalf("events %q", got)
	}
	_, body = post(t, srv, loomtest.OpenAI, oaiStreamBody)
	if fs := frames(t, body); len(fs) != 3 || bytes.Contains(body, []byte("[DONE]")) || bytes.Contains(body, []byte("finish_reason\":\"")) {
		t.Fatalf("openai cut stream:\n%s", body)
	}
	// A blocking answer is cut to half its body: not JSON.
	resp, body := post(t, srv, loomtest.Anthropic, antBody)
	if resp.StatusCode != 200 || json.Valid(body) || len(body) == 0 {
		t.Fatalf("blocking cut: %d %q", resp.StatusCode, body)
	}
}

func TestCutAbort(t *testing.T) {
	turn := loomtest.Text("hello").CutAt(2, loomtest.CutAbort)
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	resp, body, err := tryPost(context.Background(), srv, loomtest.Anthropic, antStreamBody)
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("abort: err %v", err)
	}
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte("content_block_start")) || bytes.Contains(body, []byte("content_block_delta")) {
		t.Fatalf("before the abort: %d %q", resp.StatusCode, body)
	}
}

func TestReset(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{{Reset: true}, loomtest.Text("after")}})
	defer srv.Close()
	if _, _, err := tryPost(context.Background(), srv, loomtest.OpenAI, oaiBody); err == nil {
		t.Fatal("a reset connection gave no error")
	}
	if _, body := post(t, srv, loomtest.OpenAI, oaiBody); !strings.Contains(string(body), "after") {
		t.Fatalf("after the reset: %s", body)
	}
}

func TestSilenceEndsWithTheClient(t *testing.T) {
	turn := loomtest.Turn{Pings: 1, Cut: loomtest.CutSilence, CutAfter: 2}
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(antStreamBody))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var got []byte
	for !bytes.Contains(got, []byte("event: ping")) {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatalf("read: %v (got %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	// Now nothing comes; the read blocks until we give up.
	done := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("silence was broken: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("read after cancel gave no error")
	}
}

func TestCloseEndsSilenceAndDelays(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
		{Cut: loomtest.CutSilence},
		{HeaderDelay: time.Hour},
	}})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := tryPost(context.Background(), srv, loomtest.Anthropic, antStreamBody)
			errs <- err
		}()
	}
	for len(srv.Requests()) < 2 {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a request cut by Close gave no error")
		}
	}
}

func TestPingEveryDuringSilence(t *testing.T) {
	turn := loomtest.Turn{Cut: loomtest.CutSilence, CutAfter: 1, PingEvery: time.Millisecond}
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(antStreamBody))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []byte
	buf := make([]byte, 4096)
	for bytes.Count(got, []byte("event: ping")) < 3 {
		n, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if bytes.Contains(got, []byte("content_block")) {
		t.Fatalf("content during the silence: %q", got)
	}
}

func TestDelays(t *testing.T) {
	turn := loomtest.Text("abcdef")
	turn.Chunk = 2
	turn.HeaderDelay = 20 * time.Millisecond
	turn.EventDelay = 5 * time.Millisecond
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	start := time.Now()
	_, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	// 8 events: 20ms before the headers and 7 gaps of 5ms at least.
	if d := time.Since(start); d < 55*time.Millisecond {
		t.Fatalf("answered in %v, before its delays passed", d)
	}
	if got := eventNames(frames(t, body)); !strings.HasSuffix(got, "message_stop") {
		t.Fatalf("events %q", got)
	}
}

func TestFuncScriptSeesTheRequest(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Func: func(r *loomtest.Request) loomtest.Turn {
		return loomtest.Text("echo: " + r.Decoded.Messages[len(r.Decoded.Messages)-1].Text())
	}})
	defer srv.Close()
	_, body := post(t, srv, loomtest.Anthropic, antBody)
	if !strings.Contains(string(body), "echo: hi") {
		t.Fatalf("body %s", body)
	}
	if srv.LastRequest().Turn != -1 {
		t.Fatal("a Func answer is not a script turn")
	}
}

func TestExhaustedAndRepeat(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.Text("only")}})
	defer srv.Close()
	post(t, srv, loomtest.OpenAI, oaiBody)
	resp, body := post(t, srv, loomtest.OpenAI, oaiBody)
	if resp.StatusCode != 500 || resp.Header.Get("x-should-retry") != "false" || !strings.Contains(string(body), "no turn left") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	srv.Add(loomtest.Text("added"))
	if _, body := post(t, srv, loomtest.OpenAI, oaiBody); !strings.Contains(string(body), "added") {
		t.Fatalf("after Add: %s", body)
	}

	rep := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{loomtest.Text("one"), loomtest.Text("two")}})
	defer rep.Close()
	var got []string
	for range 3 {
		_, body := post(t, rep, loomtest.OpenAI, oaiBody)
		var v struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		json.Unmarshal(body, &v)
		got = append(got, v.Choices[0].Message.Content)
	}
	if strings.Join(got, " ") != "one two one" {
		t.Fatalf("repeat played %v", got)
	}
}

func TestAPIKey(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{APIKey: "right", Turns: []loomtest.Turn{loomtest.Text("ok")}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.Anthropic, antBody, "x-api-key", "wrong")
	if resp.StatusCode != 401 || !strings.Contains(string(body), "authentication_error") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = post(t, srv, loomtest.OpenAI, oaiBody)
	if resp.StatusCode != 401 || !strings.Contains(string(body), "invalid_api_key") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, srv, loomtest.OpenAI, oaiBody, "Authorization", "Bearer right"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestMalformedArguments(t *testing.T) {
	turn := loomtest.ToolCalls(loomtest.Call("t1", "write", `{"path": "a.go",}`))
	srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	_, body := post(t, srv, loomtest.Anthropic, antBody)
	// Blocking Anthropic input must be JSON: the bad text travels as a string.
	if !bytes.Contains(body, []byte(`"input":"{\"path\": \"a.go\",}"`)) {
		t.Fatalf("blocking body %s", body)
	}
	_, body = post(t, srv, loomtest.Anthropic, antStreamBody)
	if !bytes.Contains(body, []byte(`"partial_json":"{\"path\": \"a.go\",}"`)) {
		t.Fatalf("stream body %s", body)
	}
	_, body = post(t, srv, loomtest.OpenAI, oaiBody)
	if !bytes.Contains(body, []byte(`"arguments":"{\"path\": \"a.go\",}"`)) {
		t.Fatalf("openai body %s", body)
	}
}

func TestChunksSplitOnRuneBoundaries(t *testing.T) {
	turn := loomtest.Text("héllo wörld ✓")
	turn.Chunk = 2
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
	defer srv.Close()
	_, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	var text strings.Builder
	for _, f := range frames(t, body) {
		if f.event != "content_block_delta" {
			continue
		}
		var d struct {
			Delta struct{ Text string }
		}
		if err := json.Unmarshal([]byte(f.data), &d); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(d.Delta.Text, '\uFFFD') || len(d.Delta.Text) > 3 {
			t.Fatalf("piece %q", d.Delta.Text)
		}
		text.WriteString(d.Delta.Text)
	}
	if text.String() != "héllo wörld ✓" {
		t.Fatalf("reassembled %q", text.String())
	}
}

func TestStopReasons(t *testing.T) {
	cases := []struct {
		turn      loomtest.Turn
		anthropic string
		openai    string
	}{
		{loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, Finish: llm.FinishLength}, "max_tokens", "length"},
		{loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, Finish: llm.FinishContentFilter}, "refusal", "content_filter"},
		{loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, Finish: llm.FinishPause}, "pause_turn", "stop"},
		{loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "x"}}, StopReason: "model_context_window_exceeded"}, "model_context_window_exceeded", "model_context_window_exceeded"},
	}
	for _, c := range cases {
		srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{c.turn}})
		_, body := post(t, srv, loomtest.Anthropic, antBody)
		if !bytes.Contains(body, []byte(`"stop_reason":"`+c.anthropic+`"`)) {
			t.Errorf("anthropic body %s, want %s", body, c.anthropic)
		}
		_, body = post(t, srv, loomtest.Anthropic, antStreamBody)
		if !bytes.Contains(body, []byte(`"stop_reason":"`+c.anthropic+`"`)) {
			t.Errorf("anthropic stream %s, want %s", body, c.anthropic)
		}
		_, body = post(t, srv, loomtest.OpenAI, oaiBody)
		if !bytes.Contains(body, []byte(`"finish_reason":"`+c.openai+`"`)) {
			t.Errorf("openai body %s, want %s", body, c.openai)
		}
		srv.Close()
	}
}

func TestRawStream(t *testing.T) {
	raw := "event: message_start\r\ndata:{\"type\":\"message_start\"}\r\n\r\n"
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{loomtest.RawStream(raw)}})
	defer srv.Close()
	resp, body := post(t, srv, loomtest.Anthropic, antStreamBody)
	if string(body) != raw || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%v %q", resp.Header, body)
	}
}

func TestNotFoundAndMethod(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{})
	defer srv.Close()
	resp, err := http.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, err = http.Get(srv.URL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestTooLarge(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{MaxBodyBytes: 1000, Turns: []loomtest.Turn{loomtest.Text("x")}})
	defer srv.Close()
	big := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	resp, body := post(t, srv, loomtest.Anthropic, big)
	if resp.StatusCode != 413 || !strings.Contains(string(body), "request_too_large") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestConcurrentRequests(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Repeat: true, Turns: []loomtest.Turn{toolTurn}})
	defer srv.Close()
	var wg sync.WaitGroup
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			body := antBody
			f := loomtest.Anthropic
			if i%2 == 1 {
				body, f = oaiStreamBody, loomtest.OpenAI
			}
			resp, _, err := tryPost(context.Background(), srv, f, body)
			if err == nil && resp.StatusCode != 200 {
				err = errors.New(resp.Status)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]bool{}
	for _, r := range srv.Requests() {
		seen[r.Seq] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct requests recorded, want %d", len(seen), n)
	}
}

func TestResetSendsNoHeaders(t *testing.T) {
	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{{Reset: true}}})
	defer srv.Close()
	resp, _, err := tryPost(context.Background(), srv, loomtest.Anthropic, antBody)
	if err == nil || resp != nil {
		t.Fatalf("a reset before headers gave a response: %v, %v", resp, err)
	}
}

// A flood is an answer that does not end: in a stream the content, then
// the flood text (or a call's arguments) again and again, never a finish
// or an end marker; a blocking body closed when FloodBytes are sent is a
// whole answer of the flood repeated.
func TestFlood(t *testing.T) {
	flood := "xy\"z"
	want := strings.Repeat(flood, 100)
	for _, call := range []string{"", "write_file"} {
		turn := loomtest.Turn{Parts: []llm.Part{llm.Text{Text: "Start."}}, Flood: flood, FloodBytes: 400, FloodCall: call}
		for _, f := range []loomtest.Format{loomtest.Anthropic, loomtest.OpenAI} {
			for _, stream := range []bool{false, true} {
				srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{turn}})
				m := adapter(f, srv)
				var resp llm.Response
				var err error
				if stream {
					resp, err = foldStream(m)
				} else {
					resp, err = m.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}})
				}
				srv.Close()
				name := fmt.Sprintf("%s call=%q stream=%v", f, call, stream)
				if stream {
					if model.KindOf(err) != model.KindTruncatedStream {
						t.Errorf("%s: err = %v, want a cut stream", name, err)
					}
				} else if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				got := resp.Text()
				if stream {
					got = strings.TrimPrefix(got, "Start.")
				}
				if call != "" {
					cs := resp.ToolCalls()
					if len(cs) != 1 || cs[0].Name != call {
						t.Errorf("%s: calls %+v", name, cs)
						continue
					}
					var args struct{ Content string }
					if json.Unmarshal(cs[0].Args(), &args) != nil && !stream {
						t.Errorf("%s: arguments are not JSON: %.80s", name, cs[0].Arguments)
					}
					got = strings.TrimPrefix(cs[0].Arguments, `{"content":"`)
					if !stream {
						got = args.Content
					} else {
						got = strings.ReplaceAll(got, `\"`, `"`)
					}
				}
				if got != want {
					t.Errorf("%s: got %.80q, want the flood 100 times", name, got)
				}
			}
		}
	}
}

func adapter(f loomtest.Format, srv *loomtest.Server) model.Model {
	if f == loomtest.Anthropic {
		return anthropic.New(anthropic.Config{BaseURL: srv.AnthropicURL(), APIKey: "k", Model: "claude-test"})
	}
	return openai.New(openai.Config{BaseURL: srv.OpenAIURL(), APIKey: "k", Model: "gpt-test"})
}

func foldStream(m model.Model) (llm.Response, error) {
	var acc llm.Accumulator
	for ev, err := range m.Stream(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}) {
		if err != nil {
			return acc.Response(), err
		}
		acc.Add(ev)
	}
	return acc.Response(), nil
}
