package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
)

// turnSource is the only part of the loop that differs between Run and
// Stream: how one model call is made and its output passed on. once makes
// one attempt; visible reports whether output reached the consumer before
// it failed (then the turn is restarted, not blindly retried).
type turnSource interface {
	once(ctx context.Context, x *runner, m model.Model, req llm.Request, turn int) (resp llm.Response, visible bool, err error)
}

// unary makes blocking calls and passes each text and thinking part on as
// one delta once the answer is complete.
type unary struct{}

func (unary) once(ctx context.Context, x *runner, m model.Model, req llm.Request, turn int) (llm.Response, bool, error) {
	resp, err := m.Generate(ctx, req)
	if err != nil {
		return llm.Response{}, false, err
	}
	if resp.Truncated {
		// Adapters report a cut answer as an error; one that returns it
		// marked instead gets the same treatment: the turn is asked again.
		return llm.Response{}, true, truncated("the blocking answer is marked truncated")
	}
	for _, p := range resp.Message.Parts {
		switch p := p.(type) {
		case llm.Text:
			if p.Text != "" {
				x.emit(TextDelta{Turn: turn, Text: p.Text})
			}
		case llm.Thinking:
			if p.Text != "" {
				x.emit(ThinkingDelta{Turn: turn, Text: p.Text})
			}
		}
	}
	return resp, false, nil
}

// streaming makes streaming calls and passes deltas on as they arrive.
type streaming struct{}

func (streaming) once(ctx context.Context, x *runner, m model.Model, req llm.Request, turn int) (llm.Response, bool, error) {
	var acc llm.Accumulator
	visible := false
	for ev, err := range m.Stream(ctx, req) {
		if err != nil {
			return llm.Response{}, visible, err
		}
		acc.Add(ev)
		switch e := ev.(type) {
		case llm.ResponseStart, llm.UsageReport, llm.Finish:
		case llm.TextDelta:
			visible = true
			if e.Text != "" {
				x.emit(TextDelta{Turn: turn, Text: e.Text})
			}
		case llm.ThinkingDelta:
			visible = true
			if e.Text != "" {
				x.emit(ThinkingDelta{Turn: turn, Text: e.Text})
			}
		default:
			visible = true
		}
		if x.stopped {
			return llm.Response{}, visible, errConsumerGone
		}
	}
	resp := acc.Response()
	if resp.Truncated {
		// A model that keeps its contract reports this itself; this one
		// ended without a Finish and without an error.
		return llm.Response{}, true, truncated("the stream ended without its end marker")
	}
	return resp, false, nil
}

func truncated(msg string) error {
	return &model.Error{Kind: model.KindTruncatedStream, Op: "agent: model call", Message: msg}
}

// callWithRestarts makes the model call of turn, with the retry observer
// in ctx. Retries of failures before any output are model.Retry's; a
// failure after output was passed on restarts the turn here, as often as
// the retry policy allows, announcing it with TurnRestarted. A truncated
// answer is never returned.
func (x *runner) callWithRestarts(ctx context.Context, m model.Model, req llm.Request, turn int) (llm.Response, error) {
	ctx = model.WithRetryObserver(ctx, func(ri model.RetryInfo) {
		x.emit(Retrying{Turn: x.turn, Attempt: ri.Attempt, Wait: ri.Wait, Err: ri.Err})
	})
	p := x.a.cfg.Retry
	maxRestarts := p.MaxRetries
	switch {
	case maxRestarts == 0:
		maxRestarts = model.DefaultMaxRetries
	case maxRestarts < 0:
		maxRestarts = 0
	}
	shouldRetry := p.ShouldRetry
	if shouldRetry == nil {
		shouldRetry = model.IsRetryable
	}
	for restarts := 0; ; restarts++ {
		resp, visible, err := x.src.once(ctx, x, m, req, turn)
		if err == nil {
			return resp, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return llm.Response{}, err
		}
		if !visible || !shouldRetry(err) || restarts >= maxRestarts {
			if visible && restarts > 0 {
				return llm.Response{}, fmt.Errorf("agent: turn %d failed after %d restarts: %w", turn, restarts, err)
			}
			return llm.Response{}, err
		}
		wait := p.Backoff(restarts + 1)
		var me *model.Error
		if errors.As(err, &me) && me.RetryAfter > 0 {
			wait = me.RetryAfter
			if limit := p.MaxRetryAfter; limit == 0 && wait > model.DefaultMaxRetryAfter || limit > 0 && wait > limit {
				return llm.Response{}, err
			}
		}
		x.emit(TurnRestarted{Turn: turn, Attempt: restarts + 1, Wait: wait, Err: err})
		if err := sleep(ctx, wait); err != nil {
			return llm.Response{}, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
