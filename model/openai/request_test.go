package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// roundTrip is a multi-tool conversation: two parallel calls (one with
// empty arguments), their results (one failed) followed by text and
// images in the same user message, thinking that must not be sent back.
func roundTrip() llm.Request {
	temp := 0.2
	return llm.Request{
		System: "You are a careful coding agent.",
		Messages: []llm.Message{
			llm.UserText("Read a.go and list the directory."),
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.Text{Text: "I'll look."},
				llm.ToolCall{ID: "call_1", Name: "read_file", Arguments: `{"path":"a.go"}`},
				llm.ToolCall{ID: "call_2", Name: "list_dir"},
			}},
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.ToolResult{CallID: "call_1", Name: "read_file", Content: "package a"},
				llm.ToolResult{CallID: "call_2", Name: "list_dir", Content: "permission denied", IsError: true},
				llm.Text{Text: "Also check the image."},
				llm.Image{URL: "https://example.com/x.png"},
				llm.Image{Data: []byte("\x89PNG"), MediaType: "image/png"},
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.Thinking{Text: "the image is small"},
				llm.Text{Text: "a.go declares package a <ok> & fine."},
			}},
			llm.UserText("Thanks."),
		},
		Tools: []llm.ToolSpec{
			{Name: "read_file", Description: "Read a file.", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "list_dir", Description: "List the directory."},
		},
		ToolChoice:  llm.ChooseTools("read_file"),
		Temperature: &temp,
		MaxTokens:   1024,
		Stop:        []string{"END"},
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, got, "", "  "); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, got)
	}
	pretty.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(pretty.Bytes(), want) {
		t.Errorf("body differs from %s:\n--- got\n%s\n--- want\n%s", path, pretty.Bytes(), want)
	}
}

