package openai_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/openai"
)

// Answers of OpenAI-compatible servers that differ from OpenAI's own, in
// the shapes those servers send. Each is checked blocking and streamed.

// both answers the first request with the blocking body and the second
// with the stream, and returns the two responses.
func both(t *testing.T, blocking, stream string) (llm.Response, llm.Response) {
	t.Helper()
	m, _ := start(t, openai.Config{}, jsonReply(200, blocking), sseReply(stream))
	b, err := m.Generate(bg, userReq("q"))
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	s, _, err := collect(m.Stream(bg, userReq("q")))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	b.Raw = nil
	return b, s
}

// Mistral's reasoning models (Magistral) send content as an array of
// chunks: thinking chunks, whose thinking is itself an array of text
// chunks, then text chunks. Chunk types loom does not use (references)
// are skipped.
func TestMistralContentChunks(t *testing.T) {
	blocking := `{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion","created":1759752086,"model":"magistral-medium-2509",
"choices":[{"index":0,"message":{"role":"assistant","tool_calls":null,"content":[
{"type":"thinking","thinking":[{"type":"text","text":"The user asks for 2+2. "},{"type":"reference","reference_ids":[0]},{"type":"text","text":"That is 4."}]},
{"type":"reference","reference_ids":[1,2]},
{"type":"text","text":"2 + 2 = "},{"type":"image_url","image_url":{"url":"https://example.com/x.png"}},{"type":"text","text":"**4**"}]},
"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"total_tokens":70,"completion_tokens":58}}`
	stream := events(
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"The user asks for 2+2. "}]}]},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"reference","reference_ids":[0]},{"type":"text","text":"That is 4."}]}]},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"reference","reference_ids":[1,2]}]},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"2 + 2 = "}]},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":"**4**"},"finish_reason":null}]}`,
		`{"id":"cmpl-e5cc70bb28c444948073e77776eb30ef","object":"chat.completion.chunk","created":1759752086,"model":"magistral-medium-2509","choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"total_tokens":70,"completion_tokens":58}}`,
	)
	b, s := both(t, blocking, stream)
	want := []llm.Part{llm.Thinking{Text: "The user asks for 2+2. That is 4."}, llm.Text{Text: "2 + 2 = **4**"}}
	for name, r := range map[string]llm.Response{"blocking": b, "stream": s} {
		if !reflect.DeepEqual(r.Message.Parts, want) || r.FinishReason != llm.FinishStop {
			t.Errorf("%s: parts %#v finish %q, want %#v", name, r.Message.Parts, r.FinishReason, want)
		}
		if r.Usage != (llm.Usage{InputTokens: 12, OutputTokens: 58}) {
			t.Errorf("%s: usage %+v", name, r.Usage)
		}
	}
}

// A content array that is not made of chunk objects is still an invalid
// response, and the stream says what is wrong with the chunk (it is a
// JSON object).
func TestMistralContentMalformed(t *testing.T) {
	bad := `{"id":"x","choices":[{"index":0,"delta":{"content":[42]},"finish_reason":null}]}`
	m, _ := start(t, openai.Config{}, sseReply(events(bad)))
	_, _, err := collect(m.Stream(bg, userReq("q")))
	if kindOf(err) != model.KindInvalidResponse || strings.Contains(err.Error(), "not a JSON object") {
		t.Fatalf("err = %v, want an invalid response that does not call an object no object", err)
	}
}

// A stream that never delivered choice 0 delivered no answer: like a
// blocking body without one, it is an invalid response.
func TestStreamWithoutChoiceIsInvalid(t *testing.T) {
	for name, body := range map[string]string{
		"only DONE":     "data: [DONE]\n\n",
		"empty choices": events(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[]}`),
		"usage only": events(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}}`),
		"another choice only": events(`{"id":"chatcmpl-1","choices":[{"index":1,"delta":{"content":"x"},"finish_reason":"stop"}]}`),
	} {
		t.Run(name, func(t *testing.T) {
			m, _ := start(t, openai.Config{}, sseReply(body))
			r, evs, err := collect(m.Stream(bg, userReq("q")))
			if kindOf(err) != model.KindInvalidResponse || !strings.Contains(err.Error(), "choice") {
				t.Fatalf("err = %v, want an invalid response naming the missing choice", err)
			}
			for _, ev := range evs {
				if _, ok := ev.(llm.Finish); ok {
					t.Fatal("a stream without an answer yielded a Finish")
				}
			}
			if !r.Truncated {
				t.Error("the fold is not Truncated")
			}
		})
	}
	// The same as a blocking body.
	m, _ := start(t, openai.Config{}, jsonReply(200, `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`))
	if _, err := m.Generate(bg, userReq("q")); kindOf(err) != model.KindInvalidResponse {
		t.Fatalf("blocking: err = %v", err)
	}
}

