package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Event is one piece of a streamed model answer. The set is closed:
// ResponseStart, TextDelta, ThinkingDelta, ToolCallStart, ToolCallDelta,
// ToolCallEnd, UsageReport and Finish. An Accumulator folds them into a
// Response.
//
// Tool-call events name their call by Index, the provider's slot number for
// it (OpenAI's tool_calls[].index, Anthropic's content block index). Indexes
// need not be dense or start at zero.
type Event interface {
	eventType() string
}

// ResponseStart carries the response's identity, when the provider sends it.
type ResponseStart struct {
	ID        string `json:"id,omitempty"`
	Model     string `json:"model,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// TextDelta is a piece of answer text.
type TextDelta struct {
	Text string `json:"text"`
}

// ThinkingDelta is a piece of reasoning, of its signature, or of redacted
// reasoning. Pieces go to the current thinking part; Start begins a new one.
type ThinkingDelta struct {
	Start     bool   `json:"start,omitempty"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  string `json:"redacted,omitempty"`
}

// ToolCallStart opens the tool call in slot Index. Name and Arguments may
// already hold the first pieces. A start on an index whose open call has a
// different non-empty ID opens a second call (some providers reuse indexes).
type ToolCallStart struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ToolCallDelta continues the call in slot Index: Name and Arguments are
// appended to what came before. A delta for an index never started opens
// the call.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// ToolCallEnd says the call in slot Index is complete.
type ToolCallEnd struct {
	Index int `json:"index"`
}

// UsageReport carries token counts so far. Providers report cumulatively,
// so each count a report carries replaces the one before it (Apply).
//
// Reported says which counts the report carries, zeros included: a count
// the provider reported as zero replaces an earlier one, a count it left
// out does not. An empty Reported means the non-zero counts of Usage (a
// report made without saying).
type UsageReport struct {
	Usage    Usage       `json:"usage"`
	Reported UsageFields `json:"reported,omitempty"`
}

// Apply returns u with the counts the report carries replaced by the
// report's.
func (r UsageReport) Apply(u Usage) Usage {
	f := r.Reported
	if f == 0 {
		f = r.Usage.NonZero()
	}
	if f&UsageInput != 0 {
		u.InputTokens = r.Usage.InputTokens
	}
	if f&UsageOutput != 0 {
		u.OutputTokens = r.Usage.OutputTokens
	}
	if f&UsageCacheRead != 0 {
		u.CacheReadTokens = r.Usage.CacheReadTokens
	}
	if f&UsageCacheWrite != 0 {
		u.CacheWriteTokens = r.Usage.CacheWriteTokens
	}
	if f&UsageReasoning != 0 {
		u.ReasoningTokens = r.Usage.ReasoningTokens
	}
	return u
}

// Finish ends the answer. Adapters send it only when the provider's end
// marker arrived; a stream without it is truncated.
type Finish struct {
	Reason FinishReason `json:"reason,omitempty"`
}

func (ResponseStart) eventType() string { return "response_start" }
func (TextDelta) eventType() string     { return "text_delta" }
func (ThinkingDelta) eventType() string { return "thinking_delta" }
func (ToolCallStart) eventType() string { return "tool_call_start" }
func (ToolCallDelta) eventType() string { return "tool_call_delta" }
func (ToolCallEnd) eventType() string   { return "tool_call_end" }
func (UsageReport) eventType() string   { return "usage" }
func (Finish) eventType() string        { return "finish" }

// MarshalEvent encodes an event as a JSON object with a "type" member.
func MarshalEvent(e Event) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("llm: nil event")
	}
	var b bytes.Buffer
	if err := appendTagged(&b, e.eventType(), e); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalEvent decodes an event encoded by MarshalEvent, refusing unknown
// types and fields.
func UnmarshalEvent(data []byte) (Event, error) {
	var tag struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &tag); err != nil {
		return nil, fmt.Errorf("llm: event: %w", err)
	}
	body, err := withoutType(data)
	if err != nil {
		return nil, fmt.Errorf("llm: event: %w", err)
	}
	var e Event
	switch tag.Type {
	case "response_start":
		var v ResponseStart
		err = strictUnmarshal(body, &v)
		e = v
	case "text_delta":
		var v TextDelta
		err = strictUnmarshal(body, &v)
		e = v
	case "thinking_delta":
		var v ThinkingDelta
		err = strictUnmarshal(body, &v)
		e = v
	case "tool_call_start":
		var v ToolCallStart
		err = strictUnmarshal(body, &v)
		e = v
	case "tool_call_delta":
		var v ToolCallDelta
		err = strictUnmarshal(body, &v)
		e = v
	case "tool_call_end":
		var v ToolCallEnd
		err = strictUnmarshal(body, &v)
		e = v
	case "usage":
		var v UsageReport
		err = strictUnmarshal(body, &v)
		e = v
	case "finish":
		var v Finish
		err = strictUnmarshal(body, &v)
		e = v
	default:
		return nil, fmt.Errorf("llm: unknown event type %q", tag.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("llm: event %s: %w", tag.Type, err)
	}
	return e, nil
}
