package llm

import "encoding/json"

// FinishReason says why the model stopped. Adapters map the vendor's words
// onto these; the empty value means the provider did not say.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"           // a natural end or a stop sequence
	FinishLength        FinishReason = "length"         // the output token limit was reached
	FinishToolCalls     FinishReason = "tool_calls"     // the model wants tools to run
	FinishContentFilter FinishReason = "content_filter" // the provider withheld output (also refusals)
	FinishPause         FinishReason = "pause"          // the provider paused a long turn (Anthropic pause_turn)
	FinishOther         FinishReason = "other"          // anything else the provider said
)

// Request is everything a model call needs. System is the system prompt; it
// is never a message, so no adapter can lose it among them.
//
// Sampling fields are pointers or zero when unset: an adapter sends only what
// is set (MaxTokens 0 means the adapter's default).
type Request struct {
	Model       string       `json:"model,omitempty"`
	System      string       `json:"system,omitempty"`
	Messages    []Message    `json:"messages"`
	Tools       []ToolSpec   `json:"tools,omitempty"`
	ToolChoice  ToolChoice   `json:"tool_choice,omitzero"`
	MaxTokens   int          `json:"max_tokens,omitempty"`
	Temperature *float64     `json:"temperature,omitempty"`
	TopP        *float64     `json:"top_p,omitempty"`
	Stop        []string     `json:"stop,omitempty"`
	Schema      *OutputShape `json:"output_schema,omitempty"`
}

// OutputShape asks for a final answer that is JSON matching Schema, where the
// provider supports it natively. Drivers validate the answer either way.
type OutputShape struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// Response is one model call's answer.
//
// Truncated is set when the answer ended before the provider's end marker
// (a cut stream): its tool calls are marked Incomplete and must not run.
// Raw is the provider's own body (blocking calls) for debugging; it may be
// nil and is never needed to interpret the response.
type Response struct {
	Message      Message         `json:"message"`
	Usage        Usage           `json:"usage,omitzero"`
	FinishReason FinishReason    `json:"finish_reason,omitempty"`
	Truncated    bool            `json:"truncated,omitempty"`
	ID           string          `json:"id,omitempty"`
	Model        string          `json:"model,omitempty"`
	RequestID    string          `json:"request_id,omitempty"`
	Raw          json.RawMessage `json:"raw,omitempty"`
}

// Text returns the answer's text parts concatenated.
func (r Response) Text() string { return r.Message.Text() }

// ToolCalls returns the answer's tool calls in order.
func (r Response) ToolCalls() []ToolCall { return r.Message.ToolCalls() }
