package openai

import (
	"bytes"
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
		r, err := decodeResponse(opGenerate, resp, body)
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
		p := newParser(opStream, http.Header{})
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
