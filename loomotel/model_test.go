package loomotel

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"testing"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/modeltest"
)

func ptr[T any](v T) *T { return &v }

// fullRequest sets every request field the span reports.
func fullRequest() llm.Request {
	return llm.Request{
		Model:       "gpt-test",
		System:      "be brief",
		Messages:    []llm.Message{llm.UserText("hi")},
		MaxTokens:   256,
		Temperature: ptr(0.5),
		TopP:        ptr(0.25),
		Stop:        []string{"END", "STOP"},
		Schema:      &llm.OutputShape{Name: "answer", Schema: []byte(`{"type":"object"}`)},
	}
}

func answer() llm.Response {
	resp := modeltest.Response(llm.FinishStop, llm.Text{Text: "hello"})
	resp.ID = "resp-1"
	resp.Model = "gpt-test-0613"
	resp.Usage = llm.Usage{InputTokens: 120, OutputTokens: 30, CacheReadTokens: 100, CacheWriteTokens: 7, ReasoningTokens: 11}
	return resp
}

func TestGenerateSpan(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt, WithProvider("openai"))(modeltest.NewScript(modeltest.Turn{Response: answer()}))

	resp, err := m.Generate(context.Background(), fullRequest())
	if err != nil || resp.Text() != "hello" {
		t.Fatalf("Generate = %q, %v", resp.Text(), err)
	}
	span := h.only()
	if span.Name() != "chat gpt-test" || span.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q kind %v, want \"chat gpt-test\" client", span.Name(), span.SpanKind())
	}
	checkStatus(t, span, codes.Unset, "")
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":                    "chat",
		"gen_ai.provider.name":                     "openai",
		"gen_ai.request.model":                     "gpt-test",
		"gen_ai.request.max_tokens":                int64(256),
		"gen_ai.request.temperature":               0.5,
		"gen_ai.request.top_p":                     0.25,
		"gen_ai.request.stop_sequences":            []string{"END", "STOP"},
		"gen_ai.request.stream":                    false,
		"gen_ai.output.type":                       "json",
		"gen_ai.response.id":                       "resp-1",
		"gen_ai.response.model":                    "gpt-test-0613",
		"gen_ai.response.finish_reasons":           []string{"stop"},
		"gen_ai.usage.input_tokens":                int64(120),
		"gen_ai.usage.output_tokens":               int64(30),
		"gen_ai.usage.cache_read.input_tokens":     int64(100),
		"gen_ai.usage.cache_creation.input_tokens": int64(7),
		"gen_ai.usage.reasoning.output_tokens":     int64(11),
	})
	if len(span.Events()) != 0 {
		t.Errorf("events %v, want none", eventNames(span))
	}
}

// A request with no model and no settings gets the bare span name and
// only the attributes that say something.
func TestGenerateSpanMinimal(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt)(modeltest.NewScript(modeltest.Text("ok")))
	if _, err := m.Generate(context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	span := h.only()
	if span.Name() != "chat" {
		t.Errorf("span name %q, want chat", span.Name())
	}
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":          "chat",
		"gen_ai.request.stream":          false,
		"gen_ai.response.finish_reasons": []string{"stop"},
	})
}

// The conventions want cached input in gen_ai.usage.input_tokens, as
// llm.Usage.InputTokens counts it for every provider (model/anthropic
// adds what Anthropic's input_tokens leaves out): it is not added again.
func TestAnthropicInputTokens(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt, WithProvider("anthropic"))(modeltest.NewScript(modeltest.Turn{Response: answer()}))
	if _, err := m.Generate(context.Background(), llm.Request{Model: "claude-test"}); err != nil {
		t.Fatal(err)
	}
	got := attrMap(h.only().Attributes())
	if got["gen_ai.usage.input_tokens"] != int64(120) {
		t.Errorf("input tokens %v, want 120", got["gen_ai.usage.input_tokens"])
	}
	if got["gen_ai.usage.cache_read.input_tokens"] != int64(100) || got["gen_ai.usage.cache_creation.input_tokens"] != int64(7) {
		t.Errorf("cache tokens %v / %v, want 100 / 7", got["gen_ai.usage.cache_read.input_tokens"], got["gen_ai.usage.cache_creation.input_tokens"])
	}
}

