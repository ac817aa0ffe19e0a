package openai_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
)

func TestGenerateMapping(t *testing.T) {
	body := `{"id":"chatcmpl-9","object":"chat.completion","model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant",
"reasoning_content":"think first","content":"Two calls.","tool_calls":[
{"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}},
{"id":"call_b","type":"function","function":{"name":"write_file","arguments":"{\"path\": \"a.go\",}"}},
{"id":"call_c","type":"function","function":{"name":"list_dir","arguments":""}}]},"finish_reason":"tool_calls"}],
"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":12}}}`
	m, _ := start(t, openai.Config{}, jsonReply(200, body, "x-request-id", "req_42"))
	resp, err := m.Generate(bg, userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Thinking{Text: "think first"},
			llm.Text{Text: "Two calls."},
			llm.ToolCall{ID: "call_a", Name: "read_file", Arguments: `{"path":"a.go"}`},
			llm.ToolCall{ID: "call_b", Name: "write_file", Arguments: `{"path": "a.go",}`, Malformed: true},
			llm.ToolCall{ID: "call_c", Name: "list_dir", Arguments: "{}"},
		}},
		Usage:        llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 64, ReasoningTokens: 12},
		FinishReason: llm.FinishToolCalls,
		ID:           "chatcmpl-9",
		Model:        "deepseek-reasoner",
		RequestID:    "req_42",
	}
	if string(resp.Raw) != body {
		t.Errorf("Raw is not the body: %s", resp.Raw)
	}
	resp.Raw = nil
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("got  %+v\nwant %+v", resp, want)
	}
}

func TestFinishReasons(t *testing.T) {
	for wire, want := range map[string]llm.FinishReason{
		"stop": llm.FinishStop, "length": llm.FinishLength, "tool_calls": llm.FinishToolCalls,
		"function_call": llm.FinishToolCalls, "content_filter": llm.FinishContentFilter, "eos": llm.FinishOther,
	} {
		m, _ := start(t, openai.Config{},
			jsonReply(200, `{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"`+wire+`"}]}`),
			sseReply(events(`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"`+wire+`"}]}`)))
		resp, err := m.Generate(bg, userReq("q"))
		sresp, _, serr := collect(m.Stream(bg, userReq("q")))
		if err != nil || serr != nil || resp.FinishReason != want || sresp.FinishReason != want {
			t.Errorf("%s: %q %q %v %v", wire, resp.FinishReason, sresp.FinishReason, err, serr)
		}
	}
}

