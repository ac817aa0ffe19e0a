package loomtest

import (
	"net/http"
	"time"

	"github.com/loomkit/loom/llm"
)

// Turn is one scripted answer: the content of an assistant message, and the
// faults to inject while sending it. The zero Turn answers with an empty
// text and stop. A Turn is plain data; the server never modifies one.
type Turn struct {
	// Parts is the answer: llm.Text, llm.Thinking and llm.ToolCall parts in
	// order (other part types are skipped). A ToolCall's Arguments are sent
	// exactly as given, so invalid JSON reaches the client as invalid JSON
	// (in an Anthropic blocking body, where input must be JSON, arguments
	// that are not one JSON object are sent as a JSON string instead). An
	// empty ToolCall.ID is replaced by a generated one.
	Parts []llm.Part
	// Usage is reported with the answer (in the final chunk, or the
	// message_start and message_delta events). It counts as llm.Usage
	// does: InputTokens includes the cached input, which the Anthropic
	// encoding leaves out of input_tokens, as the API does.
	Usage llm.Usage
	// Finish is the finish reason; empty means tool_calls when Parts hold a
	// tool call, else stop.
	Finish llm.FinishReason
	// StopReason, when set, is sent as the wire's stop_reason or
	// finish_reason verbatim, overriding Finish ("refusal",
	// "model_context_window_exceeded", "function_call").
	StopReason string
	// ID and Model name the response; empty means generated ones.
	ID, Model string
	// Chunk, when positive, splits text, thinking and argument deltas into
	// pieces of at most that many bytes (on rune boundaries) in streams.
	Chunk int

	// Reset closes the connection before any response is written: the
	// client sees a connection reset before the headers.
	Reset bool
	// HeaderDelay is waited before the response headers are written.
	HeaderDelay time.Duration
	// Header is added to the response headers (retry-after, x-should-retry).
	Header http.Header
	// Status, when not zero and not 200, answers with that status and an
	// error body in the vendor's shape built from Error (or defaults for
	// the status) instead of the answer.
	Status int
	// Error is the error of an error response, or of an error event.
	Error *APIError
	// Body, when set, is sent verbatim instead of the answer, with Status
	// (200 when zero) and ContentType: an HTML error page, a hand-written
	// stream. Cut modes CutAbort and CutSilence apply after it.
	Body string
	// ContentType of Body; empty means application/json, or
	// text/event-stream for a streaming request.
	ContentType string

	// Pings is the number of ping events sent at the start of a stream
	// (after message_start; ": ping" comments in OpenAI streams).
	Pings int
	// EventDelay is waited before each stream event after the first, and
	// each event is flushed on its own.
	EventDelay time.Duration
	// ErrorAfter is the number of stream events sent before Error is sent
	// as an error event that ends the stream, when Error is set and Status
	// is not. The end marker is never sent then. A blocking request gets
	// Error as an error response instead, with the status the vendor
	// would use for its type (overloaded_error: 529).
	ErrorAfter int
	// Cut ends the response abnormally after CutAfter stream events (for a
	// blocking request: after half its body), end marker included in the
	// count.
	Cut CutMode
	// CutAfter is the number of events sent before the cut.
	CutAfter int
	// PingEvery, with CutSilence, sends a ping at this interval during the
	// silence (a keep-alive stream that never says anything).
	PingEvery time.Duration

	// Flood, when not empty, makes an answer that never ends (a model
	// that does not stop): after the content of Parts, a stream sends
	// Flood as a text delta (or, with FloodCall, as a piece of a call's
	// arguments) again and again, with EventDelay between them, and never
	// a finish or an end marker; a blocking body is an answer whose text
	// (or call's arguments) is Flood repeated. It goes on until FloodBytes
	// bytes of Flood are sent: a stream then ends cleanly, cut short, and
	// a blocking body is closed, a whole answer of that size. With
	// FloodBytes 0 it goes on until the client goes away or the server
	// closes.
	Flood string
	// FloodBytes bounds what Flood sends; 0 means no bound.
	FloodBytes int64
	// FloodCall, when set, names the tool that Flood calls, with the
	// arguments {"content":"<Flood repeated>"}, instead of sending text.
	FloodCall string
}

