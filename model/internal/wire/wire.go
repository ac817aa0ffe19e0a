// Package wire is the HTTP plumbing the provider adapters share: building
// replayable requests, sending them, turning every failure (a non-2xx
// status, a broken connection, a body that is not JSON, a quiet stream, a
// cancelled context) into a *model.Error of the right Kind, and reading the
// provider's retry hints.
//
// The rules follow the official SDKs where they agree, and the project's
// reference notes where they do not (quota exhaustion is terminal; stream
// error events are classified by their type, never by the HTTP 200 that
// carried them).
//
// Everything here is safe for concurrent use; a Watch belongs to one call.
package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/loomkit/loom/model"
)

// Limits on what is read from a provider.
const (
	// DefaultMaxBody bounds a blocking response body.
	DefaultMaxBody = 64 << 20
	// MaxErrorBody bounds the body read from a non-2xx response.
	MaxErrorBody = 64 << 10
	// RawKeep is how much of a body is kept in model.Error.Raw.
	RawKeep = 8 << 10
	// snippetLen is how much of a body an error message quotes.
	snippetLen = 200
)

// AttemptHeader carries the retry attempt number (0 for the first try),
// as the official SDKs send it.
const AttemptHeader = "X-Stainless-Retry-Count"

// NewRequest returns a POST of body to url under ctx, with the headers of h
// (copied) and Content-Type application/json. The body is replayable
// (GetBody returns the same bytes), so a retry after a dropped connection
// sends an identical request. The attempt number from model.RetryAttempt
// goes in AttemptHeader.
func NewRequest(ctx context.Context, url string, body []byte, h http.Header) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// NewRequest sets GetBody for a *bytes.Reader already; set it anyway
	// so the guarantee does not hang on that detail.
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	for k, vs := range h {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(AttemptHeader, strconv.Itoa(model.RetryAttempt(ctx)))
	return req, nil
}

// Send sends req with client (http.DefaultClient when nil) and returns the
// response when its status is 2xx. Otherwise it returns a *model.Error: from
// the status and the error body (which it reads and closes), or from the
// transport failure (see TransportError).
func Send(client *http.Client, req *http.Request, op string) (*http.Response, error) {
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, TransportError(req.Context(), op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, StatusError(op, resp)
	}
	return resp, nil
}

// TransportError maps a failure to send or read under ctx:
//   - ctx cancelled with a *model.Error as its cause (a Watch firing):
//     that error;
//   - ctx cancelled by the caller: ctx's error wrapped, not a *model.Error,
//     so errors.Is(err, context.Canceled) holds and nothing retries it;
//   - ctx past its deadline, or a network timeout: KindTimeout (wrapping
//     context.DeadlineExceeded where that was the cause);
//   - anything else (refused, reset, EOF before the response): KindNetwork.
func TransportError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		var me *model.Error
		if cause := context.Cause(ctx); errors.As(cause, &me) {
			return me
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &model.Error{Kind: model.KindTimeout, Op: op, Message: "the context deadline passed", Err: ctx.Err()}
		}
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var me *model.Error
	if errors.As(err, &me) {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &model.Error{Kind: model.KindTimeout, Op: op, Err: err}
	}
	msg := "the connection failed"
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		msg = "the connection was refused"
	case errors.Is(err, syscall.ECONNRESET):
		msg = "the connection was reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		msg = "the connection closed early"
	}
	return &model.Error{Kind: model.KindNetwork, Op: op, Message: msg, Err: err}
}

// StatusError builds the error for a non-2xx response, reading at most
// MaxErrorBody bytes of its body (the caller closes it).
func StatusError(op string, resp *http.Response) *model.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	return ErrorFromBody(op, resp.StatusCode, resp.Header, body)
}

