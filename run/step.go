package run

import (
	"encoding/json"

	"github.com/loomkit/loom/llm"
)

// Step is what Next tells the driver to do. The set is closed: CallModel,
// ResolveToolCall, ApproveTools, CallTools and Done.
//
// Slices inside a step are shared with the run (that is why Next does not
// copy history): read them, never modify them. They stay valid, and
// unchanged, for the life of the run.
type Step interface {
	step()
}

// CallModel asks the driver to call the model with Request and feed the
// answer to ModelResponse. Request.Messages is the input history followed by
// the run's messages so far.
type CallModel struct {
	// Turn is the 1-based number of this model call in the run.
	Turn int
	// Request is the whole request for the call.
	Request llm.Request
	// Final is set when this is a tool-free last call (WrapUp or
	// GracefulLastTurn): its text ends the run, and any tool call in the
	// answer is dropped.
	Final bool
}

// ResolveToolCall asks the driver to decide what to do with a tool call
// whose name is not allowed on its turn, by calling Resolve with Fail,
// Retry, Repair, Skip or Stop. Invalid calls are presented one at a time,
// in emission order.
type ResolveToolCall struct {
	Turn int
	// Call is the invalid call (its ID already made unique).
	Call llm.ToolCall
	// Allowed are the names allowed on this turn, sorted.
	Allowed []string
	// Suggestion is the allowed name Call.Name most likely meant (case,
	// '-' versus '_', or up to two edits apart), or empty when there is no
	// single such name. Repair{Name: Suggestion} is the usual fix.
	Suggestion string
}

// ApproveTools asks the driver for a decision on every listed call (their
// specs need approval), given to Approve. The run may be saved here and
// resumed in another process when the decisions arrive.
type ApproveTools struct {
	Turn  int
	Calls []PendingCall
}

// CallTools asks the driver to run Calls, with any concurrency, and feed
// one result per call to ToolResults. Calls are in the order the model
// emitted them.
type CallTools struct {
	Turn  int
	Calls []PendingCall
}

// PendingCall is a tool call waiting for its result.
type PendingCall struct {
	// Call is the call as committed to history; send results for Call.ID.
	Call llm.ToolCall `json:"call"`
	// Spec is the advertised tool the call names (its effect and approval
	// flag). It is zero when the call names no advertised tool, which only
	// happens when Result is set.
	Spec llm.ToolSpec `json:"spec,omitzero"`
	// Result, when set, is the call's result already: the driver must
	// return it verbatim and must not run the tool (a denied or skipped
	// call, arguments that are not JSON, a call cut off by the output
	// limit).
	Result *llm.ToolResult `json:"result,omitempty"`
}

// Done says the run is over. Next returns the same Done again if asked.
type Done struct {
	Response
}

// Response is the outcome of a completed run.
type Response struct {
	// Output is the text parts of the last turn concatenated.
	Output string `json:"output"`
	// Message is the final assistant message (empty when the model's last
	// turn was empty; it is then not in Messages either).
	Message llm.Message `json:"message"`
	// Messages are the run's new messages, Input excluded. Shared with
	// the run: do not modify.
	Messages []llm.Message `json:"messages"`
	// Usage is the sum over every model call, retried turns included.
	Usage llm.Usage `json:"usage,omitzero"`
	// Calls has one record per model call, in order.
	Calls []CallRecord `json:"calls"`
}

// CallRecord is what the run keeps of one model call.
type CallRecord struct {
	Index        int              `json:"index"` // 0-based
	Turn         int              `json:"turn"`  // the 1-based turn it answered
	Usage        llm.Usage        `json:"usage,omitzero"`
	FinishReason llm.FinishReason `json:"finish_reason,omitempty"`
	ID           string           `json:"id,omitempty"`
	Model        string           `json:"model,omitempty"`
	RequestID    string           `json:"request_id,omitempty"`
	Raw          json.RawMessage  `json:"raw,omitempty"`
}

func (CallModel) step()       {}
func (ResolveToolCall) step() {}
func (ApproveTools) step()    {}
func (CallTools) step()       {}
func (Done) step()            {}