// parity holds one answer written both ways, as a server would send it.
var parity = []struct {
	name     string
	blocking string
	stream   string
}{
	{
		name:     "text and usage",
		blocking: `{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello world"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}`,
		stream: events(
			`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","model":"gpt-x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-1","model":"gpt-x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}}`),
	},
	{
		name:     "reasoning and parallel calls",
		blocking: `{"id":"r1","model":"deepseek-reasoner","choices":[{"index":0,"message":{"reasoning_content":"Let me see.","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":9}}`,
		stream: events(
			`{"id":"r1","model":"deepseek-reasoner","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me"}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"reasoning_content":" see."}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{\"tz\""}}]}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":\"CET\"}"}}]}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
			`{"id":"r1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"id":"r1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9}}`),
	},
	{
		name:     "malformed and empty arguments",
		blocking: `{"id":"m1","choices":[{"index":0,"message":{"tool_calls":[{"id":"c1","type":"function","function":{"name":"edit","arguments":"{\"path\": \"a.go\",}"}},{"id":"c2","type":"function","function":{"name":"noop","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
		stream: events(
			`{"id":"m1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"edit","arguments":"{\"path\": "}}]}}]}`,
			`{"id":"m1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.go\",}"}}]}}]}`,
			`{"id":"m1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","function":{"name":"noop"}}]}}]}`,
			`{"id":"m1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`),
	},
	{
		name:     "length inside a tool call",
		blocking: `{"id":"l1","choices":[{"index":0,"message":{"content":"Writing","tool_calls":[{"id":"c1","type":"function","function":{"name":"write","arguments":"{\"text\":\"abc"}}]},"finish_reason":"length"}]}`,
		stream: events(
			`{"id":"l1","choices":[{"index":0,"delta":{"content":"Writing"}}]}`,
			`{"id":"l1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"write","arguments":"{\"text\":\"abc"}}]}}]}`,
			`{"id":"l1","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`),
	},
	{
		name:     "refusal",
		blocking: `{"id":"f1","choices":[{"index":0,"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
		stream: events(
			`{"id":"f1","choices":[{"index":0,"delta":{"refusal":"I can't "}}]}`,
			`{"id":"f1","choices":[{"index":0,"delta":{"refusal":"help with that."}}]}`,
			`{"id":"f1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
	},
}

// TestStreamMatchesGenerate: the same answer, blocking and streamed, gives
// the same llm.Response (Raw aside, which only blocking calls keep).
func TestStreamMatchesGenerate(t *testing.T) {
	for _, c := range parity {
		t.Run(c.name, func(t *testing.T) {
			m, _ := start(t, openai.Config{},
				jsonReply(200, c.blocking, "x-request-id", "req_p"),
				sseReply(c.stream, "x-request-id", "req_p"))
			blocking, err := m.Generate(bg, userReq("q"))
			if err != nil {
				t.Fatal(err)
			}
			streamed, _, err := collect(m.Stream(bg, userReq("q")))
			if err != nil {
				t.Fatal(err)
			}
			blocking.Raw = nil
			if !reflect.DeepEqual(blocking, streamed) {
				t.Fatalf("blocking %+v\nstreamed %+v", blocking, streamed)
			}
			if streamed.Truncated || streamed.RequestID != "req_p" {
				t.Fatalf("streamed %+v", streamed)
			}
		})
	}
}

func TestParallelCallsLandInIndexOrder(t *testing.T) {
	// ADVERSARIAL 24: interleaved deltas, ids only in first fragments.
	m, _ := start(t, openai.Config{}, sseReply(parity[1].stream))
	resp, evs, err := collect(m.Stream(bg, userReq("q")))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.ToolCalls()
	if len(calls) != 2 || calls[0].ID != "call_1" || calls[0].Arguments != `{"city":"Paris"}` ||
		calls[1].ID != "call_2" || calls[1].Arguments != `{"tz":"CET"}` || calls[0].Incomplete || calls[1].Malformed {
		t.Fatalf("calls %+v", calls)
	}
	// One start per call, deltas for the rest, an end for each at finish.
	var starts, deltas, ends int
	for _, ev := range evs {
		switch ev.(type) {
		case llm.ToolCallStart:
			starts++
		case llm.ToolCallDelta:
			deltas++
		case llm.ToolCallEnd:
			ends++
		}
	}
	if starts != 2 || deltas != 3 || ends != 2 {
		t.Fatalf("starts %d deltas %d ends %d: %v", starts, deltas, ends, evs)
	}
}

func TestGenerateFailures(t *testing.T) {
	cases := []struct {
		name    string
		handler func() *fake
		kind    model.Kind
		says    string
	}{
		{"html page with 200", nil, model.KindInvalidResponse, "Gateway"},
		{"empty body", nil, model.KindInvalidResponse, "empty"},
		{"no choices", nil, model.KindInvalidResponse, "no choice"},
		{"wrong shape", nil, model.KindInvalidResponse, "does not match"},
		{"error with 200", nil, model.KindRateLimited, "slow down"},
	}
	replies := map[string]string{
		"html page with 200": "<html><body><h1>502 Bad Gateway</h1></body></html>",
		"empty body":         "",
		"no choices":         `{"id":"x","choices":[]}`,
		"wrong shape":        `{"choices":"nope"}`,
		"error with 200":     `{"error":{"type":"rate_limit_error","message":"slow down"}}`,
	}
	for _, c := range cases {
		ct := "application/json"
		if strings.HasPrefix(replies[c.name], "<") {
			ct = "text/html"
		}
		m, _ := start(t, openai.Config{}, reply(200, ct, replies[c.name]))
		_, err := m.Generate(bg, userReq("q"))
		if kindOf(err) != c.kind || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