// ErrorFromBody builds the error for an error response of the given status
// and headers whose body is body. It reads both the OpenAI shape
// ({"error":{"message","type","code"}}) and the Anthropic one
// ({"type":"error","error":{"type","message"},"request_id"}), as well as
// {"error":"text"} and {"message":"text"} from compatible servers. A body
// that is not JSON (an HTML page from a proxy) is quoted in the message.
// The Kind comes from the status, refined by the provider's type or code.
// Status 0 or 2xx means the error arrived inside a stream: the Kind then
// comes from the status a numeric code names (OpenRouter's codes are HTTP
// statuses), else from the type alone (see StreamError).
func ErrorFromBody(op string, status int, h http.Header, body []byte) *model.Error {
	pe, ok := parseProviderError(body)
	e := &model.Error{
		Op:          op,
		Status:      status,
		Type:        pe.kindWord(),
		Message:     pe.Message,
		RequestID:   RequestID(h),
		RetryAfter:  RetryAfter(h, time.Now()),
		ShouldRetry: ShouldRetry(h),
		Raw:         keepRaw(body),
	}
	if e.RequestID == "" {
		e.RequestID = pe.RequestID
	}
	if !ok && len(bytes.TrimSpace(body)) > 0 {
		e.Message = "the body is not a JSON error: " + Snippet(body)
	}
	e.Kind = Classify(status, pe)
	return e
}

// StreamError builds the error for an error that arrived inside a stream
// after HTTP 200 (an OpenAI chunk with an "error" member, an Anthropic
// "event: error"). data is the event's JSON; h the response headers. The
// Kind comes from the status a numeric error code names, else from the
// provider's error type, never from the 200; the Status is left 0.
func StreamError(op string, h http.Header, data []byte) *model.Error {
	e := ErrorFromBody(op, 0, h, data)
	if e.Message == "" {
		e.Message = "the provider sent an error event"
	}
	return e
}

// Classify returns the Kind for an error of the given HTTP status (0 or 2xx
// for an error inside a stream) and provider details.
func Classify(status int, pe ProviderError) model.Kind {
	words := strings.ToLower(pe.Type + " " + pe.Code + " " + pe.DetailCode)
	msg := strings.ToLower(pe.Message)
	has := func(list ...string) bool {
		for _, w := range list {
			if strings.Contains(words, w) {
				return true
			}
		}
		return false
	}
	inStream := status == 0 || (status >= 200 && status <= 299)
	if inStream && pe.Status >= 300 {
		// An error inside a stream that names its status: classify it
		// as that status, so a 400 is not retried and a 429 is.
		status = pe.Status
	}
	if has("insufficient_quota", "enforced_spend_limit_reached", "billing", "quota_exceeded", "spend_limit") ||
		strings.Contains(msg, "exceeded your current quota") || strings.Contains(msg, "spend limit") ||
		strings.Contains(msg, "credit balance is too low") || strings.Contains(msg, "api usage limits") ||
		status == http.StatusPaymentRequired {
		return model.KindQuota
	}
	contextTooLong := has("context_length_exceeded", "context_window_exceeded", "string_above_max_length") ||
		strings.Contains(msg, "context length") || strings.Contains(msg, "context window") ||
		strings.Contains(msg, "prompt is too long") || strings.Contains(msg, "maximum context")
	var kind model.Kind
	switch {
	case status == 0 || (status >= 200 && status <= 299):
		kind = kindOfType(has)
	case status == 400 || status == 422:
		kind = model.KindBadRequest
	case status == 401:
		kind = model.KindAuth
	case status == 403:
		kind = model.KindPermission
	case status == 404:
		kind = model.KindNotFound
	case status == 408:
		kind = model.KindTimeout
	case status == 413:
		kind = model.KindRequestTooLarge
	case status == 429:
		kind = model.KindRateLimited
	case status == 529:
		kind = model.KindOverloaded
	case status == 409 || status >= 500:
		kind = model.KindServer
		if has("overloaded") {
			kind = model.KindOverloaded
		}
	case status >= 400:
		kind = model.KindBadRequest
	default:
		kind = model.KindInvalidResponse
	}
	if contextTooLong && (kind == model.KindBadRequest || kind == model.KindRequestTooLarge || inStream) {
		return model.KindContextTooLong
	}
	return kind
}