func streamEvents() []llm.Event {
	return []llm.Event{
		llm.ResponseStart{ID: "resp-9", Model: "gpt-test-0613"},
		llm.TextDelta{Text: "hel"},
		llm.UsageReport{Usage: llm.Usage{InputTokens: 40}},
		llm.TextDelta{Text: "lo"},
		llm.UsageReport{Usage: llm.Usage{OutputTokens: 5}},
		llm.Finish{Reason: llm.FinishStop},
	}
}

func TestStreamSpan(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt, WithProvider("openai"))(modeltest.NewScript(modeltest.Turn{Events: streamEvents()}))

	seq := m.Stream(context.Background(), llm.Request{Model: "gpt-test"})
	if n := len(h.sr.Started()); n != 0 {
		t.Fatalf("%d spans started before the stream was ranged", n)
	}
	var acc llm.Accumulator
	for e, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		if n := len(h.sr.Ended()); n != 0 {
			t.Fatalf("the span ended while the stream was being read (%d ended)", n)
		}
		acc.Add(e)
	}
	if got := acc.Response().Text(); got != "hello" {
		t.Errorf("streamed text %q, want hello", got)
	}
	span := h.only()
	if span.Name() != "chat gpt-test" || span.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q kind %v", span.Name(), span.SpanKind())
	}
	checkStatus(t, span, codes.Unset, "")
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":               "chat",
		"gen_ai.provider.name":                "openai",
		"gen_ai.request.model":                "gpt-test",
		"gen_ai.request.stream":               true,
		"gen_ai.response.id":                  "resp-9",
		"gen_ai.response.model":               "gpt-test-0613",
		"gen_ai.response.finish_reasons":      []string{"stop"},
		"gen_ai.usage.input_tokens":           int64(40),
		"gen_ai.usage.output_tokens":          int64(5),
		"gen_ai.response.time_to_first_chunk": nonNegFloat{},
	})
}

// A consumer that stops ranging ends the span, once, without an error.
func TestStreamAbandoned(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt)(modeltest.NewScript(modeltest.Turn{Events: streamEvents()}))

	n := 0
	for _, err := range m.Stream(context.Background(), llm.Request{Model: "gpt-test"}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 2 {
			break
		}
	}
	span := h.only() // ended by the time the loop is left
	checkStatus(t, span, codes.Unset, "")
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":               "chat",
		"gen_ai.request.model":                "gpt-test",
		"gen_ai.request.stream":               true,
		"gen_ai.response.id":                  "resp-9",
		"gen_ai.response.model":               "gpt-test-0613",
		"loom.stream.abandoned":               true,
		"gen_ai.response.time_to_first_chunk": nonNegFloat{},
	})
}

// A stream that fails after some events ends the span, once, as an error
// carrying what the events said so far.
func TestStreamFailsMidway(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt)(modeltest.NewScript(modeltest.Turn{Events: streamEvents(), CutAfter: 3}))

	var events int
	var last error
	for e, err := range m.Stream(context.Background(), llm.Request{Model: "gpt-test"}) {
		if err != nil {
			last = err
			if n := len(h.sr.Ended()); n != 1 {
				t.Errorf("the consumer got the error with %d spans ended, want the span ended first", n)
			}
			if e != nil {
				t.Errorf("error element carries event %#v", e)
			}
			continue
		}
		if last != nil {
			t.Fatal("an event after the error")
		}
		events++
	}
	if events != 3 || model.KindOf(last) != model.KindTruncatedStream {
		t.Fatalf("got %d events and %v, want 3 and a truncated stream", events, last)
	}
	span := h.only()
	checkStatus(t, span, codes.Error, last.Error())
	checkAttrs(t, span, map[string]any{
		"gen_ai.operation.name":               "chat",
		"gen_ai.request.model":                "gpt-test",
		"gen_ai.request.stream":               true,
		"gen_ai.response.id":                  "resp-9",
		"gen_ai.response.model":               "gpt-test-0613",
		"gen_ai.usage.input_tokens":           int64(40),
		"gen_ai.response.time_to_first_chunk": nonNegFloat{},
		"error.type":                          "truncated_stream",
	})
	if got := exceptionMessage(t, span); got != last.Error() {
		t.Errorf("exception message %q, want %q", got, last.Error())
	}
}