// CutMode says how a response is cut short.
type CutMode int

const (
	// CutNone sends the whole response.
	CutNone CutMode = iota
	// CutEnd ends the HTTP body cleanly, without the stream's end marker
	// (a gateway that closed the stream).
	CutEnd
	// CutAbort closes the TCP connection abruptly, mid-body.
	CutAbort
	// CutSilence keeps the connection open and sends nothing more, until
	// the client goes away or the server closes.
	CutSilence
)

// APIError is a vendor error: the error object of an error body or of an
// error event.
type APIError struct {
	// Type is the error type: Anthropic error.type ("overloaded_error"),
	// OpenAI error.type ("insufficient_quota", "server_error").
	Type string `json:"type"`
	// Message is the human-readable message.
	Message string `json:"message"`
	// Code is OpenAI's error.code ("insufficient_quota",
	// "rate_limit_exceeded"); Anthropic bodies carry it as
	// error.details.error_code ("enforced_spend_limit_reached").
	Code string `json:"code,omitempty"`
}

// Text returns a turn that answers text and stops.
func Text(text string) Turn {
	return Turn{Parts: []llm.Part{llm.Text{Text: text}}}
}

// ToolCalls returns a turn that asks for the calls, finishing with tool_calls.
func ToolCalls(calls ...llm.ToolCall) Turn {
	parts := make([]llm.Part, len(calls))
	for i, c := range calls {
		parts[i] = c
	}
	return Turn{Parts: parts}
}

// Call returns a tool call with the given id, name and raw JSON arguments.
func Call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// Status returns a turn that fails with HTTP status code and the vendor's
// error body for it; typ and message may be empty for the status's defaults.
func Status(code int, typ, message string) Turn {
	t := Turn{Status: code}
	if typ != "" || message != "" {
		t.Error = &APIError{Type: typ, Message: message}
	}
	return t
}

// ErrorEvent returns a turn whose stream sends an error event of type typ
// after n events (a blocking request gets the matching error response).
func ErrorEvent(typ, message string, after int) Turn {
	return Turn{Error: &APIError{Type: typ, Message: message}, ErrorAfter: after}
}

// HTMLPage returns a turn answered by an HTML page with status code (a
// proxy's error page; 200 when code is 0).
func HTMLPage(code int) Turn {
	return Turn{
		Status:      code,
		ContentType: "text/html; charset=utf-8",
		Body:        "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1><p>The proxy received an invalid response from an upstream server.</p></body></html>\n",
	}
}

// RawStream returns a turn answered by body verbatim as a 200
// text/event-stream (a hand-written, possibly broken, stream).
func RawStream(body string) Turn {
	return Turn{Body: body, ContentType: "text/event-stream"}
}

// WithHeader returns t with a response header added.
func (t Turn) WithHeader(key, value string) Turn {
	h := make(http.Header, len(t.Header)+1)
	for k, v := range t.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Add(key, value)
	t.Header = h
	return t
}

// WithUsage returns t with usage u.
func (t Turn) WithUsage(u llm.Usage) Turn {
	t.Usage = u
	return t
}

// CutAt returns t cut by mode after n stream events.
func (t Turn) CutAt(n int, mode CutMode) Turn {
	t.Cut, t.CutAfter = mode, n
	return t
}

// finish returns the turn's finish reason with its default applied.
func (t *Turn) finish() llm.FinishReason {
	if t.Finish != "" {
		return t.Finish
	}
	for _, p := range t.Parts {
		if _, ok := p.(llm.ToolCall); ok {
			return llm.FinishToolCalls
		}
	}
	return llm.FinishStop
}

// failing reports whether t answers with an error response or raw body
// instead of its content, for a request that streams or not.
func (t *Turn) failing(stream bool) bool {
	if t.Body != "" || (t.Status != 0 && t.Status != http.StatusOK) {
		return true
	}
	return !stream && t.Error != nil
}