// kindOfType classifies an in-stream error by its type words alone.
func kindOfType(has func(...string) bool) model.Kind {
	switch {
	case has("overloaded"):
		return model.KindOverloaded
	case has("rate_limit"):
		return model.KindRateLimited
	case has("authentication", "invalid_api_key"):
		return model.KindAuth
	case has("permission"):
		return model.KindPermission
	case has("not_found"):
		return model.KindNotFound
	case has("request_too_large"):
		return model.KindRequestTooLarge
	case has("timeout"):
		return model.KindTimeout
	case has("invalid_request"):
		return model.KindBadRequest
	}
	// api_error, server_error and anything unknown: the provider failed
	// while answering; a fresh attempt may succeed.
	return model.KindServer
}

// ProviderError is what a provider's error body says.
type ProviderError struct {
	Type       string // error.type, or the top-level type when it is not "error"
	Code       string // error.code (OpenAI), a string or a number
	DetailCode string // error.details.error_code (Anthropic spend limits)
	Message    string
	RequestID  string // request_id in the body (Anthropic)
	// Status is the HTTP status a numeric code names (OpenRouter sends
	// its errors' statuses as error.code, also inside a 200 stream), 0
	// when the code is no such number.
	Status int
}

// kindWord is the most specific word the provider gave.
func (p ProviderError) kindWord() string {
	switch {
	case p.DetailCode != "":
		return p.DetailCode
	case p.Code != "" && p.Code != p.Type && p.Type != "invalid_request_error" && p.Type != "":
		return p.Type + "/" + p.Code
	case p.Code != "":
		return p.Code
	}
	return p.Type
}

// ParseProviderError reads an error body; ok is false when it is not a
// JSON object.
func ParseProviderError(body []byte) (ProviderError, bool) { return parseProviderError(body) }

func parseProviderError(body []byte) (ProviderError, bool) {
	var top struct {
		Error     jsonAny `json:"error"`
		Type      string  `json:"type"`
		Message   string  `json:"message"`
		Detail    jsonAny `json:"detail"`
		RequestID string  `json:"request_id"`
		Code      jsonAny `json:"code"`
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || jsonUnmarshal(trimmed, &top) != nil {
		return ProviderError{}, false
	}
	pe := ProviderError{RequestID: top.RequestID, Message: top.Message, Code: top.Code.text(), Status: top.Code.status()}
	if top.Type != "error" {
		pe.Type = top.Type
	}
	switch {
	case top.Error.obj != nil:
		var inner struct {
			Type    string  `json:"type"`
			Code    jsonAny `json:"code"`
			Message string  `json:"message"`
			Details struct {
				ErrorCode string `json:"error_code"`
			} `json:"details"`
		}
		if jsonUnmarshal(top.Error.obj, &inner) == nil {
			if inner.Type != "" {
				pe.Type = inner.Type
			}
			if c := inner.Code.text(); c != "" {
				pe.Code, pe.Status = c, inner.Code.status()
			}
			if inner.Message != "" {
				pe.Message = inner.Message
			}
			pe.DetailCode = inner.Details.ErrorCode
		}
	case top.Error.str != "":
		pe.Message = top.Error.str
	}
	if pe.Message == "" {
		pe.Message = top.Detail.text()
	}
	return pe, true
}

// RequestID returns the provider's request id from x-request-id or
// request-id.
func RequestID(h http.Header) string {
	if id := h.Get("X-Request-Id"); id != "" {
		return id
	}
	return h.Get("Request-Id")
}

// RetryAfter returns how long the provider asked to wait: retry-after-ms
// (float milliseconds) wins over retry-after (float seconds, or an HTTP
// date taken relative to now). Values that are negative, zero, in the
// past, NaN, infinite or unparsable are ignored; 0 means no usable hint.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if d, ok := positiveDuration(v, float64(time.Millisecond)); ok {
			return d
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if d, ok := positiveDuration(v, float64(time.Second)); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// maxHint bounds a parsed hint so the conversion cannot overflow; the
// retry policy caps what it will actually wait far below this.
const maxHint = 365 * 24 * time.Hour

func positiveDuration(v string, unit float64) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, false
	}
	if f*unit >= float64(maxHint) {
		return maxHint, true
	}
	return time.Duration(f * unit), true
}

