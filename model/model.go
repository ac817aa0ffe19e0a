// Package model is the seam between loom and model providers: the Model
// interface, the typed *Error every provider failure becomes, and
// middleware around models (retries, logging).
//
// Adapters for concrete wire formats live in model/openai and
// model/anthropic; model/modeltest holds their conformance suite and a
// scripted Model for tests.
package model

import (
	"context"
	"iter"

	"github.com/loomkit/loom/llm"
)

// Model is a language model behind some API. Implementations are safe for
// concurrent use; a Model holds no per-call state.
//
// Generate makes one blocking call and returns the whole answer.
//
// Stream makes one streaming call. The sequence is single use: ranging it
// a second time yields one error and nothing else. It yields events as they
// arrive and, if the call fails, a non-nil error as its last element (the
// event of that element is nil); it never yields an error and then more
// events. A stream that ends without the provider's end marker ends with a
// *Error of KindTruncatedStream, never silently. Cancelling ctx, or breaking
// out of the range loop, stops the call and releases its connection.
// Folding the events with an llm.Accumulator gives the Response that
// Generate would have returned.
type Model interface {
	Generate(ctx context.Context, req llm.Request) (llm.Response, error)
	Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error]
}

// Middleware wraps a Model with behaviour of its own (retries, logging,
// request patching). The wrapped Model must keep the contract above.
type Middleware func(Model) Model

// Chain wraps m with mws so that mws[0] is the outermost.
func Chain(m Model, mws ...Middleware) Model {
	for i := len(mws) - 1; i >= 0; i-- {
		m = mws[i](m)
	}
	return m
}

// Funcs adapts two functions to a Model. A nil StreamFunc streams by calling
// GenerateFunc and replaying its response as events.
type Funcs struct {
	GenerateFunc func(ctx context.Context, req llm.Request) (llm.Response, error)
	StreamFunc   func(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error]
}

// Generate calls f.GenerateFunc.
func (f Funcs) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	return f.GenerateFunc(ctx, req)
}

// Stream calls f.StreamFunc, or replays f.GenerateFunc's response.
func (f Funcs) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	if f.StreamFunc != nil {
		return f.StreamFunc(ctx, req)
	}
	return func(yield func(llm.Event, error) bool) {
		resp, err := f.GenerateFunc(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, e := range Events(resp) {
			if !yield(e, nil) {
				return
			}
		}
	}
}

// Events returns the events that an Accumulator folds back into resp
// (provider ids, parts, usage, and a Finish unless resp is Truncated).
func Events(resp llm.Response) []llm.Event {
	var evs []llm.Event
	if resp.ID != "" || resp.Model != "" || resp.RequestID != "" {
		evs = append(evs, llm.ResponseStart{ID: resp.ID, Model: resp.Model, RequestID: resp.RequestID})
	}
	for i, p := range resp.Message.Parts {
		switch p := p.(type) {
		case llm.Text:
			evs = append(evs, llm.TextDelta{Text: p.Text})
		case llm.Thinking:
			evs = append(evs, llm.ThinkingDelta{Start: true, Text: p.Text, Signature: p.Signature, Redacted: p.Redacted})
		case llm.ToolCall:
			evs = append(evs, llm.ToolCallStart{Index: i, ID: p.ID, Name: p.Name, Arguments: p.Arguments})
			if !p.Incomplete {
				evs = append(evs, llm.ToolCallEnd{Index: i})
			}
		}
	}
	if !resp.Usage.IsZero() {
		evs = append(evs, llm.UsageReport{Usage: resp.Usage, Reported: llm.AllUsageFields})
	}
	if !resp.Truncated {
		evs = append(evs, llm.Finish{Reason: resp.FinishReason})
	}
	return evs
}
