package ui

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/internal/redact"
	"github.com/loomkit/loom/llm"
)

// JSONL writes a run as JSON Lines, one object per line, in the shapes of
// loom's contract:
//
//	{"type":"run_started","run_id":…,"model":…}
//	{"type":"text_delta","text":…}
//	{"type":"tool_call","id":…,"name":…,"arguments":{…}}
//	{"type":"approval","id":…,"name":…,"decision":…,"reason":…}
//	{"type":"tool_result","id":…,"name":…,"is_error":…,"content":…}
//	{"type":"retry","attempt":…,"wait_ms":…,"error":…}
//	{"type":"done","run_id":…,"output":…,"turns":…,"usage":{"input_tokens":…,"output_tokens":…}}
//	{"type":"error","run_id":…,"kind":…,"message":…}
//
// run_started comes first and done or error last. Other agent events are
// not written. A retry line is also written when a streamed answer failed
// part-way and its turn is asked again (its text deltas so far were
// provisional; the done line carries the final output).
type JSONL struct {
	W io.Writer
	// Redact, when set, scrubs the text deltas as a stream: a secret the
	// model's text carries split across deltas (so across lines, which no
	// writer could join) is scrubbed whole. A delta's end that may be the
	// start of a secret is held back, and written with the next delta or
	// before the next other line.
	Redact *redact.Redactor

	mu     sync.Mutex
	stream *redact.Stream // the text deltas, with Redact
}

type (
	lineStarted struct {
		Type  string `json:"type"`
		RunID string `json:"run_id"`
		Model string `json:"model"`
	}
	lineText struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	lineToolCall struct {
		Type      string          `json:"type"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	lineApproval struct {
		Type     string `json:"type"`
		ID       string `json:"id"`
		Name     string `json:"name"`
		Decision string `json:"decision"`
		Reason   string `json:"reason"`
	}
	lineToolResult struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Name    string `json:"name"`
		IsError bool   `json:"is_error"`
		Content string `json:"content"`
	}
	lineRetry struct {
		Type    string `json:"type"`
		Attempt int    `json:"attempt"`
		WaitMS  int64  `json:"wait_ms"`
		Error   string `json:"error"`
	}
	lineUsage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	}
	lineDone struct {
		Type   string    `json:"type"`
		RunID  string    `json:"run_id"`
		Output string    `json:"output"`
		Turns  int       `json:"turns"`
		Usage  lineUsage `json:"usage"`
	}
	lineError struct {
		Type    string `json:"type"`
		RunID   string `json:"run_id"`
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
)

func (j *JSONL) write(v any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stream != nil {
		if held := j.stream.Flush(); held != "" {
			j.writeLine(lineText{Type: "text_delta", Text: held})
		}
	}
	j.writeLine(v)
}

func (j *JSONL) writeLine(v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen with these types; say so rather than drop the line
		b, _ = json.Marshal(lineError{Type: "error", Kind: "error", Message: "loom: cannot encode an event: " + err.Error()})
	}
	b = append(b, '\n')
	j.W.Write(b)
}

// text writes a text delta, through the stream of deltas with Redact.
func (j *JSONL) text(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.Redact != nil {
		if j.stream == nil {
			j.stream = j.Redact.Stream()
		}
		if s = j.stream.Next(s); s == "" {
			return
		}
	}
	j.writeLine(lineText{Type: "text_delta", Text: s})
}

// Start implements Sink.
func (j *JSONL) Start(runID, model string, _ bool) {
	j.write(lineStarted{Type: "run_started", RunID: runID, Model: model})
}

// Event implements Sink.
func (j *JSONL) Event(ev agent.Event) {
	switch ev := ev.(type) {
	case agent.TextDelta:
		j.text(ev.Text)
	case agent.ToolCall:
		j.write(lineToolCall{Type: "tool_call", ID: ev.Call.ID, Name: ev.Call.Name, Arguments: Arguments(ev.Call)})
	case agent.ApprovalDecided:
		j.write(lineApproval{Type: "approval", ID: ev.Call.ID, Name: ev.Call.Name, Decision: string(ev.Decision.Action), Reason: ev.Decision.Reason})
	case agent.ToolResult:
		j.write(lineToolResult{Type: "tool_result", ID: ev.Call.ID, Name: ev.Call.Name, IsError: ev.Result.IsError, Content: ev.Result.Content})
	case agent.Retrying:
		j.write(lineRetry{Type: "retry", Attempt: ev.Attempt, WaitMS: ev.Wait.Milliseconds(), Error: errText(ev.Err)})
	case agent.TurnRestarted:
		j.write(lineRetry{Type: "retry", Attempt: ev.Attempt, WaitMS: ev.Wait.Milliseconds(), Error: errText(ev.Err)})
	}
}

// Done implements Sink.
func (j *JSONL) Done(res agent.Result) {
	j.write(lineDone{
		Type:   "done",
		RunID:  res.RunID,
		Output: res.Output,
		Turns:  len(res.Calls),
		Usage:  lineUsage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens},
	})
}

// Fail implements Sink.
func (j *JSONL) Fail(runID string, err error, _ bool) {
	j.write(lineError{Type: "error", RunID: runID, Kind: Kind(err), Message: Message(err)})
}

// Arguments returns a call's arguments as a JSON object, {} when it has
// none, and as a JSON string holding the text the model sent when that is
// not one JSON object (a malformed call, which never runs).
func Arguments(c llm.ToolCall) json.RawMessage {
	if c.ArgumentsError() == nil {
		if norm, ok := llm.NormalizeArguments(c.Arguments); ok {
			return json.RawMessage(norm)
		}
	}
	b, _ := json.Marshal(c.Arguments)
	return b
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