// ShouldRetry returns the provider's x-should-retry verdict, or nil when
// the header is absent or neither "true" nor "false".
func ShouldRetry(h http.Header) *bool {
	switch strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry"))) {
	case "true":
		t := true
		return &t
	case "false":
		f := false
		return &f
	}
	return nil
}

// ReadBody reads a 2xx response body whole, refusing one over max bytes
// (DefaultMaxBody when max <= 0) with a KindAnswerTooLarge error, having
// read at most max+1 bytes. A read failure is mapped by TransportError
// under ctx.
func ReadBody(ctx context.Context, op string, resp *http.Response, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxBody
	}
	size := int64(bytes.MinRead)
	if resp.ContentLength > 0 && resp.ContentLength <= max {
		size = resp.ContentLength + 1 // +1 so the final read sees EOF without growing
	}
	// The buffer doubles, but never past max+1 bytes: reading a body
	// that is too long holds at most about one and a half times the bound.
	buf := make([]byte, 0, size)
	limit := int(max + 1)
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := resp.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) >= limit {
			return nil, &model.Error{
				Kind: model.KindAnswerTooLarge, Op: op, Status: resp.StatusCode,
				RequestID: RequestID(resp.Header),
				Message:   fmt.Sprintf("the response body exceeds %d bytes (the adapter's Config.MaxResponseBytes); none of it is used", max),
				Raw:       keepRaw(buf),
			}
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, TransportError(ctx, op, err)
		}
	}
}

// InvalidResponse returns a KindInvalidResponse error for a 2xx body the
// adapter could not use, quoting its start. cause may be nil.
func InvalidResponse(op string, resp *http.Response, body []byte, cause error) *model.Error {
	e := &model.Error{Kind: model.KindInvalidResponse, Op: op, Raw: keepRaw(body), Err: cause}
	if resp != nil {
		e.Status = resp.StatusCode
		e.RequestID = RequestID(resp.Header)
	}
	ct := ""
	if resp != nil {
		ct = resp.Header.Get("Content-Type")
	}
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		e.Message = "the body is empty"
	case !looksJSON(body):
		e.Message = "the body is not JSON"
		if ct != "" {
			e.Message += " (Content-Type " + ct + ")"
		}
		e.Message += ": " + Snippet(body)
	default:
		e.Message = "the body does not match the API: " + Snippet(body)
	}
	return e
}

// CheckJSON returns an InvalidResponse error when resp's Content-Type is
// plainly not JSON or event-stream (an HTML page from a proxy), quoting
// the start of body. It returns nil otherwise.
func CheckJSON(op string, resp *http.Response, body []byte) error {
	if !looksJSON(body) {
		return InvalidResponse(op, resp, body, nil)
	}
	return nil
}

// IsEventStream reports whether resp declares a text/event-stream body.
func IsEventStream(resp *http.Response) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Type"))), "text/event-stream")
}

func looksJSON(body []byte) bool {
	b := bytes.TrimSpace(body)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// Snippet quotes the start of a body for an error message: at most 200
// bytes, cut on a rune boundary, as a Go string literal.
func Snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	cut := len(b) > snippetLen
	if cut {
		b = b[:snippetLen]
		// Do not end on half a character.
		for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
				break
			}
			b = b[:len(b)-1]
		}
	}
	s := strconv.Quote(string(b))
	if cut {
		s += "..."
	}
	return s
}

func keepRaw(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	return bytes.Clone(body[:min(len(body), RawKeep)])
}
