// Package openai is the model.Model for the OpenAI Chat Completions API
// (POST {BaseURL}/chat/completions), blocking and streaming, written on
// net/http. Any server that speaks the same format works through BaseURL:
// OpenRouter, DeepSeek, Ollama, vLLM, llama.cpp.
//
// # Requests
//
// The system prompt is the first message (role "system"). User text is a
// string, or content parts when the message has images (image_url, with
// bytes sent as a data: URL). Assistant turns carry their text and their
// tool calls, arguments as a JSON string (empty arguments as "{}");
// thinking is not sent back (the format has no field for it, and DeepSeek
// rejects reasoning_content in input). Each tool result of a user message
// becomes a "tool" message with its tool_call_id, in order, right after the
// assistant message that made the calls; the other parts of that user
// message follow as one user message. A failed result's content is
// prefixed "Error: ", the format having no error flag. Tool messages take
// text only, so the Images of a message's results go in that same user
// message, first: for each result with images, a text part "Images from
// the result of call <id> (<name>):" and then its image_url parts (bytes
// as a data: URL); the message's own parts come after them.
//
// Tools are functions with their JSON Schema as parameters. Tool choice
// auto is omitted (the API's default), required and none map to "required"
// and "none", one named tool to {"type":"function","function":{"name"}};
// several named tools map to "required", because the API cannot force a
// subset: the model may then call any advertised tool, and the run machine
// refuses calls outside the allowed set.
//
// Max tokens (Request.MaxTokens, else Config.MaxTokens, else not sent) goes
// in max_completion_tokens, which current OpenAI models require; set
// Config.LegacyMaxTokens for servers that only know max_tokens.
// Temperature, top_p, stop and an output schema (response_format
// json_schema) are sent when set. Config.ExtraBody adds top-level fields
// and wins over the adapter's own; Config.Headers adds headers. A
// streaming request asks for stream_options.include_usage.
//
// Before anything is sent the history is checked with llm.CheckHistory: a
// tool call without its result, or a result without its call, is refused
// with a *model.Error of KindBadRequest wrapping the *llm.HistoryError.
// Likewise llm.CheckImages refuses an image, as a part or in a result,
// with neither data nor a URL or with data but no media type (wrapping
// the *llm.ImageError). The body is encoded once, in one pass, and is replayable (GetBody), so a
// retry sends identical bytes. The retry attempt (model.RetryAttempt) is
// sent as X-Stainless-Retry-Count.
//
// # Responses
//
// A blocking body is decoded once and kept in Response.Raw. content
// becomes text, reasoning_content (DeepSeek, vLLM) or reasoning
// (OpenRouter, Ollama) becomes thinking, a refusal becomes text, and
// tool_calls become tool calls whose arguments are kept as sent: when they
// are not one JSON object (after llm.NormalizeArguments) the call is
// Malformed, never guessed at. content may also be an array of chunks
// (Mistral's reasoning models): its text chunks are text, its thinking
// chunks thinking, and chunks of other types (references, images) are
// skipped. A legacy function_call is a tool call whose id is "call_"
// followed by the response's id. Usage follows llm.Usage's convention:
// prompt_tokens (which includes cached input), completion_tokens,
// prompt_tokens_details.cached_tokens (or DeepSeek's
// prompt_cache_hit_tokens) and completion_tokens_details.reasoning_tokens;
// where the reasoning is counted outside completion_tokens (xAI, Gemini's
// OpenAI endpoint: total_tokens is prompt, completion and reasoning added
// up, or the reasoning exceeds the completion) it is added to
// OutputTokens. finish_reason maps to stop, length, tool_calls (also
// function_call), content_filter, or other. Only the choice with index 0
// is read; a body without one is an invalid response.
//
// A stream yields ResponseStart (id, model, x-request-id), text and
// thinking deltas, ToolCallStart for the first fragment of a call slot (or
// a fragment bringing a new id), ToolCallDelta for the fragments after it,
// ToolCallEnd for every open call when finish_reason arrives (except
// length: those calls stay open and the accumulator marks them
// Incomplete), UsageReport, and Finish at data: [DONE]. Tool-call indexes
// are taken as sent (negative ones as 0) and never used to size anything.
// A stream that ends without [DONE] but after a finish_reason is accepted
// as complete (only a trailing usage report can be missing); one that ends
// without either fails with KindTruncatedStream, and so does one whose
// connection breaks. One that reaches [DONE] without ever carrying choice
// 0 holds no answer and fails with KindInvalidResponse, as the blocking
// body would. A usage report carries prompt and completion tokens, and the
// cache and reasoning counts whose details it has (llm.UsageReport); one
// of only zeros is not passed on. A chunk with a top-level "error" member
// (or an "event: error") fails the stream with a *model.Error classified
// by the error's type and code (a numeric code, as OpenRouter sends, by
// the HTTP status it names), not by the HTTP 200. Unknown event types are
// ignored. A stream that sends no bytes for Config.IdleTimeout fails with
// KindTimeout; a single SSE line over 32 MiB fails with
// KindInvalidResponse, reading at most that much.
//
// A 200 answer that is an HTML page (a proxy's error page) fails with
// KindInvalidResponse quoting its start; a JSON body where a stream was
// asked for is read as a blocking answer (or error) and replayed as
// events.
//
// # Bounds
//
// One answer, blocking or streamed, carries at most Config.MaxAnswerBytes
// of content (text, thinking, tool-call names and arguments: 16 MiB by
// default), Config.MaxParts parts (8192) and Config.MaxToolCalls calls
// (4096). Past any of them the call fails with model.KindAnswerTooLarge,
// which is not retried: a blocking call returns no answer, and a stream
// ends with the error and is read no further (what it yielded folds into
// a truncated answer, whose calls never run). A blocking body is read
// up to Config.MaxResponseBytes (64 MiB) and measured once decoded; too
// many calls are refused before they are built. Config.Timeout (10 min)
// ends a stream that keeps sending, which the idle timeout cannot.
//
// A Model is safe for concurrent use.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"slices"
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
	DefaultBaseURL = "https://api.openai.com/v1"
	DefaultTimeout = 10 * time.Minute
)

