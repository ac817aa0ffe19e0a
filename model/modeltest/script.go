package modeltest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// ErrExhausted is matched (errors.Is) by the error a Script returns when it
// is called more often than it has turns.
var ErrExhausted = errors.New("modeltest: script exhausted")

// Turn is one scripted answer of a Script.
//
// A Turn answers with Err when it is set, else with Events when they are
// set, else with Response. Generate folds Events into a Response; Stream
// replays model.Events(Response) when Events is nil.
type Turn struct {
	// Response is the answer.
	Response llm.Response
	// Err is returned instead of an answer: by Generate, and by Stream as
	// its only element.
	Err error
	// Events, when not nil, is streamed instead of the events of Response,
	// and Generate returns their fold (or a truncated-stream error when
	// they hold no llm.Finish).
	Events []llm.Event
	// CutAfter, when positive, stops the stream after that many events with
	// CutErr (a *model.Error of KindTruncatedStream when CutErr is nil).
	// Generate returns that error too: a blocking call cannot be cut half
	// way.
	CutAfter int
	// CutErr is the error that ends a cut stream.
	CutErr error
	// Delay is waited (or the context's end, whichever comes first) before
	// the answer starts. Under testing/synctest it costs no real time.
	Delay time.Duration
}

// Text returns a turn that answers with text and stops.
func Text(text string) Turn {
	return Turn{Response: Response(llm.FinishStop, llm.Text{Text: text})}
}

// ToolCalls returns a turn that asks for the calls to run.
func ToolCalls(calls ...llm.ToolCall) Turn {
	parts := make([]llm.Part, len(calls))
	for i, c := range calls {
		parts[i] = c
	}
	return Turn{Response: Response(llm.FinishToolCalls, parts...)}
}

// Call returns a tool call with the given id, name and JSON arguments.
func Call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// Fail returns a turn that fails with a *model.Error of the given kind.
func Fail(kind model.Kind) Turn {
	return Turn{Err: &model.Error{Kind: kind, Op: "modeltest: script", Message: "scripted " + string(kind) + " failure"}}
}

// Response returns an assistant response holding parts, finished for reason.
func Response(reason llm.FinishReason, parts ...llm.Part) llm.Response {
	return llm.Response{
		Message:      llm.Message{Role: llm.RoleAssistant, Parts: parts},
		FinishReason: reason,
	}
}

// WithUsage returns t with its response's usage set to u.
func (t Turn) WithUsage(u llm.Usage) Turn {
	t.Response.Usage = u
	return t
}

// Script is a model.Model that plays scripted turns in order, one per call,
// and records every request it receives. Calls beyond the script fail with
// a *model.Error wrapping ErrExhausted. A Script is safe for concurrent use;
// concurrent calls take turns in the order they reach it.
type Script struct {
	mu    sync.Mutex
	turns []Turn
	next  int
	reqs  []llm.Request
}

// NewScript returns a Script that plays turns in order.
func NewScript(turns ...Turn) *Script {
	return &Script{turns: append([]Turn(nil), turns...)}
}

// Add appends turns to the script.
func (s *Script) Add(turns ...Turn) {
	s.mu.Lock()
	s.turns = append(s.turns, turns...)
	s.mu.Unlock()
}

// Requests returns copies of the requests received so far, in order.
func (s *Script) Requests() []llm.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]llm.Request(nil), s.reqs...)
}

// Calls returns how many calls took a turn (or found the script exhausted).
func (s *Script) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// Remaining returns how many turns have not been played.
func (s *Script) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.turns) - s.next
}

// take records req and returns the next turn.
func (s *Script) take(req llm.Request) (Turn, error) {
	req = cloneRequest(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if s.next >= len(s.turns) {
		return Turn{}, &model.Error{
			Kind:    model.KindBadRequest,
			Op:      "modeltest: script",
			Message: fmt.Sprintf("call %d, but the script has only %d turns; add turns to the script", len(s.reqs), len(s.turns)),
			Err:     ErrExhausted,
		}
	}
	t := s.turns[s.next]
	s.next++
	return t, nil
}

// Generate plays the next turn as a blocking call.
func (s *Script) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, contextError(err)
	}
	t, err := s.take(req)
	if err != nil {
		return llm.Response{}, err
	}
	if err := wait(ctx, t.Delay); err != nil {
		return llm.Response{}, err
	}
	if t.Err != nil {
		return llm.Response{}, t.Err
	}
	if t.CutAfter > 0 {
		return llm.Response{}, t.cutErr()
	}
	if t.Events == nil {
		return t.Response, nil
	}
	var acc llm.Accumulator
	for _, e := range t.Events {
		acc.Add(e)
	}
	resp := acc.Response()
	if resp.Truncated {
		return llm.Response{}, t.cutErr()
	}
	return resp, nil
}

// Stream plays the next turn as a stream. The turn is taken when the range
// starts, not when Stream is called.
func (s *Script) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	var used atomic.Bool
	return func(yield func(llm.Event, error) bool) {
		if used.Swap(true) {
			yield(nil, &model.Error{Kind: model.KindBadRequest, Op: "modeltest: script stream", Message: "the stream was already ranged; a stream is single use"})
			return
		}
		if err := ctx.Err(); err != nil {
			yield(nil, contextError(err))
			return
		}
		t, err := s.take(req)
		if err != nil {
			yield(nil, err)
			return
		}
		if err := wait(ctx, t.Delay); err != nil {
			yield(nil, err)
			return
		}
		if t.Err != nil {
			yield(nil, t.Err)
			return
		}
		events := t.Events
		if events == nil {
			events = model.Events(t.Response)
		}
		var finished bool
		for i, e := range events {
			if t.CutAfter > 0 && i == t.CutAfter {
				yield(nil, t.cutErr())
				return
			}
			if err := ctx.Err(); err != nil {
				yield(nil, contextError(err))
				return
			}
			if _, ok := e.(llm.Finish); ok {
				finished = true
			}
			if !yield(e, nil) {
				return
			}
		}
		if t.CutAfter > 0 || !finished {
			// Cut exactly at the end of the events, or events without a
			// Finish: the stream ends as a real adapter's would.
			yield(nil, t.cutErr())
		}
	}
}

func (t Turn) cutErr() error {
	if t.CutErr != nil {
		return t.CutErr
	}
	return &model.Error{Kind: model.KindTruncatedStream, Op: "modeltest: script stream", Message: "scripted stream cut before its end marker"}
}

// contextError reports a context that ended the way the adapters do: a
// deadline is a *model.Error of KindTimeout, a cancellation is the
// caller's own decision and stays a plain wrapped context.Canceled (no
// Kind, so nothing mistakes it for a retryable failure).
func contextError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &model.Error{Kind: model.KindTimeout, Op: "modeltest: script", Err: err}
	}
	return fmt.Errorf("modeltest: script: %w", err)
}

func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return contextError(ctx.Err())
	}
}

// cloneRequest copies the slices of req that a caller may reuse, so the
// recorded request does not change when the caller's history does.
func cloneRequest(req llm.Request) llm.Request {
	req.Messages = slices.Clone(req.Messages)
	for i, m := range req.Messages {
		if m.Parts != nil {
			req.Messages[i] = m.Clone()
		}
	}
	req.Tools = slices.Clone(req.Tools)
	req.Stop = slices.Clone(req.Stop)
	req.ToolChoice.Names = slices.Clone(req.ToolChoice.Names)
	return req
}