// A panic in the consumer's loop body still ends the span, once.
func TestStreamConsumerPanics(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt)(modeltest.NewScript(modeltest.Turn{Events: streamEvents()}))
	func() {
		defer func() {
			if v := recover(); v != "consumer" {
				t.Errorf("recovered %v, want the consumer's panic", v)
			}
		}()
		for range m.Stream(context.Background(), llm.Request{}) {
			panic("consumer")
		}
	}()
	span := h.only()
	checkStatus(t, span, codes.Error, "panic")
	if got := attrMap(span.Attributes())["error.type"]; got != "panic" {
		t.Errorf("error.type %v, want panic", got)
	}
}

// error.type names the failure: the model.Kind, a cancelled context, or
// the Go type of any other error.
func TestErrorType(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	type myErr struct{ error }
	for _, tc := range []struct {
		name string
		ctx  context.Context
		m    func() model.Model
		want string
	}{
		{"kind", context.Background(), func() model.Model { return modeltest.NewScript(modeltest.Fail(model.KindRateLimited)) }, "rate_limited"},
		{"wrapped kind", context.Background(), func() model.Model { return failing(errorsJoin(&model.Error{Kind: model.KindAuth})) }, "auth"},
		{"cancelled", cancelled, func() model.Model { return modeltest.NewScript(modeltest.Text("never")) }, "canceled"},
		{"plain", context.Background(), func() model.Model { return failing(errors.New("boom")) }, "*errors.errorString"},
		{"typed", context.Background(), func() model.Model { return failing(&myErr{errors.New("boom")}) }, "*loomotel.myErr"},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				h := newHarness(t)
				m := Model(h.opt)(tc.m())
				var err error
				if stream {
					for _, e := range m.Stream(tc.ctx, llm.Request{}) {
						err = e
					}
				} else {
					_, err = m.Generate(tc.ctx, llm.Request{})
				}
				if err == nil {
					t.Fatal("no error")
				}
				span := h.only()
				checkStatus(t, span, codes.Error, err.Error())
				if got := attrMap(span.Attributes())["error.type"]; got != tc.want {
					t.Errorf("error.type %v, want %s", got, tc.want)
				}
				if got := exceptionMessage(t, span); got != err.Error() {
					t.Errorf("exception message %q, want %q", got, err.Error())
				}
			})
		}
	}
}

func errorsJoin(err error) error { return errors.Join(errors.New("context"), err) }

// failing returns a model whose calls fail with err.
func failing(err error) model.Model {
	return model.Funcs{
		GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) { return llm.Response{}, err },
		StreamFunc: func(context.Context, llm.Request) iter.Seq2[llm.Event, error] {
			return func(yield func(llm.Event, error) bool) { yield(nil, err) }
		},
	}
}

// A panicking model ends the span as a panic and the panic goes on.
func TestGeneratePanics(t *testing.T) {
	h := newHarness(t)
	m := Model(h.opt)(model.Funcs{GenerateFunc: func(context.Context, llm.Request) (llm.Response, error) {
		panic("model bug")
	}})
	func() {
		defer func() {
			if v := recover(); v != "model bug" {
				t.Errorf("recovered %v, want the model's panic", v)
			}
		}()
		m.Generate(context.Background(), llm.Request{})
	}()
	span := h.only()
	checkStatus(t, span, codes.Error, "panic: model bug")
	if got := exceptionMessage(t, span); got != "panic: model bug" {
		t.Errorf("exception message %q", got)
	}
}
