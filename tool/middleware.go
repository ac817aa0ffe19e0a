package tool

import (
	"context"
	"encoding/json"

	"github.com/loomkit/loom/llm"
)

// Chain returns t wrapped by mws, the first outermost: Chain(t, a, b) calls
// a's wrapper, which calls b's, which calls t.
func Chain(t Tool, mws ...Middleware) Tool {
	for i := len(mws) - 1; i >= 0; i-- {
		t = mws[i](t)
	}
	return t
}

// CallFunc is the shape of [Tool].Call.
type CallFunc func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)

// Wrap returns a tool with the spec and approval decisions of t whose calls
// go to call. It is the easy way to write middleware that keeps per-call
// approval: a wrapper built by hand hides t's [Approvable] method.
func Wrap(t Tool, call CallFunc) Tool {
	return &wrapped{inner: t, call: call}
}

type wrapped struct {
	inner Tool
	call  CallFunc
}

func (w *wrapped) Spec() llm.ToolSpec { return w.inner.Spec() }

func (w *wrapped) Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
	return w.call(ctx, args)
}

func (w *wrapped) NeedsApproval(args json.RawMessage) bool { return NeedsApproval(w.inner, args) }

// Unwrap returns the wrapped tool.
func (w *wrapped) Unwrap() Tool { return w.inner }

// Recover is middleware that turns a panic of the tool into an error
// result carrying the panic value (no stack trace: the model cannot use it).
// [Set.Call] and [Func] tools do this already; Recover is for drivers that
// call tools directly.
func Recover(t Tool) Tool {
	return Wrap(t, func(ctx context.Context, args json.RawMessage) (llm.ToolResult, error) {
		return callSafely(ctx, t, args)
	})
}