// Config configures a Model. The zero value is usable with a server that
// needs no key once a model name is given, here or per request.
type Config struct {
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions".
	// Empty means DefaultBaseURL.
	BaseURL string
	// Model is the model name used when a request names none.
	Model string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Headers are added to every request (OpenAI-Organization, an
	// api-key header for Azure, ...); they win over the adapter's own.
	Headers http.Header
	// ExtraBody holds top-level body fields to add (reasoning_effort,
	// seed, provider-specific options). They win over the fields the
	// adapter sets itself, except "messages" and "stream", which are
	// refused. The map is encoded once, by New; do not change it after.
	ExtraBody map[string]any
	// MaxTokens is the output token limit when a request sets none; 0
	// sends none.
	MaxTokens int
	// LegacyMaxTokens sends the limit as max_tokens instead of
	// max_completion_tokens, for servers that only know the old name.
	LegacyMaxTokens bool
	// IdleTimeout is how long a stream may send no bytes (keep-alive
	// comments count) before it fails with KindTimeout; it also bounds
	// the wait for a stream's response headers. 0 means 90 s, negative
	// disables.
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
	// MaxImages, when positive, keeps at most that many images in one
	// request: the oldest are left out, each replaced by a line saying so
	// (the caller's history keeps them). Many OpenAI-compatible servers
	// take only a few images per request (vLLM one unless started with
	// --limit-mm-per-prompt), and every image costs input tokens. 0 sends
	// them all.
	MaxImages int
}

// Model is a model.Model speaking Chat Completions.
type Model struct {
	cfg       Config
	url       string
	header    http.Header
	idle      time.Duration
	timeout   time.Duration
	extra     map[string]bool // keys of ExtraBody
	extraJSON []byte          // ExtraBody encoded as `"k":v,...`
	extraErr  error
	limits    wire.AnswerLimits
	schemas   wire.Memo      // tool schemas compacted
	generate  *wire.Endpoint // requests for Generate
	streaming *wire.Endpoint // requests for Stream (Accept: text/event-stream)
}

var _ model.Model = (*Model)(nil)

const (
	opGenerate = "openai: chat completions"
	opStream   = "openai: chat completions stream"
)

// New returns a Model for cfg.
func New(cfg Config) *Model {
	m := &Model{cfg: cfg, idle: cfg.IdleTimeout, timeout: cfg.Timeout}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	m.url = strings.TrimRight(base, "/") + "/chat/completions"
	m.idle, m.timeout = wire.Limits(m.idle, m.timeout, DefaultTimeout)
	m.limits = wire.ResolveAnswerLimits(cfg.MaxAnswerBytes, cfg.MaxParts, cfg.MaxToolCalls)
	m.header = make(http.Header, len(cfg.Headers)+2)
	m.header.Set("Accept", "application/json")
	if cfg.APIKey != "" {
		m.header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	for k, vs := range cfg.Headers {
		m.header[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	m.encodeExtra()
	m.generate = wire.NewEndpoint(m.url, m.header)
	sh := m.header.Clone()
	sh.Set("Accept", "text/event-stream")
	m.streaming = wire.NewEndpoint(m.url, sh)
	return m
}

func (m *Model) encodeExtra() {
	if len(m.cfg.ExtraBody) == 0 {
		return
	}
	keys := make([]string, 0, len(m.cfg.ExtraBody))
	for k := range m.cfg.ExtraBody {
		if k == "messages" || k == "stream" {
			m.extraErr = errors.New("ExtraBody may not set " + k + ", which the adapter owns")
			return
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	m.extra = make(map[string]bool, len(keys))
	var b []byte
	for i, k := range keys {
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(m.cfg.ExtraBody[k])
		if err != nil {
			m.extraErr = err
			return
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(b, kb...), ':'), vb...)
		m.extra[k] = true
	}
	m.extraJSON = b
}

// Generate makes one blocking call.
func (m *Model) Generate(ctx context.Context, req llm.Request) (llm.Response, error) {
	body, err := m.encodeRequest(opGenerate, req, false)
	if err != nil {
		return llm.Response{}, err
	}
	ctx, w := wire.NewWatch(ctx, opGenerate, 0, m.timeout)
	defer w.Stop()
	hreq, err := m.generate.Request(ctx, body)
	if err != nil {
		return llm.Response{}, badRequest(opGenerate, "the request cannot be built (check BaseURL)", err)
	}
	resp, err := wire.Send(m.cfg.HTTPClient, hreq, opGenerate)
	if err != nil {
		return llm.Response{}, err
	}
	defer resp.Body.Close()
	data, err := wire.ReadBody(ctx, opGenerate, resp, m.cfg.MaxResponseBytes)
	if err != nil {
		return llm.Response{}, err
	}
	return decodeResponse(opGenerate, resp, data, m.limits)
}

// decodeResponse decodes a blocking body, once, and measures the answer
// against limits.
func decodeResponse(op string, resp *http.Response, data []byte, limits wire.AnswerLimits) (llm.Response, error) {
	if err := wire.CheckJSON(op, resp, data); err != nil {
		return llm.Response{}, err
	}
	var cr chatResponse
	if !fastResponse(data, &cr) {
		var err error
		if cr, err = slowResponse(data); err != nil {
			return llm.Response{}, wire.InvalidResponse(op, resp, data, err)
		}
	}
	if len(cr.Error) > 0 && string(cr.Error) != "null" && len(cr.Choices) == 0 {
		// Some compatible servers answer errors with 200.
		return llm.Response{}, wire.StreamError(op, resp.Header, data)
	}
	meter := wire.Meter{Limits: limits, Op: op, RequestID: wire.RequestID(resp.Header)}
	for i := range cr.Choices {
		if cr.Choices[i].Index == 0 {
			// Refused before the calls are built.
			if err := meter.CheckCalls(len(cr.Choices[i].Message.ToolCalls)); err != nil {
				return llm.Response{}, err
			}
		}
	}
	r, ok := cr.toResponse(wire.RequestID(resp.Header), data)
	if !ok {
		return llm.Response{}, wire.InvalidResponse(op, resp, data, errors.New("no choice with index 0"))
	}
	if err := meter.Response(r); err != nil {
		return llm.Response{}, err
	}
	return r, nil
}

// slowResponse decodes a blocking body with encoding/json, for what the
// fast path leaves to it.
func slowResponse(data []byte) (chatResponse, error) {
	var cr chatResponse
	err := json.Unmarshal(data, &cr)
	return cr, err
}

var errUsed = errors.New("openai: a stream can be ranged over only once; call Stream again for a new call")

// Stream makes one streaming call; see the package doc for the events.
func (m *Model) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Event, error] {
	var used atomic.Bool
	return func(yield func(llm.Event, error) bool) {
		if used.Swap(true) {
			yield(nil, errUsed)
			return
		}
		if err := m.stream(ctx, req, yield); err != nil {
			yield(nil, err)
		}
	}
}

// stream runs the call, yielding events; it returns the error to yield
// last, or nil (also when the consumer stopped).
func (m *Model) stream(ctx context.Context, req llm.Request, yield func(llm.Event, error) bool) error {
	body, err := m.encodeRequest(opStream, req, true)
	if err != nil {
		return err
	}
	ctx, w := wire.NewWatch(ctx, opStream, m.idle, m.timeout)
	defer w.Stop()
	hreq, err := m.streaming.Request(ctx, body)
	if err != nil {
		return badRequest(opStream, "the request cannot be built (check BaseURL)", err)
	}
	resp, err := wire.Send(m.cfg.HTTPClient, hreq, opStream)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	bodyR := w.Body(resp.Body)

	if !wire.IsEventStream(resp) {
		ct := strings.ToLower(resp.Header.Get("Content-Type"))
		switch {
		case strings.Contains(ct, "json"):
			// The server answered without streaming: an error, or a
			// whole completion.
			data, err := wire.ReadBody(ctx, opStream, &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: bodyR, ContentLength: resp.ContentLength}, m.cfg.MaxResponseBytes)
			if err != nil {
				return err
			}
			r, err := decodeResponse(opStream, resp, data, m.limits)
			if err != nil {
				return err
			}
			for _, ev := range model.Events(r) {
				if !yield(ev, nil) {
					return nil
				}
			}
			return nil
		case ct != "" && !strings.HasPrefix(ct, "text/plain"):
			// An HTML page or anything else that is no event stream.
			data, _ := io.ReadAll(io.LimitReader(bodyR, wire.MaxErrorBody))
			return wire.InvalidResponse(opStream, resp, data, nil)
		}
		// No or a plain content type: try it as an event stream.
	}

	dec := sse.NewDecoder(bodyR)
	defer dec.Close()
	p := newParser(opStream, resp.Header, m.limits)
	p.meter.RequestID = p.requestID
	evs := make([]llm.Event, 0, 8)
	for {
		sev, err := dec.Next()
		if err == io.EOF {
			evs, err = p.end(evs[:0])
			if !emit(yield, evs) {
				return nil
			}
			return err
		}
		if err != nil {
			return p.readError(err)
		}
		evs, err = p.feed(sev, evs[:0])
		if !emit(yield, evs) {
			return nil
		}
		if err != nil || p.done {
			return err
		}
	}
}

func emit(yield func(llm.Event, error) bool, evs []llm.Event) bool {
	for _, ev := range evs {
		if !yield(ev, nil) {
			return false
		}
	}
	return true
}

// readError maps a failure to read the stream: an over-long line is an
// invalid response; a broken connection is a truncated stream (what was
// yielded is all there is); timeouts and cancellation stay what they are.
func (p *parser) readError(err error) error {
	if errors.Is(err, sse.ErrLineTooLong) || errors.Is(err, sse.ErrEventTooLarge) {
		return &model.Error{Kind: model.KindInvalidResponse, Op: p.op, RequestID: p.requestID,
			Message: "the stream holds an event larger than the decoder accepts", Err: err}
	}
	var me *model.Error
	if errors.As(err, &me) && me.Kind == model.KindNetwork {
		return &model.Error{Kind: model.KindTruncatedStream, Op: p.op, RequestID: p.requestID,
			Message: "the connection broke before the stream ended", Err: err}
	}
	return err
}
