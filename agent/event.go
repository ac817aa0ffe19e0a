package agent

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/run"
)

// Event is something that happened in a run, in the order it happened.
// The set is closed: RunStarted, TextDelta, ThinkingDelta, ToolCall,
// ApprovalRequested, ApprovalDecided, InvalidToolCall, ToolResult, Note,
// Retrying, TurnRestarted, Usage and Done.
//
// Run and Stream produce the same events but for deltas: Stream yields
// text as it arrives, Run one delta per part once the answer is complete.
// Every event encodes to a JSON object with a "type" member
// ("text_delta", ...), for JSON Lines output.
//
// Events share slices with the run (messages, calls): read them, never
// modify them.
type Event interface {
	eventType() string
}

// RunStarted opens every run, and every resumption of one.
type RunStarted struct {
	RunID   string `json:"run_id"`
	Resumed bool   `json:"resumed,omitempty"`
}

// TextDelta is a piece of the model's answer text on turn Turn. Deltas of
// a turn that is later restarted (TurnRestarted) were provisional.
type TextDelta struct {
	Turn int    `json:"turn"`
	Text string `json:"text"`
}

// ThinkingDelta is a piece of the model's reasoning on turn Turn.
type ThinkingDelta struct {
	Turn int    `json:"turn"`
	Text string `json:"text"`
}

// ToolCall is a complete tool call about to be answered: executed, or
// answered with its preresolved result (Preresolved: denied, skipped as
// invalid, malformed arguments) without running anything. A turn that
// is answered as a whole because one of its calls names a tool that is
// not allowed (InvalidToolCall resolved with run.Retry) reports each of
// its calls, Preresolved, and then each result, after the
// InvalidToolCall: every call the model made has its ToolCall and its
// ToolResult, unless the run fails on it.
type ToolCall struct {
	Turn        int          `json:"turn"`
	Call        llm.ToolCall `json:"call"`
	Preresolved bool         `json:"preresolved,omitempty"`
}

// ApprovalRequested says the Approver is being asked about Calls.
type ApprovalRequested struct {
	Turn  int               `json:"turn"`
	Calls []run.PendingCall `json:"calls"`
}

// ApprovalDecided is the decision about one call the Approver was asked
// about (or that Resumption.Decisions answered). Calls of tool.Approvable
// tools whose arguments need no approval are approved without an event.
type ApprovalDecided struct {
	Turn     int          `json:"turn"`
	Call     llm.ToolCall `json:"call"`
	Decision run.Decision `json:"decision"`
}

// InvalidToolCall says a call named a tool that is not allowed, and how
// the InvalidToolPolicy resolved it.
type InvalidToolCall struct {
	Turn       int            `json:"turn"`
	Call       llm.ToolCall   `json:"call"`
	Resolution run.Resolution `json:"-"`
}

// ToolResult is the committed result of one call. The results of a turn
// come together, in call order, after the whole turn's calls settled.
// Skipped is set when a tool middleware skipped the call.
type ToolResult struct {
	Turn    int            `json:"turn"`
	Call    llm.ToolCall   `json:"call"`
	Result  llm.ToolResult `json:"result"`
	Skipped bool           `json:"skipped,omitempty"`
}

// Note is a message the driver added for the model: a budget warning, a
// loop-guard nudge, a request for a final answer (WrapUp), or the error of
// an answer that did not match the output schema.
type Note struct {
	Turn   int    `json:"turn"`
	Reason string `json:"reason"` // "budget", "loop", "output"
	Text   string `json:"text"`
	WrapUp bool   `json:"wrap_up,omitempty"` // the next call is the last, without tools
}

// Retrying says a model call failed and will be sent again after Wait.
type Retrying struct {
	Turn    int           `json:"turn"`
	Attempt int           `json:"attempt"` // the attempt that failed, 1 for the first
	Wait    time.Duration `json:"-"`
	Err     error         `json:"-"`
}

// TurnRestarted says a streamed answer failed after part of it was
// delivered, and the turn is asked again after Wait: the deltas already
// sent for Turn were provisional and are replaced by the new answer's.
type TurnRestarted struct {
	Turn    int           `json:"turn"`
	Attempt int           `json:"attempt"`
	Wait    time.Duration `json:"-"`
	Err     error         `json:"-"`
}

