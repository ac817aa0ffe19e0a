// Package anthropic is the model.Model for Anthropic's Messages API
// (POST /v1/messages), blocking and streaming, written on net/http.
//
// # Requests
//
// The system prompt goes in the top-level "system" field, never among the
// messages. max_tokens is always sent (Request.MaxTokens, else
// Config.MaxTokens, else 4096). Tools are sent with their JSON Schema as
// input_schema; tool choice auto, required, none and one named tool map to
// auto (omitted), any, none and tool (several named tools: only those are
// offered, with any). Assistant turns carry their text, thinking (with its
// signature; thinking without one, from another provider, is left out),
// redacted thinking and tool_use blocks. All tool results of a turn go in
// one user message, as tool_result blocks before any text. A result with
// Images has as content an array: a text block (when the text is not
// empty), then an image block per image (base64 source for bytes, url
// source for a URL). A failed result may hold only text (is_error), so
// its images follow the results of the message, after a text block
// "Images from the result of call <id> (<name>):". Tool-call ids are made
// to match ^[a-zA-Z0-9_-]+$ by SanitizeID, the same way for a call and its
// result. A call whose arguments are not one JSON object (a malformed
// call, which was never run) is sent with input {}.
//
// Request.Schema (structured output) is sent as output_config:
// {"format": {"type": "json_schema", "schema": ...}} (Anthropic takes no
// name); a schema that is not one JSON object is refused before sending
// with KindBadRequest. The API accepts only a subset of JSON Schema and
// refuses the rest with a 400, so the schema is rewritten into it: every
// object closed (additionalProperties false), the bounds the API cannot
// take (minimum, maxLength, pattern, minItems above 1, formats it does not
// know, ...) moved into the description, oneOf sent as anyOf. The caller
// validates the answer against its own schema (the agent does). A schema
// whose meaning the subset cannot hold (a map or other open object,
// recursion, an external $ref, an enum of objects, not, if) is left out
// rather than changed into another. Config.NoStructuredOutput leaves the
// field out always.
//
// Before anything is sent, the history is checked with llm.CheckHistory: a
// tool call without its result, or a result without its call, is refused
// with a *model.Error of KindBadRequest wrapping the *llm.HistoryError, so a
// request the API would reject never leaves. Likewise llm.CheckImages
// refuses an image, as a part or in a result, with neither data nor a URL
// or with data but no media type (wrapping the *llm.ImageError). Formats
// and the size of one image are the API's to check; the API's bounds on
// a request's images (100, sides of at most 2000 pixels when more than
// 20, 32 MB in all) are kept by leaving the oldest images out of the
// request, each replaced by a line saying so (the caller's history keeps
// them). The body is encoded once, in one pass,
// and can be replayed by the transport (GetBody).
//
// # Responses
//
// A blocking body is decoded once and kept in Response.Raw. A stream is
// checked as it arrives: pings, unknown event types and unknown delta types
// are ignored; blocks must start in order and deltas must name an open
// block, else the stream fails with KindInvalidResponse; usage is
// cumulative (the last report of each count wins); an "event: error" after
// HTTP 200 becomes a *model.Error classified by its error.type
// (overloaded_error: KindOverloaded); a stream that ends before
// message_stop fails with KindTruncatedStream, and so does one whose
// connection breaks mid-way. A whole JSON message sent to a streaming
// request (a proxy that ignored "stream") is replayed as events; an HTML
// page or other non-JSON answer fails with KindInvalidResponse quoting its
// start. A stream that sends no bytes for
// Config.IdleTimeout fails with KindTimeout.
//
// stop_reason maps to finish reasons: end_turn and stop_sequence to stop,
// max_tokens and model_context_window_exceeded to length (a tool call cut
// off by it is marked Incomplete and never runs), tool_use to tool_calls,
// refusal to content_filter, pause_turn to pause. Usage follows
// llm.Usage's convention: InputTokens is input_tokens plus
// cache_read_input_tokens and cache_creation_input_tokens (Anthropic's
// input_tokens leaves cached input out), CacheReadTokens and
// CacheWriteTokens are those two. Usage reports are cumulative: each count
// a report carries replaces the one before, zero included (a final
// message_delta that reports no cache reads replaces the cache reads of
// message_start, as the blocking body says), and a count a report leaves
// out stays. A request the server compacted (context management) reports
// usage.iterations, one per sampling step, and top-level counts of the last
// step only; every step is billed, so the counts are the sums over the
// iterations.
//
// # Bounds
//
// One answer, blocking or streamed, carries at most Config.MaxAnswerBytes
// of content (text, thinking, tool-call names and arguments: 16 MiB by
// default), Config.MaxParts parts (8192; every content block counts, of any type) and Config.MaxToolCalls calls
// (4096). Past any of them the call fails with model.KindAnswerTooLarge,
// which is not retried: a blocking call returns no answer, and a stream
// ends with the error and is read no further (what it yielded folds into
// a truncated answer, whose calls never run). A blocking body is read
// up to Config.MaxResponseBytes (64 MiB) and measured once decoded; too
// many calls are refused before they are built. Config.Timeout (10 min)
// ends a stream that keeps sending, which the idle timeout cannot.
//
// A Model is safe for concurrent use.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/internal/sse"
	"github.com/loomkit/loom/model/internal/wire"
)

