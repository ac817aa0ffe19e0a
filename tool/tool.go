package tool

import (
	"context"
	"encoding/json"

	"github.com/loomkit/loom/llm"
)

// Tool is something a model can ask to run. Implementations are safe for
// concurrent use: a driver may run several calls of one tool at once.
//
// Call runs the tool with the model's arguments (a JSON object; never nil,
// {} when the model sent none). A failure of the tool itself (bad
// arguments, a missing file, a command that exits non-zero) is data: a
// result with IsError set and Content saying what happened, so the model can
// react. A Go error is reserved for the machinery: the driver treats it as a
// failure of the run, not of the call. The result's CallID and Name are
// filled in by the driver; a tool may leave them empty. Call must return
// promptly once ctx is done.
type Tool interface {
	Spec() llm.ToolSpec
	Call(ctx context.Context, args json.RawMessage) (llm.ToolResult, error)
}

// Middleware wraps a tool with behaviour of its own.
type Middleware func(Tool) Tool