// Usage reports the tokens of model call Turn, the run's total, and its
// cost in US dollars when the model's price is known.
type Usage struct {
	Turn    int       `json:"turn"`
	Usage   llm.Usage `json:"usage"`
	Total   llm.Usage `json:"total"`
	CostUSD float64   `json:"cost_usd,omitempty"`
}

// Done ends a run that completed. It is the last event.
type Done struct {
	Result Result `json:"result"`
}

func (RunStarted) eventType() string        { return "run_started" }
func (TextDelta) eventType() string         { return "text_delta" }
func (ThinkingDelta) eventType() string     { return "thinking_delta" }
func (ToolCall) eventType() string          { return "tool_call" }
func (ApprovalRequested) eventType() string { return "approval_requested" }
func (ApprovalDecided) eventType() string   { return "approval_decided" }
func (InvalidToolCall) eventType() string   { return "invalid_tool_call" }
func (ToolResult) eventType() string        { return "tool_result" }
func (Note) eventType() string              { return "note" }
func (Retrying) eventType() string          { return "retrying" }
func (TurnRestarted) eventType() string     { return "turn_restarted" }
func (Usage) eventType() string             { return "usage" }
func (Done) eventType() string              { return "done" }

// EventType returns the "type" member an event is encoded with.
func EventType(e Event) string { return e.eventType() }

// MarshalJSON encodes the event with its type.
func (e RunStarted) MarshalJSON() ([]byte, error) { type p RunStarted; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type.
func (e TextDelta) MarshalJSON() ([]byte, error) { type p TextDelta; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type.
func (e ThinkingDelta) MarshalJSON() ([]byte, error) {
	type p ThinkingDelta
	return tagged(e, p(e), nil)
}

// MarshalJSON encodes the event with its type.
func (e ToolCall) MarshalJSON() ([]byte, error) { type p ToolCall; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type.
func (e ApprovalRequested) MarshalJSON() ([]byte, error) {
	type p ApprovalRequested
	return tagged(e, p(e), nil)
}

// MarshalJSON encodes the event with its type.
func (e ApprovalDecided) MarshalJSON() ([]byte, error) {
	type p ApprovalDecided
	return tagged(e, p(e), nil)
}

// MarshalJSON encodes the event with its type and the resolution as
// run.MarshalResolution writes it.
func (e InvalidToolCall) MarshalJSON() ([]byte, error) {
	type p InvalidToolCall
	var extra map[string]any
	if e.Resolution != nil {
		res, err := run.MarshalResolution(e.Resolution)
		if err != nil {
			return nil, err
		}
		extra = map[string]any{"resolution": json.RawMessage(res)}
	}
	return tagged(e, p(e), extra)
}

// MarshalJSON encodes the event with its type.
func (e ToolResult) MarshalJSON() ([]byte, error) { type p ToolResult; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type.
func (e Note) MarshalJSON() ([]byte, error) { type p Note; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type, the wait in milliseconds
// and the error's message.
func (e Retrying) MarshalJSON() ([]byte, error) {
	type p Retrying
	return tagged(e, p(e), waitAndError(e.Wait, e.Err))
}

// MarshalJSON encodes the event with its type, the wait in milliseconds
// and the error's message.
func (e TurnRestarted) MarshalJSON() ([]byte, error) {
	type p TurnRestarted
	return tagged(e, p(e), waitAndError(e.Wait, e.Err))
}

// MarshalJSON encodes the event with its type.
func (e Usage) MarshalJSON() ([]byte, error) { type p Usage; return tagged(e, p(e), nil) }

// MarshalJSON encodes the event with its type.
func (e Done) MarshalJSON() ([]byte, error) { type p Done; return tagged(e, p(e), nil) }

func waitAndError(wait time.Duration, err error) map[string]any {
	m := map[string]any{"wait_ms": wait.Milliseconds()}
	if err != nil {
		m["error"] = err.Error()
	}
	return m
}

// tagged encodes body (a struct without the event's methods) as a JSON
// object whose first member is "type", followed by extra members.
func tagged(e Event, body any, extra map[string]any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString(`{"type":"`)
	buf.WriteString(e.eventType())
	buf.WriteByte('"')
	if len(b) > 2 {
		buf.WriteByte(',')
		buf.Write(b[1 : len(b)-1])
	}
	for _, k := range []string{"resolution", "wait_ms", "error"} {
		v, ok := extra[k]
		if !ok {
			continue
		}
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		buf.WriteString(`,"` + k + `":`)
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