// Defaults of Config.
const (
	DefaultBaseURL   = "https://api.anthropic.com"
	DefaultVersion   = "2023-06-01"
	DefaultMaxTokens = 4096
	DefaultTimeout   = 10 * time.Minute
)

// Config configures a Model. The zero value is usable once a model name is
// given (here or per request) and an API key is set.
type Config struct {
	// APIKey is sent as x-api-key.
	APIKey string
	// BaseURL is the API root; requests go to BaseURL + "/v1/messages".
	// Empty means DefaultBaseURL.
	BaseURL string
	// Model is the model name used when a request names none.
	Model string
	// Version is sent as anthropic-version; empty means DefaultVersion.
	Version string
	// MaxTokens is max_tokens when a request sets none; 0 means
	// DefaultMaxTokens.
	MaxTokens int
	// ThinkingBudget, when positive, enables extended thinking with this
	// many budget tokens (it must be below max_tokens).
	ThinkingBudget int
	// NoStructuredOutput leaves Request.Schema out of the request (no
	// output_config), for Anthropic-compatible servers that refuse the
	// field or models without structured outputs. The answer is then
	// shaped by the prompt alone; callers validate it as they would anyway.
	NoStructuredOutput bool
	// MaxImages, when positive, keeps at most that many images in one
	// request (the API takes 100): the oldest are left out, each replaced
	// by a line saying so (the caller's history keeps them), to spend
	// fewer input tokens on old screenshots. 0 keeps the API's bounds only.
	MaxImages int
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Headers are added to every request (anthropic-beta, ...).
	Headers http.Header
	// IdleTimeout is how long a stream may send no bytes (pings count)
	// before it fails with KindTimeout; 0 means 90 s, negative disables.
	// It also bounds the wait for a stream's response headers.
	IdleTimeout time.Duration
	// Timeout bounds one call (one attempt), blocking or streaming, from
	// sending to the last byte; 0 means DefaultTimeout, negative disables.
	Timeout time.Duration
	// MaxResponseBytes bounds a blocking response body; 0 means 64 MiB.
	// A longer body fails with model.KindAnswerTooLarge after that much
	// is read.
	MaxResponseBytes int64
	// MaxAnswerBytes bounds the content of one answer, blocking or
	// streamed: its text, thinking and tool-call names and arguments
	// added up. An answer past it fails with model.KindAnswerTooLarge,
	// which is not retried, and none of it is used: a stream is not read
	// further, and no call of the answer runs. 0 means 16 MiB, negative
	// no bound.
	MaxAnswerBytes int64
	// MaxParts bounds the parts of one answer (text and thinking parts,
	// content blocks, tool calls) the same way; 0 means 8192, negative no
	// bound.
	MaxParts int
	// MaxToolCalls bounds the tool calls of one answer the same way; 0
	// means 4096, negative no bound.
	MaxToolCalls int
}

// Model is a model.Model speaking the Messages API.
type Model struct {
	cfg       Config
	url       string
	header    http.Header
	maxTokens int
	idle      time.Duration
	timeout   time.Duration
	limits    wire.AnswerLimits
	schemas   wire.Memo // output schemas fitted to the subset; nil: left out
}

var _ model.Model = (*Model)(nil)

const (
	opGenerate = "anthropic: messages"
	opStream   = "anthropic: messages stream"
)

