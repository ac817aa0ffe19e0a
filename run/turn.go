package run

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loomkit/loom/llm"
)

// Texts the model reads in results and notes the machine writes itself.
const (
	// NotExecuted answers the other calls of a turn in which one call was
	// invalid and resolved with Retry or Skip.
	NotExecuted = "Tool not executed because another tool call in the same assistant turn was invalid."
	// DeniedPrefix starts the result of a call denied at approval; the
	// decision's reason follows.
	DeniedPrefix = "Tool call denied: "
	// CutOff answers a call that the output token limit cut off.
	CutOff = "Tool call was cut off by the output token limit before it was complete, so it was not run. Call the tool again with shorter arguments, or split the work into smaller calls."
	// LastTurnNote is the note sent before the tool-free last call of a
	// run with GracefulLastTurn.
	LastTurnNote = "This is the last turn: tools are no longer available. Answer now with what you have."
)

// modelTurn is the answer being resolved, approved or advanced.
type modelTurn struct {
	orig      llm.Message       // the answer with unique ids: what Retry commits
	msg       llm.Message       // orig with repairs and edits: what is committed otherwise
	changed   bool              // msg.Parts is a copy, no longer orig.Parts
	calls     []int             // index in Parts of each tool call, in order
	pre       []*llm.ToolResult // the preresolved result of each call, if any
	next      int               // scan position: calls before it are settled
	skipped   bool              // a Skip ended the scan
	approvals []int             // calls awaiting approval
	final     bool              // the answer to a tool-free last call
	finish    llm.FinishReason
}

func (t *modelTurn) call(i int) llm.ToolCall { return t.msg.Parts[t.calls[i]].(llm.ToolCall) }

// setCall replaces call i in msg, copying msg's parts the first time so
// that orig stays as the model sent it.
func (t *modelTurn) setCall(i int, c llm.ToolCall) {
	if !t.changed {
		t.msg.Parts = slices.Clone(t.orig.Parts)
		t.changed = true
	}
	t.msg.Parts[t.calls[i]] = c
}

// emitModelCall spends one turn of the budget and hands out the request.
func (r *Run) emitModelCall() (state, Step, error) {
	limit := r.cfg.maxTurns()
	if r.turn >= limit {
		return 0, nil, &MaxTurnsError{MaxTurns: limit}
	}
	final := r.wrap || (r.cfg.GracefulLastTurn && r.turn == limit-1)
	if final {
		note := r.wrapReason
		if !r.wrap && r.turn > 0 {
			note = LastTurnNote
		}
		if note != "" {
			r.hist = append(r.hist, llm.UserText(note))
		}
		r.wrap, r.wrapReason = false, ""
	}
	r.final = final
	r.turn++
	return stateAwaitingModel, r.callModel(), nil
}

// acceptAnswer records the model's answer, makes its call ids unique and
// starts the scan of its calls.
func (r *Run) acceptAnswer(resp *llm.Response) (state, error) {
	if resp.Truncated {
		return 0, r.protocolError(stateAwaitingModel, inModelResponse, "the answer is truncated (its stream ended without the end marker) and its tool calls must not run; call the model again with the same request, or give up on the run")
	}
	if role := resp.Message.Role; role != "" && role != llm.RoleAssistant {
		return 0, r.protocolError(stateAwaitingModel, inModelResponse, fmt.Sprintf("the answer's role is %q; a model answer is an assistant message", role))
	}
	for i, p := range resp.Message.Parts {
		switch p.(type) {
		case nil:
			return 0, r.protocolError(stateAwaitingModel, inModelResponse, fmt.Sprintf("part %d of the answer is nil", i))
		case llm.ToolResult:
			return 0, r.protocolError(stateAwaitingModel, inModelResponse, fmt.Sprintf("part %d of the answer is a tool result; results come from tools, not from the model", i))
		}
	}

	r.calls = append(r.calls, CallRecord{
		Index:        len(r.calls),
		Turn:         r.turn,
		Usage:        resp.Usage,
		FinishReason: resp.FinishReason,
		ID:           resp.ID,
		Model:        resp.Model,
		RequestID:    resp.RequestID,
		Raw:          resp.Raw,
	})
	r.usage = r.usage.Add(resp.Usage)

	t := &modelTurn{final: r.final, finish: resp.FinishReason}
	parts := make([]llm.Part, 0, len(resp.Message.Parts))
	for _, p := range resp.Message.Parts {
		c, isCall := p.(llm.ToolCall)
		if !isCall {
			parts = append(parts, p)
			continue
		}
		if t.final {
			continue // a tool-free last call ends the run with its text
		}
		t.calls = append(t.calls, len(parts))
		c = r.uniqueID(c, len(t.calls))
		var pre *llm.ToolResult
		if c.Incomplete {
			pre = &llm.ToolResult{CallID: c.ID, Name: c.Name, Content: CutOff, IsError: true}
		}
		t.pre = append(t.pre, pre)
		parts = append(parts, c)
	}
	t.orig = llm.Message{Role: llm.RoleAssistant, Parts: parts}
	t.msg = t.orig
	r.mt = t
	return r.scan(), nil
}