func TestGoldenRequestBodies(t *testing.T) {
	m, f := start(t, openai.Config{APIKey: "sk-test-key"},
		jsonReply(200, `{"id":"c1","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`),
		sseReply(events(`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`)))
	if _, err := m.Generate(bg, roundTrip()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(m.Stream(bg, roundTrip())); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	checkGolden(t, "roundtrip_generate.json", reqs[0].Body)
	checkGolden(t, "roundtrip_stream.json", reqs[1].Body)
	for _, r := range reqs {
		if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test-key" ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Stainless-Retry-Count") != "0" {
			t.Errorf("path %s headers %v", r.Path, r.Header)
		}
	}
	if reqs[1].Header.Get("Accept") != "text/event-stream" {
		t.Errorf("stream Accept: %q", reqs[1].Header.Get("Accept"))
	}

	// The facts the golden file pins, checked on their own so that an
	// update cannot silently accept a wrong body.
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
		ToolChoice json.RawMessage `json:"tool_choice"`
		MaxTokens  int             `json:"max_completion_tokens"`
		Stream     bool            `json:"stream"`
		Options    *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, msg := range body.Messages {
		roles = append(roles, msg.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,user,assistant,user" {
		t.Fatalf("roles %s", got)
	}
	if string(body.Messages[0].Content) != `"You are a careful coding agent."` {
		t.Errorf("system prompt: %s", body.Messages[0].Content)
	}
	calls := body.Messages[2].ToolCalls
	if len(calls) != 2 || calls[0].Function.Arguments != `{"path":"a.go"}` || calls[1].Function.Arguments != "{}" {
		t.Errorf("tool calls: %+v", calls)
	}
	if body.Messages[3].ToolCallID != "call_1" || body.Messages[4].ToolCallID != "call_2" ||
		string(body.Messages[4].Content) != `"Error: permission denied"` {
		t.Errorf("tool messages: %+v %+v", body.Messages[3], body.Messages[4])
	}
	if !strings.Contains(string(body.Messages[5].Content), `data:image/png;base64,iVBORw==`) {
		t.Errorf("image: %s", body.Messages[5].Content)
	}
	if strings.Contains(string(reqs[0].Body), "the image is small") {
		t.Error("thinking was sent back")
	}
	if string(body.ToolChoice) != `{"type":"function","function":{"name":"read_file"}}` || body.MaxTokens != 1024 || body.Stream || body.Options != nil {
		t.Errorf("tool choice %s, max tokens %d, stream %v", body.ToolChoice, body.MaxTokens, body.Stream)
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil || !body.Stream || body.Options == nil || !body.Options.IncludeUsage {
		t.Errorf("stream body: %v %+v", err, body.Options)
	}
}

func TestToolChoiceMapping(t *testing.T) {
	tools := []llm.ToolSpec{{Name: "a"}, {Name: "b"}}
	cases := []struct {
		name   string
		choice llm.ToolChoice
		tools  []llm.ToolSpec
		want   string // the tool_choice JSON, "" when absent
	}{
		{"auto", llm.ToolChoice{}, tools, ""},
		{"required", llm.ToolChoice{Mode: llm.ToolRequired}, tools, `"required"`},
		{"none", llm.ToolChoice{Mode: llm.ToolNone}, tools, `"none"`},
		{"none without tools", llm.ToolChoice{Mode: llm.ToolNone}, nil, ""},
		{"one", llm.ChooseTools("b"), tools, `{"type":"function","function":{"name":"b"}}`},
		{"several", llm.ChooseTools("a", "b"), tools, `"required"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, f := start(t, openai.Config{}, jsonReply(200, `{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]}`))
			req := userReq("hi")
			req.Tools, req.ToolChoice = c.tools, c.choice
			if _, err := m.Generate(bg, req); err != nil {
				t.Fatal(err)
			}
			var body map[string]json.RawMessage
			json.Unmarshal(f.requests()[0].Body, &body)
			if string(body["tool_choice"]) != c.want {
				t.Fatalf("tool_choice %s, want %s", body["tool_choice"], c.want)
			}
		})
	}
	t.Run("unsatisfiable", func(t *testing.T) {
		m, f := start(t, openai.Config{}, jsonReply(200, `{}`))
		for _, choice := range []llm.ToolChoice{{Mode: llm.ToolRequired}, llm.ChooseTools("missing")} {
			req := userReq("hi")
			req.ToolChoice = choice
			if _, err := m.Generate(bg, req); kindOf(err) != model.KindBadRequest {
				t.Errorf("%+v: %v", choice, err)
			}
		}
		if n := len(f.requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
}

func TestBrokenHistoryNeverSent(t *testing.T) {
	m, f := start(t, openai.Config{}, jsonReply(200, `{}`))
	histories := map[string][]llm.Message{
		"call without result": {
			llm.UserText("go"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "t"}}},
			llm.UserText("next"),
		},
		"orphan result": {
			llm.UserText("go"),
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c9", Content: "x"}}},
		},
		"duplicate ids": {
			llm.UserText("go"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "t"}, llm.ToolCall{ID: "c1", Name: "t"}}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c1", Content: "x"}}},
		},
		"open call at the end": {
			llm.UserText("go"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "t"}}},
		},
	}
	for name, h := range histories {
		for _, stream := range []bool{false, true} {
			var err error
			if stream {
				_, _, err = collect(m.Stream(bg, llm.Request{Messages: h}))
			} else {
				_, err = m.Generate(bg, llm.Request{Messages: h})
			}
			var he *llm.HistoryError
			if kindOf(err) != model.KindBadRequest || !errors.As(err, &he) || !errors.Is(err, llm.ErrHistory) {
				t.Errorf("%s (stream %v): %v", name, stream, err)
			}
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("%d requests sent for broken histories", n)
	}
}

func TestConfigPassThrough(t *testing.T) {
	m, f := start(t, openai.Config{
		Model:           "deepseek-chat",
		MaxTokens:       77,
		LegacyMaxTokens: true,
		Headers:         map[string][]string{"x-custom": {"1"}, "Authorization": {"Bearer other"}},
		ExtraBody:       map[string]any{"temperature": 0.1, "seed": 7, "reasoning_effort": "low"},
	}, jsonReply(200, `{"choices":[{"index":0,"message":{"content":"x"}}]}`))
	temp := 0.9
	req := userReq("hi")
	req.Temperature = &temp
	if _, err := m.Generate(bg, req); err != nil {
		t.Fatal(err)
	}
	r := f.requests()[0]
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body["model"] != "deepseek-chat" || body["max_tokens"] != 77.0 || body["max_completion_tokens"] != nil ||
		body["temperature"] != 0.1 || body["seed"] != 7.0 || body["reasoning_effort"] != "low" {
		t.Errorf("body %s", r.Body)
	}
	if strings.Count(string(r.Body), `"temperature"`) != 1 {
		t.Errorf("temperature twice: %s", r.Body)
	}
	if r.Header.Get("X-Custom") != "1" || r.Header.Get("Authorization") != "Bearer other" {
		t.Errorf("headers %v", r.Header)
	}

	bad := openai.New(openai.Config{Model: "m", BaseURL: "http://127.0.0.1:1", ExtraBody: map[string]any{"stream": false}})
	if _, err := bad.Generate(bg, userReq("x")); kindOf(err) != model.KindBadRequest {
		t.Errorf("ExtraBody stream: %v", err)
	}
	noModel := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1"})
	if _, err := noModel.Generate(bg, userReq("x")); kindOf(err) != model.KindBadRequest || !strings.Contains(err.Error(), "no model") {
		t.Errorf("no model: %v", err)
	}
}