// New returns a Model for cfg.
func New(cfg Config) *Model {
	m := &Model{cfg: cfg, maxTokens: cfg.MaxTokens, idle: cfg.IdleTimeout, timeout: cfg.Timeout}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	m.url = strings.TrimRight(base, "/") + "/v1/messages"
	if m.maxTokens <= 0 {
		m.maxTokens = DefaultMaxTokens
	}
	m.idle, m.timeout = wire.Limits(m.idle, m.timeout, DefaultTimeout)
	m.limits = wire.ResolveAnswerLimits(cfg.MaxAnswerBytes, cfg.MaxParts, cfg.MaxToolCalls)
	version := cfg.Version
	if version == "" {
		version = DefaultVersion
	}
	m.header = make(http.Header, len(cfg.Headers)+2)
	for k, vs := range cfg.Headers {
		m.header[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	m.header.Set("X-Api-Key", cfg.APIKey)
	m.header.Set("Anthropic-Version", version)
	return m
}

// Generate makes one blocking Messages call.
func (m *Model) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	body, err := m.encodeRequest(req, false, opGenerate)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, watch := wire.NewWatch(ctx, opGenerate, 0, m.timeout)
	defer watch.Stop()
	hreq, err := wire.NewRequest(ctx, m.url, body, m.header)
	if err != nil {
		return llm.Response{}, &model.Error{Kind: model.KindBadRequest, Op: opGenerate, Message: "cannot build the request (check BaseURL)", Err: err}
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := wire.Send(m.cfg.HTTPClient, hreq, opGenerate)
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	raw, err := wire.ReadBody(ctx, opGenerate, resp, m.cfg.MaxResponseBytes)
	if err != nil {
		return llm.Response{}, err
	}
	if err := wire.CheckJSON(opGenerate, resp, raw); err != nil {
		return llm.Response{}, err
	}
	return decodeMessage(opGenerate, resp, raw, m.limits)
}

// Stream makes one streaming Messages call; see model.Model for the
// contract. The request is sent when the range starts.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	var used atomic.Bool
	return func(yield func(llm.Event, error) bool) {
		if used.Swap(true) {
			yield(nil, &model.Error{Kind: model.KindBadRequest, Op: opStream, Message: "the stream was already ranged; a stream is single use"})
			return
		}
		m.stream(ctx, req, yield)
	}
}

func (m *Model) stream(ctx context.Context, req llm.Request, yield func(llm.Event, error) bool) {
	body, err := m.encodeRequest(req, true, opStream)
	if err != nil {
		yield(nil, err)
		return
	}
	ctx, watch := wire.NewWatch(ctx, opStream, m.idle, m.timeout)
	defer watch.Stop()
	hreq, err := wire.NewRequest(ctx, m.url, body, m.header)
	if err != nil {
		yield(nil, &model.Error{Kind: model.KindBadRequest, Op: opStream, Message: "cannot build the request (check BaseURL)", Err: err})
		return
	}
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := wire.Send(m.cfg.HTTPClient, hreq, opStream)
	if err != nil {
		yield(nil, err)
		return
	}
	defer resp.Body.Close()
	watch.Touch()
	if !wire.IsEventStream(resp) {
		m.notAStream(ctx, resp, yield)
		return
	}

	dec := sse.NewDecoder(watch.Body(resp.Body))
	p := newParser(opStream, resp.Header, m.limits)
	var out []llm.Event
	for {
		ev, err := dec.Next()
		if err != nil {
			yield(nil, m.readError(p, err))
			return
		}
		out, err = p.add(ev.Type, ev.Data, out[:0])
		for _, e := range out {
			if !yield(e, nil) {
				return
			}
		}
		if err != nil {
			yield(nil, err)
			return
		}
		if p.done {
			return
		}
	}
}

// readError maps a failure to read the next event.
func (m *Model) readError(p *parser, err error) error {
	if err == io.EOF {
		return p.end()
	}
	if errors.Is(err, sse.ErrLineTooLong) || errors.Is(err, sse.ErrEventTooLarge) {
		return &model.Error{Kind: model.KindInvalidResponse, Op: opStream, Message: "the stream holds an oversized event; it was abandoned", Err: err}
	}
	var me *model.Error
	if errors.As(err, &me) && me.Kind == model.KindNetwork {
		// The connection broke mid-stream: the answer is cut short.
		cut := p.end()
		var ce *model.Error
		if errors.As(cut, &ce) {
			ce.Message = "the connection broke " + strings.TrimPrefix(ce.Message, "the stream ended ")
			ce.Err = err
			return ce
		}
	}
	return err
}

// notAStream handles a 2xx answer to a streaming request that is not an
// event stream: a whole message (a proxy that ignored "stream") is replayed
// as the events a stream would have carried; an error object is that
// error; anything else (an HTML page) is an invalid response.
func (m *Model) notAStream(ctx context.Context, resp *http.Response, yield func(llm.Event, error) bool) {
	raw, err := wire.ReadBody(ctx, opStream, resp, m.cfg.MaxResponseBytes)
	if err != nil {
		yield(nil, err)
		return
	}
	if wire.CheckJSON(opStream, resp, raw) == nil {
		var probe struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &probe) == nil {
			switch probe.Type {
			case "message":
				r, err := decodeMessage(opStream, resp, raw, m.limits)
				if model.KindOf(err) == model.KindAnswerTooLarge {
					yield(nil, err)
					return
				}
				if err == nil {
					for _, e := range model.Events(r) {
						if !yield(e, nil) {
							return
						}
					}
					return
				}
			case "error":
				yield(nil, wire.StreamError(opStream, resp.Header, raw))
				return
			}
		}
	}
	e := wire.InvalidResponse(opStream, resp, raw, nil)
	e.Message = "want a text/event-stream, got Content-Type " + quoteOrNone(resp.Header.Get("Content-Type")) + ": " + e.Message
	yield(nil, e)
}

func quoteOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return `"` + s + `"`
}