// The legacy function_call (finish reason "function_call") is a tool call
// like any other, with an id derived from the response's.
func TestLegacyFunctionCall(t *testing.T) {
	blocking := `{"id":"chatcmpl-8Zz1","object":"chat.completion","created":1700000000,"model":"gpt-3.5-turbo-0613",
"choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"get_current_weather","arguments":"{\n  \"location\": \"Boston, MA\"\n}"}},"finish_reason":"function_call"}],
"usage":{"prompt_tokens":82,"completion_tokens":18,"total_tokens":100}}`
	stream := events(
		`{"id":"chatcmpl-8Zz1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"get_current_weather","arguments":""}},"finish_reason":null}]}`,
		`{"id":"chatcmpl-8Zz1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"function_call":{"arguments":"{\n  \"location\": "}},"finish_reason":null}]}`,
		`{"id":"chatcmpl-8Zz1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{"function_call":{"arguments":"\"Boston, MA\"\n}"}},"finish_reason":null}]}`,
		`{"id":"chatcmpl-8Zz1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-3.5-turbo-0613","choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}`,
	)
	b, s := both(t, blocking, stream)
	want := llm.ToolCall{ID: "call_chatcmpl-8Zz1", Name: "get_current_weather", Arguments: "{\n  \"location\": \"Boston, MA\"\n}"}
	for name, r := range map[string]llm.Response{"blocking": b, "stream": s} {
		calls := r.ToolCalls()
		if len(calls) != 1 || !reflect.DeepEqual(calls[0], want) || r.FinishReason != llm.FinishToolCalls {
			t.Errorf("%s: calls %+v finish %q, want [%+v]", name, calls, r.FinishReason, want)
		}
	}
}

// Reasoning tokens that a provider counts outside completion_tokens (xAI;
// Gemini's OpenAI endpoint) are output tokens too: Total is what the
// provider's total_tokens says. OpenAI's own count includes them already
// and is left as it is.
func TestReasoningTokensOutsideCompletion(t *testing.T) {
	for _, c := range []struct {
		name  string
		usage string
		want  llm.Usage
	}{
		// grok-4 on xAI: 10120 + 1499 + 2809 = 14428.
		{"xai", `{"prompt_tokens":10120,"completion_tokens":1499,"total_tokens":14428,"prompt_tokens_details":{"text_tokens":10120,"audio_tokens":0,"image_tokens":0,"cached_tokens":128},"completion_tokens_details":{"reasoning_tokens":2809,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0},"num_sources_used":0}`,
			llm.Usage{InputTokens: 10120, OutputTokens: 1499 + 2809, CacheReadTokens: 128, ReasoningTokens: 2809}},
		// grok-3-mini: one visible token after 386 of reasoning.
		{"xai mini", `{"prompt_tokens":12,"completion_tokens":1,"total_tokens":399,"completion_tokens_details":{"reasoning_tokens":386}}`,
			llm.Usage{InputTokens: 12, OutputTokens: 387, ReasoningTokens: 386}},
		// gemini-2.5-flash through its OpenAI endpoint.
		{"gemini", `{"completion_tokens":151,"prompt_tokens":20,"total_tokens":553,"completion_tokens_details":{"reasoning_tokens":382}}`,
			llm.Usage{InputTokens: 20, OutputTokens: 533, ReasoningTokens: 382}},
		// Without total_tokens: more reasoning than completion cannot be a
		// part of it.
		{"no total", `{"prompt_tokens":21,"completion_tokens":0,"completion_tokens_details":{"reasoning_tokens":60}}`,
			llm.Usage{InputTokens: 21, OutputTokens: 60, ReasoningTokens: 60}},
		// OpenAI o-series: reasoning is inside completion_tokens.
		{"openai", `{"prompt_tokens":75,"completion_tokens":1186,"total_tokens":1261,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":1024}}`,
			llm.Usage{InputTokens: 75, OutputTokens: 1186, ReasoningTokens: 1024}},
		{"openai without total", `{"prompt_tokens":75,"completion_tokens":1186,"completion_tokens_details":{"reasoning_tokens":1024}}`,
			llm.Usage{InputTokens: 75, OutputTokens: 1186, ReasoningTokens: 1024}},
	} {
		t.Run(c.name, func(t *testing.T) {
			blocking := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],"usage":` + c.usage + `}`
			stream := events(`{"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"4"},"finish_reason":"stop"}]}`,
				`{"id":"x","object":"chat.completion.chunk","model":"m","choices":[],"usage":`+c.usage+`}`)
			b, s := both(t, blocking, stream)
			for name, r := range map[string]llm.Response{"blocking": b, "stream": s} {
				if r.Usage != c.want {
					t.Errorf("%s: usage %+v, want %+v", name, r.Usage, c.want)
				}
			}
		})
	}
}

// One definition of input tokens: prompt_tokens includes cached input, and
// so does llm.Usage.InputTokens; the price and the total follow from it.
func TestUsageConventionOpenAI(t *testing.T) {
	usage := `{"prompt_tokens":8000,"completion_tokens":100,"total_tokens":8100,"prompt_tokens_details":{"cached_tokens":3000}}`
	b, s := both(t,
		`{"id":"x","object":"chat.completion","model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":`+usage+`}`,
		events(`{"id":"x","model":"gpt-4.1","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`, `{"id":"x","model":"gpt-4.1","choices":[],"usage":`+usage+`}`))
	price, _ := agent.Budget{}.PriceOf("gpt-4.1")
	for name, r := range map[string]llm.Response{"blocking": b, "stream": s} {
		if r.Usage.Total() != 8100 {
			t.Errorf("%s: Total %d, want 8100", name, r.Usage.Total())
		}
		// 5,000 uncached at $2, 3,000 cached at $0.50, 100 out at $8 per million.
		if got, want := price.Cost(r.Usage), (5000*2+3000*0.5+100*8)/1e6; !near(got, want) {
			t.Errorf("%s: cost $%.6f, want $%.6f", name, got, want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
