package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model/internal/sse"
)

// The per-turn work of a tool loop, without HTTP: what the adapter does
// with one request and one answer of the kind loomtest sends. The
// hand-written variants decode the same bytes into the smallest structs
// that hold what the loop needs, and are the yardstick.

const toolCallBody = `{"id":"chatcmpl-loomtest-func","object":"chat.completion","created":1767225600,"model":"loomtest-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_ltfunc_0","type":"function","function":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}],"refusal":null},"finish_reason":"tool_calls","logprobs":null}],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`

const toolCallStream = "data: {\"id\":\"chatcmpl-loomtest-func\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"loomtest-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-loomtest-func\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"loomtest-model\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_ltfunc_0\",\"type\":\"function\",\"function\":{\"name\":\"add\",\"arguments\":\"{\\\"a\\\":2,\\\"b\\\":3}\"}}]},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"chatcmpl-loomtest-func\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"loomtest-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n" +
	"data: {\"id\":\"chatcmpl-loomtest-func\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"loomtest-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10,\"total_tokens\":110,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n" +
	"data: [DONE]\n\n"

// loopRequest is the request of the last turn of a 10-turn tool loop.
func loopRequest() llm.Request {
	req := llm.Request{System: "You add numbers.", Messages: []llm.Message{llm.UserText("add 2 and 3")},
		Tools: []llm.ToolSpec{{Name: "add", Description: "Adds a and b.",
			Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}`)}}}
	for range 9 {
		req.Messages = append(req.Messages,
			llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "call_ltfunc_0", Name: "add", Arguments: `{"a":2,"b":3}`}}},
			llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "call_ltfunc_0", Content: "5"}}})
	}
	return req
}

func BenchmarkTurnDecodeResponse(b *testing.B) {
	body := []byte(toolCallBody)
	resp := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}
	b.ReportAllocs()
	for b.Loop() {
		r, err := decodeResponse(opGenerate, resp, body, defaultLimits)
		if err != nil || len(r.ToolCalls()) != 1 {
			b.Fatal(err)
		}
	}
}

func BenchmarkTurnDecodeResponseHandWritten(b *testing.B) {
	body := []byte(toolCallBody)
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	b.ReportAllocs()
	for b.Loop() {
		var out struct {
			Choices []struct {
				Message struct {
					Role      string  `json:"role"`
					Content   *string `json:"content"`
					ToolCalls []call  `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&out); err != nil || len(out.Choices[0].Message.ToolCalls) != 1 {
			b.Fatal(err)
		}
	}
}

func BenchmarkTurnParseStream(b *testing.B) {
	body := []byte(toolCallStream)
	b.ReportAllocs()
	for b.Loop() {
		dec := sse.NewDecoder(bytes.NewReader(body))
		p := newParser(opStream, http.Header{}, defaultLimits)
		var acc llm.Accumulator
		evs := make([]llm.Event, 0, 8)
		for !p.done {
			sev, err := dec.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if evs, err = p.feed(sev, evs[:0]); err != nil {
				b.Fatal(err)
			}
			for _, e := range evs {
				acc.Add(e)
			}
		}
		dec.Close()
		if r := acc.Response(); len(r.ToolCalls()) != 1 || r.Truncated {
			b.Fatal(r)
		}
	}
}

func BenchmarkTurnEncodeRequest(b *testing.B) {
	m := New(Config{Model: "gpt-4o-mini"})
	req := loopRequest()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.encodeRequest(opGenerate, req, false); err != nil {
			b.Fatal(err)
		}
	}
}

// cannedTransport answers every request with the same body, without a
// network: the client side of a turn alone.
type cannedTransport struct {
	body        []byte
	contentType string
}

func (t cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {t.contentType}, "X-Request-Id": {"req_1"}},
		Body:          io.NopCloser(bytes.NewReader(t.body)),
		ContentLength: int64(len(t.body)), Request: req}, nil
}

