package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

const benchReply = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Done.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":100,"completion_tokens":10}}`

// history returns n messages of about 1 KB each, alternating user and
// assistant.
func history(n int) []llm.Message {
	text := strings.Repeat("lorem ipsum ", 85)
	msgs := make([]llm.Message, 0, n+1)
	for i := range n {
		if i%2 == 0 {
			msgs = append(msgs, llm.UserText(text))
		} else {
			msgs = append(msgs, llm.AssistantText(text))
		}
	}
	return append(msgs, llm.UserText("go"))
}

func benchServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchReply)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkGenerateRoundTrip is one blocking call through the adapter on
// loopback; compare with BenchmarkHandWrittenRoundTrip.
func BenchmarkGenerateRoundTrip(b *testing.B) {
	for _, n := range []int{0, 200} {
		b.Run(historyName(n), func(b *testing.B) {
			srv := benchServer(b)
			m := New(Config{Model: "gpt-x", BaseURL: srv.URL, HTTPClient: srv.Client()})
			req := llm.Request{System: "You are terse.", Messages: history(n),
				Tools: []llm.ToolSpec{{Name: "read_file", Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := m.Generate(context.Background(), req)
				if err != nil || len(resp.ToolCalls()) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandWrittenRoundTrip is the minimal net/http client doing the
// same request: marshal a small struct tree, post, decode into a small
// struct.
func BenchmarkHandWrittenRoundTrip(b *testing.B) {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	for _, n := range []int{0, 200} {
		b.Run(historyName(n), func(b *testing.B) {
			srv := benchServer(b)
			client := srv.Client()
			msgs := []msg{{"system", "You are terse."}}
			for _, m := range history(n) {
				msgs = append(msgs, msg{string(m.Role), m.Text()})
			}
			b.ReportAllocs()
			for b.Loop() {
				body, err := json.Marshal(map[string]any{
					"model": "gpt-x", "messages": msgs,
					"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "read_file",
						"parameters": json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}},
				})
				if err != nil {
					b.Fatal(err)
				}
				req, _ := http.NewRequest("POST", srv.URL+"/chat/completions", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer k")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				var out struct {
					Choices []struct {
						Message struct {
							Content   string `json:"content"`
							ToolCalls []struct {
								ID       string `json:"id"`
								Function struct{ Name, Arguments string }
							} `json:"tool_calls"`
						} `json:"message"`
					} `json:"choices"`
				}
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || len(out.Choices[0].Message.ToolCalls) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}

func historyName(n int) string {
	if n == 0 {
		return "history=0"
	}
	return "history=200"
}