// uniqueID gives c an id no other call of the run has: the provider's when
// it is new, else one minted from the turn and the call's 1-based position,
// keeping the provider's in ProviderID.
func (r *Run) uniqueID(c llm.ToolCall, pos int) llm.ToolCall {
	if _, used := r.ids[c.ID]; c.ID == "" || used {
		base := "call_" + strconv.Itoa(r.turn) + "_" + strconv.Itoa(pos)
		id := base
		for n := 2; ; n++ {
			if _, used := r.ids[id]; !used {
				break
			}
			id = base + "_" + strconv.Itoa(n)
		}
		if c.ID != "" && c.ProviderID == "" {
			c.ProviderID = c.ID
		}
		c.ID = id
	}
	r.ids[c.ID] = struct{}{}
	return c
}

// scan walks the calls from the scan position and stops at the first one
// whose name is not allowed.
func (r *Run) scan() state {
	t := r.mt
	for ; t.next < len(t.calls); t.next++ {
		if t.pre[t.next] == nil && !r.rules.allowed[t.call(t.next).Name] {
			return stateResolving
		}
	}
	return r.settle()
}

// settle ends the scan: calls that must not run get their results, and
// calls that need approval are listed.
func (r *Run) settle() state {
	t := r.mt
	for i := range t.calls {
		if t.pre[i] != nil {
			continue
		}
		c := t.call(i)
		if t.skipped {
			t.pre[i] = &llm.ToolResult{CallID: c.ID, Name: c.Name, Content: NotExecuted, IsError: true}
			continue
		}
		if err := argumentsError(c); err != nil || c.Malformed {
			t.pre[i] = &llm.ToolResult{CallID: c.ID, Name: c.Name, Content: malformedText(err), IsError: true}
		}
	}
	if t.skipped {
		return stateAdvance
	}
	t.approvals = nil
	for i := range t.calls {
		if t.pre[i] == nil && r.spec(t.call(i).Name).NeedsApproval {
			t.approvals = append(t.approvals, i)
		}
	}
	if len(t.approvals) > 0 {
		return stateApproving
	}
	return stateAdvance
}

// argumentsError is c.ArgumentsError with a fast path, free of
// allocations, for the common case of one well-formed object.
func argumentsError(c llm.ToolCall) error {
	s := strings.TrimSpace(c.Arguments)
	if s == "" || (s[0] == '{' && json.Valid([]byte(s))) {
		return nil
	}
	return c.ArgumentsError()
}

func malformedText(err error) string {
	if err == nil {
		return "Tool call arguments were malformed and could not be read, so the tool was not run. Call it again with the arguments as one JSON object."
	}
	return fmt.Sprintf("Tool call arguments could not be read (%v), so the tool was not run. Call it again with the arguments as one JSON object.", err)
}

// spec returns the advertised tool named name, or a zero spec.
func (r *Run) spec(name string) llm.ToolSpec {
	if i, ok := r.rules.specs[name]; ok {
		return r.cfg.Tools[i]
	}
	return llm.ToolSpec{}
}

// advance commits the settled turn and says what follows it: its tool
// calls, or the end of the run.
func (r *Run) advance() (state, Step, error) {
	t := r.mt
	if len(t.calls) == 0 && !answered(t.msg) && (t.finish == llm.FinishLength || t.finish == llm.FinishContentFilter) {
		return 0, nil, &TruncatedError{FinishReason: t.finish}
	}
	if !t.msg.IsEmpty() {
		r.hist = append(r.hist, t.msg)
	}
	r.mt = nil
	if len(t.calls) > 0 {
		pending := make([]PendingCall, len(t.calls))
		for i := range t.calls {
			c := t.call(i)
			pending[i] = PendingCall{Call: c, Spec: r.spec(c.Name), Result: t.pre[i]}
		}
		r.pending = pending
		return stateExecuting, CallTools{Turn: r.turn, Calls: pending}, nil
	}
	r.done = &Done{Response{
		Output:   t.msg.Text(),
		Message:  t.msg,
		Messages: r.Messages(),
		Usage:    r.usage,
		Calls:    r.Calls(),
	}}
	return stateDone, *r.done, nil
}

// answered reports whether m delivers an answer: a tool call, non-empty
// text or an image. Reasoning alone is not one.
func answered(m llm.Message) bool {
	for _, p := range m.Parts {
		switch p := p.(type) {
		case llm.ToolCall, llm.Image:
			return true
		case llm.Text:
			if p.Text != "" {
				return true
			}
		}
	}
	return false
}

// retryTurn rejects a tool-free turn and goes back to PreparingRequest.
func (r *Run) retryTurn(feedback string) (state, error) {
	t := r.mt
	if len(t.calls) > 0 {
		return 0, &StoppedError{Reason: "RetryTurn cannot retry a turn that carries tool calls; resolve invalid calls with Resolve(Retry{...}) and let valid ones run"}
	}
	if feedback != "" {
		if !t.msg.IsEmpty() {
			r.hist = append(r.hist, t.msg)
		}
		r.hist = append(r.hist, llm.UserText(feedback))
	}
	if t.final {
		r.wrap, r.wrapReason = true, ""
	}
	r.mt = nil
	return statePreparing, nil
}