// BenchmarkTurnClientSide is one call of the loop's last turn through the
// adapter, over a transport that answers from memory; compare with
// BenchmarkTurnClientSideHandWritten.
func BenchmarkTurnClientSide(b *testing.B) {
	for _, stream := range []bool{false, true} {
		name, body, ct := "generate", toolCallBody, "application/json"
		if stream {
			name, body, ct = "stream", toolCallStream, "text/event-stream"
		}
		b.Run(name, func(b *testing.B) {
			m := New(Config{Model: "gpt-4o-mini", APIKey: "k", BaseURL: "http://loomtest.invalid/v1",
				HTTPClient: &http.Client{Transport: cannedTransport{[]byte(body), ct}}})
			req := loopRequest()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				var resp llm.Response
				if stream {
					var acc llm.Accumulator
					for ev, err := range m.Stream(ctx, req) {
						if err != nil {
							b.Fatal(err)
						}
						acc.Add(ev)
					}
					resp = acc.Response()
				} else {
					var err error
					if resp, err = m.Generate(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
				if len(resp.ToolCalls()) != 1 {
					b.Fatal(resp)
				}
			}
		})
	}
}

// BenchmarkTurnClientSideHandWritten is the yardstick: the same request
// built from small structs with encoding/json, the same answer decoded
// into small structs (the stream read line by line with bufio).
func BenchmarkTurnClientSideHandWritten(b *testing.B) {
	type fn struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	type call struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	type msg struct {
		Role       string  `json:"role"`
		Content    *string `json:"content,omitempty"`
		ToolCalls  []call  `json:"tool_calls,omitempty"`
		ToolCallID string  `json:"tool_call_id,omitempty"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	type request struct {
		Model         string          `json:"model"`
		Messages      []msg           `json:"messages"`
		Tools         json.RawMessage `json:"tools"`
		Stream        bool            `json:"stream,omitempty"`
		StreamOptions *streamOptions  `json:"stream_options,omitempty"`
	}
	str := func(s string) *string { return &s }
	msgs := []msg{{Role: "system", Content: str("You add numbers.")}, {Role: "user", Content: str("add 2 and 3")}}
	for range 9 {
		msgs = append(msgs, msg{Role: "assistant", ToolCalls: []call{{ID: "call_ltfunc_0", Type: "function", Function: fn{"add", `{"a":2,"b":3}`}}}},
			msg{Role: "tool", Content: str("5"), ToolCallID: "call_ltfunc_0"})
	}
	tools := json.RawMessage(`[{"type":"function","function":{"name":"add","description":"Adds a and b.","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}}]`)
	for _, stream := range []bool{false, true} {
		name, body, ct := "generate", toolCallBody, "application/json"
		if stream {
			name, body, ct = "stream", toolCallStream, "text/event-stream"
		}
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: cannedTransport{[]byte(body), ct}}
			ctx := context.Background()
			var buf bytes.Buffer
			br := bufio.NewReader(nil)
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				r := request{Model: "gpt-4o-mini", Messages: msgs, Tools: tools}
				if stream {
					r.Stream, r.StreamOptions = true, &streamOptions{true}
				}
				if err := json.NewEncoder(&buf).Encode(r); err != nil {
					b.Fatal(err)
				}
				hreq, _ := http.NewRequestWithContext(ctx, "POST", "http://loomtest.invalid/v1/chat/completions", bytes.NewReader(buf.Bytes()))
				hreq.Header.Set("Content-Type", "application/json")
				hreq.Header.Set("Authorization", "Bearer k")
				resp, err := client.Do(hreq)
				if err != nil {
					b.Fatal(err)
				}
				var out msg
				if stream {
					br.Reset(resp.Body)
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							b.Fatal(err)
						}
						data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
						if !ok {
							continue
						}
						if string(data) == "[DONE]" {
							break
						}
						var c struct {
							Choices []struct {
								Delta struct {
									Content   *string `json:"content"`
									ToolCalls []call  `json:"tool_calls"`
								} `json:"delta"`
								FinishReason *string `json:"finish_reason"`
							} `json:"choices"`
						}
						if err := json.Unmarshal(data, &c); err != nil {
							b.Fatal(err)
						}
						for _, ch := range c.Choices {
							for _, tc := range ch.Delta.ToolCalls {
								for len(out.ToolCalls) <= tc.Index {
									out.ToolCalls = append(out.ToolCalls, call{Type: "function"})
								}
								p := &out.ToolCalls[tc.Index]
								p.ID += tc.ID
								p.Function.Name += tc.Function.Name
								p.Function.Arguments += tc.Function.Arguments
							}
						}
					}
				} else {
					var r struct {
						Choices []struct {
							Message      msg    `json:"message"`
							FinishReason string `json:"finish_reason"`
						} `json:"choices"`
					}
					if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
						b.Fatal(err)
					}
					out = r.Choices[0].Message
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if len(out.ToolCalls) != 1 {
					b.Fatal(out)
				}
			}
		})
	}
}
